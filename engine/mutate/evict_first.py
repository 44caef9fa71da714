"""Mark a stream that each program reads once as first to leave the L2 cache.

A memory-bound kernel that reads its input once (gelu, the single-pass and online forms of softmax,
rmsnorm and cross-entropy, col_sum) fills L2 with lines nobody reads again, and they push out the
lines somebody does: a broadcast weight, a gathered target, the next program's halo.
`eviction_policy="evict_first"` on the streaming load says so to the hardware; what it is worth
is for the timing to say (the search measures every variant).

Preconditions, per pointer parameter: the kernel makes no `tl.dot` (matmul tiles are re-read by
whole rows and columns of programs through L2); the parameter is only read, by exactly one load
of a tile (a `tl.arange` run); that load's addresses depend on the program id (each program reads
its own slice, where a weight every program loads would be evicted for all of them) and, inside
loops, on every enclosing loop's variable (each iteration reads new data); and it sets no cache
or eviction policy of its own. Gathers (loads without a tile run) stay as they are.
"""

from __future__ import annotations

import ast

from ..rules.analysis import KernelView, kwarg
from .base import Mutation, MutationContext, mutator
from .edits import Edits


def _advances_with_loops(kv: KernelView, call: ast.Call, pointer: ast.expr) -> bool:
    """Whether the load's addresses change with every loop around it (a `while` never counts)."""
    outer = kv.loop_of(call)
    if outer is None:
        return True
    line = call.lineno
    around = [n for n in ast.walk(outer) if isinstance(n, (ast.For, ast.While))
              and n.lineno <= line <= (n.end_lineno or n.lineno)]
    for loop in around:
        if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)):
            return False
        var = loop.target.id
        if not kv.reaches(pointer, f"loop-var:{var}", lambda n, v=var: type(n) is ast.Name and n.id == v):
            return False
    return True


def streamed_loads(kv: KernelView) -> list[ast.Call]:
    """The loads the rewrite marks (see the module's preconditions)."""
    if kv.uses("dot"):
        return []
    out = []
    for param in (p for p in kv.params if kv.is_runtime_param(p)):
        loads = kv.loads_of(param)
        if not loads or kv.stores_to(param) or kv.atomics_on(param):
            continue
        tiles = [c for c in loads if kv.unit_stride_bounds(kwarg(c, "pointer", 0))]
        if len(tiles) != 1:
            continue
        call = tiles[0]
        pointer = kwarg(call, "pointer", 0)
        if kwarg(call, "eviction_policy") is not None or kwarg(call, "cache_modifier") is not None:
            continue
        if kv.depends_on_program_id(pointer) and _advances_with_loops(kv, call, pointer):
            out.append(call)
    return out


@mutator("evict-first", "a stream each program reads once leaves the L2 cache first (`eviction_policy`)")
def propose(ctx: MutationContext):
    kv = ctx.kernel
    if kv is None:
        return
    loads = streamed_loads(kv)
    if not loads:
        return
    edits = Edits(ctx.source)
    for call in loads:
        edits.add_keyword(call, "eviction_policy", '"evict_first"')
    names = sorted({p for c in loads for p in kv.pointer_params_of(c)})
    yield Mutation(edits.apply(), "evict-first",
                   f"the load{'s' if len(loads) > 1 else ''} of {', '.join(f'`{n}`' for n in names)} (read once per "
                   f"program, each program its own slice) marked `eviction_policy=\"evict_first\"`: the stream "
                   f"leaves L2 before lines that are read again")
