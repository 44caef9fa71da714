"""The `grouped-order` mutator."""

from __future__ import annotations

import pytest

from kernelbrain.engine.evaluate.verify import verify

from .helpers import example, propose, suite_matmul


def test_grouped_order_only_for_ungrouped_matmul():
    assert propose("grouped-order", *example("softmax")) == []
    task, source = example("matmul")
    p = propose("grouped-order", task, source)[0]
    assert "GROUP_M" in p.source and "triton.cdiv(M, 64) * triton.cdiv(N, 64)," in p.source
    assert propose("grouped-order", task, p.source) == []  # already grouped


@pytest.mark.slow
def test_grouped_order_groups_a_1d_grid_split_by_division(pool):
    """Public matmuls often walk a 1-D grid row by row (`pid_m = pid // n_tiles_n`, `pid_n = pid %
    n_tiles_n`): the grouped walk replaces the two divisions, the grid stays, and the variant is
    verified. A divisor that is not the column tiles' count is no row-major walk: left alone."""
    task, source = suite_matmul()
    p = propose("grouped-order", task, source)[0]
    assert "n_tiles_n" not in p.source and "group_size_m" in p.source  # its divisor went too
    assert "grid = (triton.cdiv(M, 32) * triton.cdiv(N, 32),)" in p.source
    assert "GROUP_M=8)" in p.source and "# fmt: skip  # fmt: skip" not in p.source
    assert propose("grouped-order", task, p.source) == []  # already grouped
    report = verify(pool, task, p.source, "cpu")
    assert report.accepted, f"{report.stage}/{report.reason}: {report.message}"
    other = source.replace("n_tiles_n = tl.cdiv(N, BLOCK_N)", "n_tiles_n = tl.cdiv(M, BLOCK_M)")
    assert propose("grouped-order", task, other) == []
