"""KB111: a large (or input-sized) block launched with the default 4 warps."""

from __future__ import annotations

import ast

from .analysis import DEFAULT_NUM_WARPS
from .registry import RuleContext, rule

LARGE = 4096


@rule("KB111", "large-block-default-warps", "a large block launched without num_warps")
def check(ctx: RuleContext):
    for lv in ctx.launches:
        kv = lv.kernel
        if kv.uses("dot") or lv.may_set("num_warps"):
            continue
        for dim in kv.arange_bounds():
            arg = lv.args.get(dim)
            value = lv.const_int(arg)
            resolved = lv.resolve(arg)
            dynamic = resolved is not None and "next_power_of_2" in ast.unparse(resolved)
            if value is not None and value >= LARGE:
                size = f"{dim}={value}"
                per_thread = f"{value // (32 * DEFAULT_NUM_WARPS)} values per thread"
            elif dynamic:
                size = f"{dim}={ast.unparse(resolved)}"
                per_thread = "a number of values per thread that grows with the input"
            else:
                continue
            yield ctx.finding(
                "KB111",
                f"{size} runs with the default num_warps={DEFAULT_NUM_WARPS}, leaving {per_thread}: "
                f"register pressure rises until values spill to local memory. Scale warps with the block, "
                f"e.g. num_warps=8 from 2048 elements and 16 from 8192.",
                lv.call,
                kv.name,
            )
