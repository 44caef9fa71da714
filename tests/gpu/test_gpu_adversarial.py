"""Attacks on the verdict, on the H200: cached outputs, zeros above a width, the input returned as
the output; an honest faster variant is still accepted with a measured speedup."""

from __future__ import annotations

import shutil

import pytest

from kernelbrain.engine.evaluate.pool import WorkerPool
from kernelbrain.engine.evaluate.verify import run_harness, verify
from kernelbrain.engine.task import find_task

from ..adversarial.attacks import ATTACKS, BASE, RETURN, edit
from .slowdowns import EXAMPLES, slowed_softmax

pytestmark = pytest.mark.gpu

ZEROS_ABOVE_A_WIDTH = edit(
    (RETURN, "    if n_cols > 2048:\n        return torch.zeros_like(x)\n" + RETURN)
)


@pytest.fixture(scope="module")
def pool():
    with WorkerPool() as p:
        yield p


@pytest.fixture(scope="module")
def task():
    return find_task(BASE, "softmax_kernel")


def test_verdict_attacks_are_rejected_on_the_gpu(pool, task):
    for name in ("output cached in a module dict", "output cached on the input tensor"):
        report = verify(pool, task, ATTACKS[name].source, "cuda:0")
        assert (report.accepted, report.stage, report.reason) == (False, "gate", "stateful")
    # the benchmark widths (4096) are checked on the GPU: zeros are caught there
    report = verify(pool, task, ZEROS_ABOVE_A_WIDTH, "cuda:0")
    assert (report.accepted, report.stage) == (False, "sweep"), report.message
    assert report.reason == "mismatch" and "case 1" in report.message
    report = verify(pool, task, ATTACKS["result written into the input"].source, "cuda:0")
    assert (report.accepted, report.reason) == (False, "mutated-input"), report.message
    # past the gate, a forged verdict still fails in the judge
    forged = run_harness(
        pool, task, ATTACKS["forged harness verdict on the answer pipe"].source, "cuda:0"
    )
    assert (forged.accepted, forged.reason) == (False, "protocol")


def test_honest_faster_variant_is_accepted_with_a_measured_speedup(pool, tmp_path):
    """A workspace whose kernel does ~10% extra work; the plain kernel is an honest faster
    variant: the judge accepts it and timing measures the gain."""
    workspace = tmp_path / "examples"
    shutil.copytree(
        EXAMPLES, workspace, ignore=shutil.ignore_patterns(".kernelbrain", "__pycache__")
    )
    path = workspace / "ops" / "softmax.py"
    fast = path.read_text()
    path.write_text(slowed_softmax(fast))
    report = verify(pool, find_task(path, "softmax_kernel"), fast, "cuda:0")
    assert report.accepted, report.message
    assert report.timing is not None and report.timing.verdict == "faster", report.timing
    assert 1.03 < report.timing.speedup < 1.5
