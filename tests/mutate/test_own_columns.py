"""The `own-columns` mutator."""

from __future__ import annotations

from kernelbrain.engine.task.spec import Task

from .helpers import BLOCK_SUM, example, propose


def test_own_columns_loops_over_the_grid_axis_it_can_count():
    task = Task("config", "/tmp/k.py", "k", "run", "/tmp/k.py", "run", "/tmp/k.py:run")
    (p,) = propose("own-columns", task, BLOCK_SUM)
    assert (
        "for pid in tl.range(1, tl.cdiv(n, BLOCK), num_stages=3):" in p.source
        and "k[(1,)](x, out" in p.source
    )
    assert "tl.store(out_ptr, partial)" in p.source and "atomic_add" not in p.source
    # the grid's block count must be the kernel's own: the same bound and the block's constexpr
    assert (
        propose(
            "own-columns",
            task,
            BLOCK_SUM.replace("triton.cdiv(x.numel(), 256)", "triton.cdiv(x.numel(), 128)"),
        )
        == []
    )
    assert (
        propose(
            "own-columns",
            task,
            BLOCK_SUM.replace("triton.cdiv(x.numel(), 256)", "triton.cdiv(x.numel() + 1, 256)"),
        )
        == []
    )
    assert (
        propose(
            "own-columns",
            task,
            BLOCK_SUM.replace("triton.cdiv(x.numel(), 256)", "x.numel() // 256"),
        )
        == []
    )
    # what a split reduction needs (as for coarsen-atomics), and a plain atomic
    assert (
        propose(
            "own-columns",
            task,
            BLOCK_SUM.replace("atomic_add(out_ptr,", "atomic_add(out_ptr + pid,"),
        )
        == []
    )
    assert propose("own-columns", task, BLOCK_SUM.replace("other=0.0", "other=float('-inf')")) == []
    assert (
        propose(
            "own-columns",
            task,
            BLOCK_SUM.replace(
                "atomic_add(out_ptr, partial)", "atomic_add(out_ptr, partial, sem='relaxed')"
            ),
        )
        == []
    )
    task_c, col_sum = example("col_sum")
    (own,) = propose("own-columns", task_c, col_sum)
    assert "grid = (triton.cdiv(n_cols, 64), 1)" in own.source
    assert "for pid_m in tl.range(1, tl.cdiv(n_rows, BLOCK_M), num_stages=3):" in own.source
    assert propose("own-columns", task_c, own.source) == []  # no atomic left
    assert (
        propose("own-columns", task_c, propose("coarsen-atomics", task_c, col_sum)[0].source) == []
    )
    cleaned = propose("launcher-cleanup", task_c, own.source)
    assert (
        cleaned and "out = torch.empty(n_cols" in cleaned[0].source
    )  # the kernel now writes every element
