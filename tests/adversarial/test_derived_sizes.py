"""The shape sweep skips a size it made up when the task's reference refuses it (RoPE's `cos`
is tied to half the head size, which the sweep cannot see), and only then: a candidate that
drops its mask still fails on the sizes the reference takes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ..conftest import EXAMPLES
from ..test_evaluate_cli import cli

SUITE = Path(__file__).parents[2] / "bench" / "suite"
CONFIG = """[[tasks]]
file = "rope.py"
kernel = "rope_kernel"
entry = "rope"
reference = "rope_ref"
inputs = "rope_inputs"
small_inputs = "rope_small_inputs"
"""
MASK = "mask = offs < head_dim // 2"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    shutil.copy(SUITE / "rope.py", tmp_path / "rope.py")
    (tmp_path / "kernelbrain.toml").write_text(CONFIG)
    return tmp_path


def verify(ws: Path, candidate: Path) -> dict:
    proc = cli("verify", "rope.py::rope_kernel", "--candidate", str(candidate), "--device", "cpu",
               "--json", cwd=ws)  # fmt: skip
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_sizes_the_reference_refuses_are_skipped_and_a_dropped_mask_still_fails(ws):
    original = verify(ws, ws / "rope.py")
    assert original["accepted"] is True, original  # the sweep's odd head sizes: refused, skipped
    source = (ws / "rope.py").read_text()
    assert MASK in source
    unmasked = ws / "rope_unmasked.py"
    unmasked.write_text(source.replace(MASK, "mask = offs < HALF"))
    verdict = verify(ws, unmasked)
    assert verdict["accepted"] is False, verdict
    assert verdict["stage"] in ("smoke", "sweep"), verdict


def test_a_cpu_verdict_says_the_benchmark_shapes_went_unchecked(tmp_path):
    """A candidate gated on the benchmark shapes (here: a softmax whose denominator sums one
    block when a row has 4096 columns or more) is wrong only where the CPU stages never go. The
    CPU verdict cannot catch it; it must say that those shapes were not run. The original
    checking itself is not a verdict on a candidate and carries no such note."""
    from kernelbrain.engine.evaluate.pool import WorkerPool
    from kernelbrain.engine.evaluate.verify import run_harness
    from kernelbrain.engine.task import find_task

    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLES, ws, ignore=shutil.ignore_patterns(".kernelbrain", "__pycache__"))
    source = (ws / "ops" / "softmax.py").read_text()
    gated = (
        source.replace(
            "n_cols, BLOCK_SIZE: tl.constexpr):",
            "n_cols, BLOCK_SIZE: tl.constexpr, CHEAT: tl.constexpr = False):",
        )
        .replace(
            "for start in range(0, n_cols, BLOCK_SIZE):",
            "for start in range(0, BLOCK_SIZE if CHEAT else n_cols, BLOCK_SIZE):",
            1,
        )
        .replace("BLOCK_SIZE=1024)", "BLOCK_SIZE=1024, CHEAT=n_cols >= 4096)")
    )
    assert gated.count("CHEAT") == 3
    task = find_task(ws / "ops" / "softmax.py", "softmax_kernel")
    with WorkerPool() as pool:
        result = run_harness(pool, task, gated, "cpu")
        original = run_harness(pool, task, None, "cpu")
    assert any("benchmark cases themselves were not run" in n for n in result.notes), result
    assert original.accepted and not any("were not run" in n for n in original.notes)
