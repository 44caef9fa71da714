"""The corpus on a GPU: every original passes its own harness compiled (the warmup launcher
included, which the CPU cannot run), and the TF32 matmul draft with fp32 inputs is searched, not
refused, its best variant no worse than the original against the reference."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from kernelbrain.engine.api.request import OptimizeRequest
from kernelbrain.engine.evaluate.pool import WorkerPool
from kernelbrain.engine.evaluate.verify import verify
from kernelbrain.engine.service import optimize
from kernelbrain.engine.task import find_task

pytestmark = pytest.mark.gpu

CORPUS = Path(__file__).parent.parent / "corpus"
TASKS = [
    (t["file"], t["kernel"])
    for t in tomllib.loads((CORPUS / "kernelbrain.toml").read_text())["tasks"]
]
BUDGET_S = 60.0


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    ws = tmp_path_factory.mktemp("corpus") / "ws"
    shutil.copytree(CORPUS, ws, ignore=shutil.ignore_patterns("__pycache__", ".kernelbrain"))
    return ws


def test_every_original_passes_its_harness_compiled(corpus):
    failed = {}
    with WorkerPool() as pool:
        for file, kernel in TASKS:
            task = find_task(corpus / file, kernel)
            report = verify(pool, task, (corpus / file).read_text(), "cuda:0", timing=False)
            if not report.accepted:
                failed[kernel] = f"{report.reason}: {report.message[:600]}"
    assert not failed, failed


def test_a_tf32_matmul_is_searched_and_its_best_is_no_worse(corpus):
    result = optimize(
        OptimizeRequest(
            file=str(corpus / "matmul_pruned.py"),
            kernel="matmul_kernel",
            budget_s=BUDGET_S,
            device="cuda:0",
        )
    )
    assert result.measured and result.baseline, result.notes
    assert result.budget.spent.wall_s <= BUDGET_S * 1.05, (
        result.budget.spent,
        result.rung_seconds,
        result.notes,
    )
    if result.best is not None:
        task = find_task(corpus / "matmul_pruned.py", "matmul_kernel")
        best = next(v for v in result.variants if v.id == result.best)
        with WorkerPool() as pool:
            report = verify(pool, task, best.source, "cuda:0", timing=False)
        assert report.accepted, report.message
