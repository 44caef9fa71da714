"""Software-pipeline a streaming loop: `tl.range(..., num_stages=S)` on every runtime loop of a
kernel that loads without `tl.dot`, so its loads are issued S - 1 iterations ahead.

Triton 3.6 pipelines such a loop (cp.async into shared memory) only when the loop itself asks;
the launch's `num_stages` reaches loops that feed `tl.dot` alone. sm_90 AOT compile of a column
strip loop (128 x 64 tiles, 8 warps): the same PTX at launch stages 1, 3 and 5, no cp.async;
17 / 27 cp.async and 32 / 64 KB of shared memory at `tl.range` stages 3 / 5. On an H200 that
loop summed 128 MB in 236 / 61 / 40 / 36 us at 1 / 3 / 5 / 8 stages (col_sum 16384x4096, run
AG). A program that keeps few tiles in flight (few programs, or a grid under one wave) gains the
most; where many programs already saturate the bandwidth the cost model sees no gain.

Preconditions: the kernel has no `tl.dot`, and a `range` / `tl.range` loop whose body loads.
Correctness does not depend on the stages (Triton pipelines only what it can prove safe).
"""

from __future__ import annotations

import ast

from ..rules.analysis import kwarg
from .base import Mutation, MutationContext, mutator
from .edits import Edits

STAGES = (3, 2, 4, 5, 6)  # proposal order from an unpipelined loop: Triton's default depth first


def loop_stages(loop: ast.For) -> int:
    """The stages a loop asks for: its literal `num_stages`, else 1 (not pipelined)."""
    value = kwarg(loop.iter, "num_stages", 3)  # type: ignore[arg-type]
    return value.value if isinstance(value, ast.Constant) and isinstance(value.value, int) else 1


def streaming_loops(ctx: MutationContext) -> list[ast.For]:
    kv = ctx.kernel
    if kv is None or kv.uses("dot"):
        return []
    loaded = {id(kv.loop_of(c)) for c in kv.tl_calls("load")}
    return [loop for loop in kv.pipelined_loops() if id(loop) in loaded]


@mutator("loop-stages", "software-pipeline a streaming loop's loads (tl.range num_stages)")
def propose(ctx: MutationContext):
    loops = streaming_loops(ctx)
    if not loops:
        return
    current = {loop_stages(loop) for loop in loops}
    here = max(current)
    for stages in sorted(STAGES, key=lambda s: (abs(s - here) if here > 1 else 0, STAGES.index(s))):
        if current == {stages}:
            continue
        edits = Edits(ctx.source)
        for loop in loops:
            call = loop.iter
            assert isinstance(call, ast.Call)
            args = [edits.text(a) for a in call.args[:3]]  # a fourth positional argument is num_stages
            args += [f"{k.arg}={edits.text(k.value)}" for k in call.keywords if k.arg != "num_stages"]
            edits.replace(call, f"tl.range({', '.join(args)}, num_stages={stages})")
        lines = ", ".join(str(loop.lineno) for loop in loops)
        yield Mutation(edits.apply(), "loop-stages",
                       f"the loop{'s' if len(loops) > 1 else ''} at line{'s' if len(loops) > 1 else ''} {lines} "
                       f"software-pipelined {stages} stages deep (`tl.range(..., num_stages={stages})`: loads "
                       f"issued {stages - 1} iteration{'s' if stages > 2 else ''} ahead)")
