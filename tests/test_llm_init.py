"""`kernelbrain init --llm` against a scripted OpenAI-compatible server on 127.0.0.1: the drafted
harness is written only when the original kernel passes it; a draft the original fails, one
that reaches outside (the gate) and garbage are fed back as failures; when no round holds,
nothing is written and the exit code says "harness"."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from kernelbrain.engine.task import find_task

from .conftest import EXAMPLES
from .scripted_llm import Answer, ScriptedLLM, rewrite

SENTINEL = "sk-kbsentinel-init-0123456789abcdef"

HARNESS = """import torch


def gelu_reference(x):
    return REFERENCE


def gelu_inputs(device="cuda"):
    return [(torch.randn(n, device=device, dtype=torch.bfloat16),) for n in (1 << 20, 10_000_019)]


def gelu_small_inputs(device="cpu"):
    return [(torch.randn(n, device=device, dtype=torch.bfloat16),) for n in (1000, 4099)]
"""
GOOD = HARNESS.replace(
    "REFERENCE", 'torch.nn.functional.gelu(x.float(), approximate="tanh").to(x.dtype)'
)
WRONG = HARNESS.replace("REFERENCE", "torch.relu(x)")
REACHES_OUT = "import os\n" + GOOD.replace("return [(", "os.getenv('HOME')\n    return [(", 1)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A kernel file with no harness: the bundled GELU draft alone in a folder."""
    (tmp_path / "ops").mkdir()
    shutil.copy(EXAMPLES / "ops" / "gelu.py", tmp_path / "ops" / "gelu.py")
    return tmp_path


def init_llm(ws: Path, llm: ScriptedLLM) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        KERNELBRAIN_LLM_BASE_URL=llm.base_url,
        KERNELBRAIN_API_KEY=SENTINEL,
        KERNELBRAIN_LLM_MODEL="scripted",
    )
    return subprocess.run(
        [sys.executable, "-m", "kernelbrain.engine.cli.main", "init", "ops/gelu.py::gelu_kernel",
         "--llm", "--device", "cpu"],
        cwd=ws, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_a_drafted_harness_is_written_once_the_original_passes_it(ws):
    script = [
        rewrite(WRONG, "relu"),
        rewrite(REACHES_OUT, "reads HOME"),
        rewrite(GOOD, "tanh GELU"),
    ]
    with ScriptedLLM(script) as llm:
        proc = init_llm(ws, llm)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout
    assert len(llm.requests) == 3
    # each failure went back to the LLM: the original failing the wrong reference, then the gate
    second = str(llm.requests[1]["body"]["messages"])
    third = str(llm.requests[2]["body"]["messages"])
    assert "the original kernel fails it" in second and "torch.relu" in second
    assert "os" in third and "failed" in third
    harness = ws / "ops" / "gelu_harness.py"
    assert harness.read_text() == GOOD
    config = tomllib.loads((ws / "ops" / "kernelbrain.toml").read_text())
    assert config["tasks"][0]["reference"].endswith("gelu_harness.py:gelu_reference")
    task = find_task(ws / "ops" / "gelu.py", "gelu_kernel")  # a harness the engine accepts
    assert task.reference == "gelu_reference"
    assert "in 3 round(s)" in proc.stdout and "Read it before you trust it" in proc.stdout
    # no scratch copy left behind, and the key in no file written
    assert not any((ws / "ops" / ".kernelbrain" / "drafts").iterdir())
    for f in ws.rglob("*"):
        if f.is_file():
            assert SENTINEL.encode() not in f.read_bytes(), f


def test_when_no_round_holds_nothing_is_written_and_the_exit_says_harness(ws):
    script = [Answer("I cannot help with that."), rewrite(WRONG), rewrite(WRONG)]
    with ScriptedLLM(script) as llm:
        proc = init_llm(ws, llm)
    assert proc.returncode == 2, proc.stdout + proc.stderr[-2000:]
    assert "was not written" in proc.stderr and "after 3 rounds" in proc.stderr
    assert "kernelbrain init ops/gelu.py::gelu_kernel" in proc.stderr
    assert not (ws / "ops" / "gelu_harness.py").exists()
    assert not (ws / "ops" / "kernelbrain.toml").exists()
    assert SENTINEL not in proc.stdout + proc.stderr
