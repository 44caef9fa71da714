"""Software-pipeline a streaming loop: `tl.range(..., num_stages=S)` on every runtime loop of a
kernel that loads without `tl.dot`, so its loads are issued S - 1 iterations ahead.

Triton 3.6 pipelines such a loop (cp.async into shared memory) only when the loop itself asks;
the launch's `num_stages` reaches loops that feed `tl.dot` alone. sm_90 AOT compile of a column
strip loop (128 x 64 tiles, 8 warps): the same PTX at launch stages 1, 3 and 5, no cp.async;
17 / 27 cp.async and 32 / 64 KB of shared memory at `tl.range` stages 3 / 5. On an H200 that
loop summed 128 MB in 236 / 61 / 40 / 36 us at 1 / 3 / 5 / 8 stages (col_sum 16384x4096, run
AG). A program that keeps few tiles in flight (few programs, or a grid under one wave) gains the
most; where many programs already saturate the bandwidth the cost model sees no gain.

Preconditions: the kernel has no `tl.dot`, and `range` / `tl.range` loops whose bodies load, none
of them pipelined yet. Once they are, `config` retunes the depth together with the tiles and warps
(`pipelined_depth`): the depth that pays depends on the tile (H200 col_sum column strips:
256 x 32 at 4 warps took 37.0 / 44.3 / 39.6 us at 4 / 5 / 6 stages, 256 x 64 at 8 warps 37.3 /
35.7 / 35.9 us), so one knob at a time walks past the best pairs. Correctness does not depend on the
stages (Triton pipelines only what it can prove safe).
"""

from __future__ import annotations

import ast

from ..rules.analysis import kwarg
from .edits import Edits
from .registry import Mutation, MutationContext, mutator

STAGES = (3, 2, 4, 5, 6)  # proposal order from an unpipelined loop: Triton's default depth first


def _asked(loop: ast.For) -> ast.expr | None:
    return kwarg(loop.iter, "num_stages", 3)  # type: ignore[arg-type]  # a fourth positional argument too


def streaming_loops(ctx: MutationContext) -> list[ast.For]:
    kv = ctx.kernel
    if kv is None or kv.uses("dot"):
        return []
    loaded = {id(kv.loop_of(c)) for c in kv.tl_calls("load")}
    return [loop for loop in kv.pipelined_loops() if id(loop) in loaded]


def pipelined_depth(ctx: MutationContext) -> int | None:
    """The depth the kernel's streaming loops are pipelined at, where every one asks for the same
    literal `num_stages`: the knob `config` tunes. None where a loop is unpipelined or asks for a
    name (an autotuned `LOOP_STAGES`)."""
    asked = [_asked(loop) for loop in streaming_loops(ctx)]
    depths = {
        a.value if isinstance(a, ast.Constant) and isinstance(a.value, int) else None for a in asked
    }
    return depths.pop() if len(depths) == 1 and None not in depths else None


def set_depth(edits: Edits, loops: list[ast.For], stages: str) -> Edits:
    """Every loop of `loops` as `tl.range(..., num_stages=stages)` (a literal or a constexpr name)."""
    for loop in loops:
        call = loop.iter
        assert isinstance(call, ast.Call)
        args = [edits.text(a) for a in call.args[:3]]  # a fourth positional argument is num_stages
        args += [f"{k.arg}={edits.text(k.value)}" for k in call.keywords if k.arg != "num_stages"]
        edits.replace(call, f"tl.range({', '.join(args)}, num_stages={stages})")
    return edits


@mutator("loop-stages", "software-pipeline a streaming loop's loads (tl.range num_stages)")
def propose(ctx: MutationContext):
    loops = streaming_loops(ctx)
    if not loops or any(_asked(loop) is not None for loop in loops):
        return  # pipelined already: `config` retunes the depth with the tiles
    lines = ", ".join(str(loop.lineno) for loop in loops)
    for stages in STAGES:
        yield Mutation(
            set_depth(Edits(ctx.source), loops, str(stages)).apply(),
            "loop-stages",
            f"the loop{'s' if len(loops) > 1 else ''} at line{'s' if len(loops) > 1 else ''} {lines} "
            f"software-pipelined {stages} stages deep (`tl.range(..., num_stages={stages})`: loads "
            f"issued {stages - 1} iteration{'s' if stages > 2 else ''} ahead)",
        )
