"""KB112: a matmul whose programs walk output tiles in plain row-major order."""

from __future__ import annotations

import ast

from .registry import RuleContext, rule


@rule("KB112", "ungrouped-program-order", "matmul tiles visited in row-major order (poor L2 reuse)")
def check(ctx: RuleContext):
    for kv in ctx.kernels:
        if not kv.uses("dot"):
            continue
        names = {n.id.lower() for n in kv.nodes if isinstance(n, ast.Name)} | {
            p.lower() for p in kv.params
        }
        if any("group" in n for n in names) or kv.uses("swizzle2d"):
            continue
        pids = kv.tl_calls("program_id")
        if not pids:
            continue
        yield ctx.finding(
            "KB112",
            "programs visit output tiles in row-major order: consecutive programs share one row-block of A "
            "but sweep all of B, so B tiles are evicted from L2 before they are reused. Group programs "
            "(GROUP_M=8 tiles per column sweep, as in Triton's matmul tutorial) so concurrent programs "
            "reuse both operands from L2; typically 5-15% at 4096^3.",
            pids[0],
            kv.name,
        )
