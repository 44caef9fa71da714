"""KB101: the same input is streamed from global memory in several separate loops."""

from __future__ import annotations

from .registry import RuleContext, rule


@rule("KB101", "multi-pass", "the same data is read from global memory in several loops")
def check(ctx: RuleContext):
    for kv in ctx.kernels:
        by_param: dict[str, list] = {}
        for load in kv.tl_calls("load"):
            loop = kv.loop_of(load)
            if loop is None:
                continue
            for p in kv.pointer_params_of(load):
                first_per_loop = by_param.setdefault(p, [])
                if all(loop is not seen for seen, _ in first_per_loop):
                    first_per_loop.append((loop, load))
        for p, loops in by_param.items():
            if len(loops) < 2:
                continue
            lines = ", ".join(str(loop.lineno) for loop, _ in loops)
            n = len(loops)
            yield ctx.finding(
                "KB101",
                f"`{p}` is read in {n} separate loops (lines {lines}): each pass streams the data from "
                f"global memory again, {n}x the bytes of a single pass. When a row fits in registers "
                f"(up to ~16K elements), load it once with a block that covers the row and reuse it; "
                f"otherwise fuse the passes (an online max/sum rescales the running sum when the max grows).",
                loops[1][1],
                kv.name,
            )
