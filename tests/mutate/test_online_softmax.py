"""The `online-softmax` mutator."""

from __future__ import annotations

import pytest

from kernelbrain.engine.evaluate.verify import verify

from .helpers import example, propose


def test_online_softmax_refuses_other_reductions():
    assert propose("online-softmax", *example("rmsnorm")) == []
    task, source = example("softmax")
    uses_max_between = source.replace(
        "    d = tl.zeros([BLOCK_SIZE], tl.float32)\n",
        "    d = tl.zeros([BLOCK_SIZE], tl.float32) + row_max * 0\n",
    )
    assert propose("online-softmax", task, uses_max_between) == []
    p = propose("online-softmax", task, source)[0]
    assert (
        p.source.count("for start in range(0, n_cols, BLOCK_SIZE)") == 2
    )  # three passes became two


@pytest.mark.slow
def test_online_softmax_block_wise_form_is_verified_and_needs_a_whole_row_maximum(pool):
    task, source = example("cross_entropy")
    lane, block = propose("online-softmax", task, source)
    assert "tl.exp(m - m_new)" in lane.source  # two exponentials per element
    loop = block.source.split("for start in range(0, n_cols, BLOCK_SIZE):")[1].split("lse =")[0]
    assert (
        loop.count("tl.exp(") == 2
        and "tl.max(x, axis=0)" in loop
        and "tl.maximum(m, x)" not in loop
    )
    assert "m = tl.full" not in block.source  # the lane-wise maximum is gone, not left dead
    # the sum is only reduced whole after the loop: one scalar too, each block adding its own sum
    assert "s = 0.0" in block.source and "tl.sum(tl.exp(x - row_max_safe), axis=0)" in loop
    assert "lse = row_max + tl.log(s)" in block.source
    report = verify(pool, task, block.source, "cpu")
    assert report.accepted, f"{report.stage}/{report.reason}: {report.message}"
    # the sum read lane by lane after the loop: it stays a block-wide accumulator
    reads_s_lanes = source.replace(
        "    tl.store(loss_ptr + row, lse - x_t)",
        "    tl.store(loss_ptr + row, lse - x_t + tl.max(s, axis=0) * 0)",
    )
    vector = propose("online-softmax", task, reads_s_lanes)[1]
    assert (
        "s = tl.zeros([BLOCK_SIZE], tl.float32)" in vector.source
        and "tl.log(tl.sum(s, axis=0))" in vector.source
    )
    assert "+ tl.exp(x - row_max_safe)" in vector.source
    # a float64 sum would become a float32 scalar: it stays as it is
    f64 = source.replace(
        "s = tl.zeros([BLOCK_SIZE], tl.float32)", "s = tl.zeros([BLOCK_SIZE], tl.float64)"
    )
    assert (
        "s = tl.zeros([BLOCK_SIZE], tl.float64)" in propose("online-softmax", task, f64)[1].source
    )
    # the lane maximum read again after the loops: only the lane-wise form keeps it right
    reads_m_later = source.replace(
        "    tl.store(loss_ptr + row, lse - x_t)",
        "    tl.store(loss_ptr + row, lse - x_t + tl.sum(m, axis=0) * 0)",
    )
    assert [p.source for p in propose("online-softmax", task, reads_m_later)][1:] == []
    # a maximum reduced along one axis of a 2-D tile is not one scalar per program
    per_axis = source.replace("row_max = tl.max(m, axis=0)", "row_max = tl.max(m, axis=1)")
    assert len(propose("online-softmax", task, per_axis)) == 1
