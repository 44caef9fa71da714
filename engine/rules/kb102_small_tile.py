"""KB102: an elementwise or row tile too small for the warps launched."""

from __future__ import annotations

import math

from .analysis import DEFAULT_NUM_WARPS
from .registry import RuleContext, rule

MIN_TILE = 256
MIN_PER_THREAD = 4  # 4 x fp32 = one 128-bit load per thread


def _verdict(tile: int, num_warps: int) -> str | None:
    per_thread = tile / (32 * num_warps)
    if tile >= MIN_TILE and per_thread >= MIN_PER_THREAD:
        return None
    if per_thread < 1:
        why = f"{32 * num_warps - tile} of the {32 * num_warps} threads have nothing to do"
    else:
        why = "loads cannot be 128-bit wide"
    return (
        f"gives each program {tile} elements ({per_thread:g} per thread with num_warps={num_warps}): {why}, "
        f"and the grid has {max(1024 // max(tile, 1), 1)}x more programs than a 1024-element tile needs, so "
        f"launch and scheduling overhead dominate. Use tiles of >= 1024 elements (>= 8 per thread), "
        f"e.g. BLOCK=1024 with num_warps=4."
    )


def _tile(values: list) -> int | None:
    if values and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
        return math.prod(values)
    return None


@rule("KB102", "small-tile", "an elementwise/row tile too small for the warps launched")
def check(ctx: RuleContext):
    for kv in ctx.kernels:
        dims = kv.arange_bounds()
        if kv.uses("dot") or not dims:
            continue  # matmul tiles are a different trade-off
        for cfg in kv.kernel.autotune_configs:
            tile = _tile([cfg.kwargs.get(d) for d in dims])
            msg = tile and _verdict(tile, cfg.num_warps or DEFAULT_NUM_WARPS)
            if msg and cfg.span is not None:
                yield ctx.finding("KB102", f"autotune config {msg}", cfg.span, kv.name)
        if kv.kernel.autotuned:
            continue
        for lv in ctx.launches:
            if lv.kernel is not kv:
                continue
            values = [lv.const_int(lv.args.get(d)) for d in dims]
            tile = _tile(values)
            msg = tile and _verdict(tile, lv.num_warps() or DEFAULT_NUM_WARPS)
            if msg:
                desc = ", ".join(f"{d}={v}" for d, v in zip(dims, values))
                yield ctx.finding("KB102", f"{desc} {msg}", lv.call, kv.name)
