"""The `coarsen-atomics` mutator."""

from __future__ import annotations

from kernelbrain.engine.task.spec import Task

from .helpers import BLOCK_SUM, example, propose


def test_coarsen_atomics_only_where_programs_meet_in_the_same_output():
    task = Task("config", "/tmp/k.py", "k", "run", "/tmp/k.py", "run", "/tmp/k.py:run")
    p = propose("coarsen-atomics", task, BLOCK_SUM)  # a total sum: every program adds into out_ptr
    assert [m.knobs["ITERS"] for m in p] == [4, 8, 16]
    assert (
        "for it in tl.static_range(ITERS):" in p[0].source
        and "triton.cdiv(triton.cdiv(x.numel(), 256), 4)" in p[0].source
    )
    # each program owns its own output element: nothing to combine
    assert (
        propose(
            "coarsen-atomics",
            task,
            BLOCK_SUM.replace("atomic_add(out_ptr,", "atomic_add(out_ptr + pid,"),
        )
        == []
    )
    # masked-off elements are not zero: the blocks past the end would add -inf
    assert (
        propose("coarsen-atomics", task, BLOCK_SUM.replace("other=0.0", "other=float('-inf')"))
        == []
    )
    assert propose("coarsen-atomics", task, BLOCK_SUM.replace(", other=0.0", "")) == []
    assert propose("coarsen-atomics", task, BLOCK_SUM.replace("atomic_add", "atomic_max")) == []
    assert propose("coarsen-atomics", *example("softmax")) == []  # no atomics
    task_c, col_sum = example("col_sum")
    coarse = propose("coarsen-atomics", task_c, col_sum)[0]
    assert (
        "grid = (triton.cdiv(n_cols, 64), triton.cdiv(triton.cdiv(n_rows, 32), 4))" in coarse.source
    )
    assert (
        propose("coarsen-atomics", task_c, coarse.source) == []
    )  # already coarsened: it sums an accumulator
