"""The `loop-stages` mutator."""

from __future__ import annotations

from kernelbrain.engine.task.spec import Task

from .helpers import BLOCK_SUM, example, propose


def test_loop_stages_pipelines_streaming_loops_and_leaves_dot_loops_to_the_launch():
    """Triton 3.6 pipelines a loop without `tl.dot` only through `tl.range(..., num_stages=S)`:
    every such loop of the kernel gets the same depth, Triton's default first; a dot loop, an
    unrolled loop and a loop that loads nothing are left alone."""
    task, source = example("cross_entropy")
    proposals = propose("loop-stages", task, source)
    loops = source.count("in range(")
    assert loops and proposals[0].source.count("num_stages=3)") == loops
    assert sorted(int(p.source.split("num_stages=")[1][0]) for p in proposals) == [2, 3, 4, 5, 6]
    assert (
        propose("loop-stages", task, proposals[0].source) == []
    )  # pipelined: `config` retunes the depth
    assert (
        propose("loop-stages", *example("matmul")) == []
    )  # a dot loop: the launch's stages pipeline it
    assert propose("loop-stages", *example("col_sum")) == []  # no loop
    task_c, col_sum = example("col_sum")
    assert (
        propose("loop-stages", task_c, propose("coarsen-atomics", task_c, col_sum)[0].source) == []
    )  # unrolled
    task_k = Task("config", "/tmp/k.py", "k", "run", "/tmp/k.py", "run", "/tmp/k.py:run")
    no_load = BLOCK_SUM.replace(
        "    partial = tl.sum(x.to(tl.float32), axis=0)\n",
        "    partial = tl.sum(x.to(tl.float32), axis=0)\n    for i in range(n):\n        partial += i\n",
    )
    assert "for i in range(n):" in no_load and propose("loop-stages", task_k, no_load) == []
