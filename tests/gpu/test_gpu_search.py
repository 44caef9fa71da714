"""A whole search on the GPU, through the optimize service as the CLI and the editor run it: the
device's runner and judge start early, the original is timed on every case, candidates are
judged and timed, no honest candidate trips the timing's integrity checks, and the budget holds."""

from __future__ import annotations

import shutil

import pytest

from kernelbrain.engine.api.request import OptimizeRequest
from kernelbrain.engine.service import optimize

from .slowdowns import EXAMPLES

pytestmark = pytest.mark.gpu

BUDGET_S = 60.0
INTEGRITY = ("less-work", "forged-timing", "stale-output")  # what only a cheat should trip


def test_a_gpu_search_times_judges_and_keeps_its_budget(tmp_path):
    workspace = tmp_path / "examples"
    shutil.copytree(
        EXAMPLES, workspace, ignore=shutil.ignore_patterns(".kernelbrain", "__pycache__")
    )
    result = optimize(
        OptimizeRequest(
            file=str(workspace / "ops" / "softmax.py"),
            kernel="softmax_kernel",
            budget_s=BUDGET_S,
            device="cuda:0",
        )
    )
    assert result.measured and result.device == "cuda:0"
    assert len(result.baseline) == 3 and all(
        c.measured and c.time_us > 0 for c in result.baseline
    ), result.baseline
    assert result.candidates.total > 0, result.notes
    tripped = [p for p in result.trajectory if any(r in p.outcome for r in INTEGRITY)]
    assert not tripped, tripped
    for v in result.variants:
        assert v.measured and len(v.per_case) == 3, v
    assert result.budget.spent.wall_s <= BUDGET_S * 1.05, result.budget.spent
    # the GPU's busy share once candidates reached it: a share, said in the result
    share = result.budget.spent.gpu_busy_share
    assert share is not None and 0.0 < share <= 1.0, result.budget.spent
