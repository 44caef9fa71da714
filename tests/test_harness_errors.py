"""Errors a user can act on: each broken piece of a harness exits 2 and says "harness", only a
failing original exits 1, and `--json` always prints one object (with `error` on failure)."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from .test_evaluate_cli import cli as run_cli

KERNEL = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * FACTOR, mask=offs < n)

    def scale(x):
        out = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
        return out

    def scale_ref(x):
        return x * 2

    def scale_inputs(device="cuda"):
        return [(torch.randn(4096, device=device),)]

    def scale_small_inputs(device="cpu"):
        return [(torch.randn(100, device=device),)]
""")
CONFIG = """[[tasks]]
file = "ops/scale.py"
kernel = "scale_kernel"
entry = "scale"
reference = "scale_ref"
inputs = "scale_inputs"
small_inputs = "scale_small_inputs"
"""
CANDIDATE = "# a candidate: the kernel as it is\n"


def workspace(tmp_path: Path, *edits: tuple[str, str], config: str = CONFIG) -> Path:
    source = KERNEL.replace("FACTOR", "2")
    for old, new in edits:
        assert old in source, old
        source = source.replace(old, new)
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "scale.py").write_text(source)
    (tmp_path / "kernelbrain.toml").write_text(config)
    (tmp_path / "candidate.py").write_text(source + CANDIDATE)
    return tmp_path


def cli(ws: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=ws)


def optimize(ws: Path) -> subprocess.CompletedProcess:
    return cli(
        ws, "optimize", "ops/scale.py::scale_kernel", "--device", "cpu", "--budget", "60s",
        "--max-candidates", "2", "--json",
    )  # fmt: skip


def error_of(proc: subprocess.CompletedProcess) -> dict:
    """The one JSON object a failing `--json` command prints."""
    return json.loads(proc.stdout)["error"]


BROKEN = [
    (
        "reference raises",
        ("    return x * 2\n", "    raise ValueError('reference bug')\n"),
        "reference raised ValueError: reference bug",
    ),
    (
        "reference returns the wrong shape",
        ("    return x * 2\n", "    return (x * 2)[:10]\n"),
        "the kernel's entry and the harness's reference return different outputs",
    ),
    (
        "small inputs raise",
        (
            "    return [(torch.randn(100, device=device),)]\n",
            "    raise RuntimeError('no small inputs today')\n",
        ),
        "no small inputs today",
    ),
]


@pytest.mark.parametrize("name,edit,words", BROKEN, ids=[b[0] for b in BROKEN])
def test_a_broken_harness_exits_2_and_says_harness(tmp_path, name, edit, words):
    ws = workspace(tmp_path, edit)
    proc = optimize(ws)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    err = error_of(proc)
    assert err["kind"] == "harness" and err["exit"] == 2, err
    assert "harness error" in err["message"] and words in err["message"], err["message"]
    assert "original kernel fails" not in err["message"]
    assert "harness error" in proc.stderr
    checked = cli(ws, "verify", "ops/scale.py::scale_kernel", "--candidate", "candidate.py")
    assert checked.returncode == 2 and words in checked.stdout + checked.stderr, checked.stdout


def test_benchmark_inputs_that_raise_are_a_harness_error_not_an_empty_search(tmp_path):
    ws = workspace(
        tmp_path,
        (
            "    return [(torch.randn(4096, device=device),)]\n",
            "    raise RuntimeError('inputs bug')\n",
        ),
    )
    proc = optimize(ws)
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    err = error_of(proc)
    assert err["kind"] == "harness" and "`scale_inputs`" in err["message"], err
    assert "inputs bug" in err["message"]


@pytest.mark.parametrize(
    "edit,words",
    [
        (("mask=offs < n) * 2", "mask=offs < n) * 3"), "mismatch"),
        (("    out = torch.empty_like(x)\n", "    out = torch.empty_like(x)\n    1 / 0\n"),
         "the original kernel raised ZeroDivisionError"),
    ],
    ids=["wrong values", "raises"],
)  # fmt: skip
def test_only_a_failing_original_exits_1(tmp_path, edit, words):
    ws = workspace(tmp_path, edit)
    proc = optimize(ws)
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    err = error_of(proc)
    assert err["kind"] == "original" and err["exit"] == 1, err
    assert "the original kernel fails its own harness" in err["message"]
    assert words in err["message"] and "candidate" not in err["message"], err["message"]


def test_a_mistyped_config_key_names_its_line_and_the_key_meant(tmp_path):
    ws = workspace(tmp_path, config=CONFIG.replace("reference =", "refrence ="))
    proc = optimize(ws)
    assert proc.returncode == 2
    err = error_of(proc)
    assert err["kind"] == "harness", err
    assert "kernelbrain.toml:5:" in err["message"] and "did you mean `reference`?" in err["message"]


def test_optimize_help_lists_exit_codes():
    proc = run_cli("optimize", "--help")
    assert proc.returncode == 0
    assert "exit status:" in proc.stdout and "1  the original kernel fails" in proc.stdout
    assert "2  usage or harness error" in proc.stdout
