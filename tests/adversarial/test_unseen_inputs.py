"""Candidates right on every input a harness would draw predictably, wrong on inputs a user runs:
float32 where the benchmark is half precision, rows that sit apart in memory, row counts past the
seeded ones. Each class in variations of its own, on the bundled softmax (bf16 small cases,
strides honoured by the original), judged as `verify` judges, on the CPU."""

from __future__ import annotations

import pytest

from kernelbrain.engine.evaluate.pool import WorkerPool
from kernelbrain.engine.evaluate.verify import run_harness
from kernelbrain.engine.task import find_task

from ..conftest import EXAMPLES

SOURCE = (EXAMPLES / "ops" / "softmax.py").read_text(encoding="utf-8")
ROW_MAX = "    row_max = tl.max(m, axis=0)\n"
ROWS = "    x_row = x_ptr + row * stride_x\n    out_row = out_ptr + row * stride_out\n"
STORE = "        tl.store(out_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)\n"


def edit(old: str, new: str) -> str:
    assert old in SOURCE, old
    return SOURCE.replace(old, new)


WRONG: dict[str, tuple[str, str]] = {
    # float32 only: a stabilising step skipped, or a scale off, where half precision never goes
    "row max skipped in float32": (
        edit(
            ROW_MAX,
            ROW_MAX + "    if x_ptr.dtype.element_ty == tl.float32:\n        row_max = 0.0\n",
        ),
        "stability",
    ),
    "scaled in float32": (
        edit(
            STORE,
            "        if x_ptr.dtype.element_ty == tl.float32:\n            y = y * 1.05\n" + STORE,
        ),
        "sweep",
    ),
    # the row length taken for the row stride: right on every dense input
    "row stride ignored on the input": (
        edit(ROWS, "    x_row = x_ptr + row * n_cols\n    out_row = out_ptr + row * stride_out\n"),
        "edge",
    ),
    "row stride ignored on both": (
        edit(ROWS, "    x_row = x_ptr + row * n_cols\n    out_row = out_ptr + row * n_cols\n"),
        "edge",
    ),
    # wrong past the row counts the seeded sweep takes (at most 7 here: 5 rows -> 7, 3 -> 5)
    "wrong from row 8 on": (
        edit(STORE, "        if row >= 8:\n            y = y * 0.5\n" + STORE),
        "sweep",
    ),
    "wrong on odd row counts past 7": (
        edit(
            STORE,
            "        if (tl.num_programs(0) % 2 == 1) & (tl.num_programs(0) > 7):\n"
            "            y = y * 1.5\n" + STORE,
        ),
        "sweep",
    ),
}


@pytest.fixture(scope="module")
def pool():
    with WorkerPool() as p:
        yield p


@pytest.mark.slow
def test_wrong_only_on_inputs_no_seeded_case_holds_is_rejected(pool):
    task = find_task(EXAMPLES / "ops" / "softmax.py", "softmax_kernel")
    wrong = []
    for name, (source, stage) in WRONG.items():
        result = run_harness(pool, task, source, "cpu")
        if result.accepted or result.stage != stage:
            wrong.append(
                f"{name}: {result.accepted, result.stage, result.reason}: {result.message}"
            )
    assert not wrong, "\n".join(wrong)
    # the original itself passes every one of those inputs
    assert run_harness(pool, task, SOURCE + "\n# the original\n", "cpu").accepted


RMSNORM = (EXAMPLES / "ops" / "rmsnorm.py").read_text(encoding="utf-8")
CORPUS = EXAMPLES.parent / "tests" / "corpus"
LAYER_NORM = (CORPUS / "layer_norm.py").read_text(encoding="utf-8")
# A kernel that ignores the caller's float argument for a literal of its own: right on every
# case whose value it guessed. The rmsnorm's harness never passes `eps` (its default is used),
# the layer norm's passes 1e-5 in every case.
IGNORED_FLOATS = {
    "rmsnorm's defaulted eps": (
        EXAMPLES / "ops" / "rmsnorm.py",
        "rmsnorm_kernel",
        RMSNORM.replace("x2.shape[1], eps, BLOCK_SIZE", "x2.shape[1], 1e-6, BLOCK_SIZE"),
    ),
    "layer norm's eps passed in every case": (
        CORPUS / "layer_norm.py",
        "layer_norm_fwd_kernel",
        LAYER_NORM.replace("n_cols, eps,\n", "n_cols, 1e-5,\n"),
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(IGNORED_FLOATS))
def test_a_kernel_that_ignores_a_float_argument_is_rejected(pool, name):
    file, kernel, source = IGNORED_FLOATS[name]
    assert source != file.read_text(encoding="utf-8")
    task = find_task(file, kernel)
    result = run_harness(pool, task, source, "cpu")
    assert not result.accepted, f"{name}: accepted"
    assert result.stage == "sweep" and result.reason == "mismatch", (result.reason, result.message)
    assert "other float arguments" in result.message
