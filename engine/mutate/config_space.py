"""Configuration space: tile sizes, `num_warps` and `num_stages` at the kernel's launch sites.

Block-size literals that the grid repeats (`triton.cdiv(n, 64)` next to `BLOCK=64`) are tied to
their constexpr and change with it. Only literal (static) tiles are retuned; a tile computed from
the input (`triton.next_power_of_2(n_cols)`) keeps its value and only warps/stages vary.
"""

from __future__ import annotations

import ast
import itertools
import math
import random

from .base import Mutation, MutationContext, mutator
from .edits import Edits

ELEMENTWISE_BLOCKS = (256, 512, 1024, 2048, 4096, 8192)
WARPS = (1, 2, 4, 8, 16)
STAGES = (1, 2, 3, 4)
DOT_MN = (32, 64, 128, 256)
DOT_K = (32, 64, 128)
DOT_WARPS = (4, 8)
DOT_STAGES = (2, 3, 4, 5)
SMEM_LIMIT = 200 * 1024  # bytes of shared memory a config may plan for (H100/H200: 227 KB)
MAX_PROPOSALS = 48


def tile_params(ctx: MutationContext) -> list[str]:
    """Constexpr parameters that size the tile (used as `tl.arange` bounds or loop steps)."""
    return ctx.kernel.tile_constexprs()


def _grid_node(lv) -> ast.expr | None:
    grid = lv.call.func.slice  # type: ignore[attr-defined]
    resolved = lv.resolve(grid)
    return resolved if resolved is not None else grid


def tied_literals(lv, tiles: dict[str, int]) -> dict[str, list[ast.Constant]]:
    """Integer literals in the grid that stand for a tile constexpr's current value."""
    grid = _grid_node(lv)
    out: dict[str, list[ast.Constant]] = {t: [] for t in tiles}
    if grid is None:
        return out
    for node in ast.walk(grid):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool)):
            continue
        owners = [t for t, v in tiles.items() if v == node.value]
        if len(owners) > 1:  # e.g. BLOCK_M == BLOCK_N: `cdiv(M, 64)` belongs to the one named after M
            dim = _cdiv_dim(grid, node)
            owners = [t for t in owners if dim and t.upper().endswith(dim.upper())] or owners[:1]
        if owners:
            out[owners[0]].append(node)
    return out


def _cdiv_dim(grid: ast.expr, literal: ast.Constant) -> str | None:
    for node in ast.walk(grid):
        if isinstance(node, ast.Call) and len(node.args) == 2 and node.args[1] is literal:
            return ast.unparse(node.args[0]).split(".")[-1].split("[")[0]
    return None


def apply_knobs(ctx: MutationContext, lv, knobs: dict[str, int]) -> str:
    """Source with one launch's tiles / num_warps / num_stages set (tied grid literals follow)."""
    edits = Edits(ctx.source)
    tiles = {t: lv.const_int(lv.args.get(t)) for t in tile_params(ctx)}
    static = {t: v for t, v in tiles.items() if v is not None}
    ties = tied_literals(lv, static)
    for name, value in knobs.items():
        if name in static:
            edits.replace(lv.args[name], str(value))  # the literal, or the name of a launcher constant
            for lit in ties.get(name, []):
                edits.replace(lit, str(value))
        elif name in ("num_warps", "num_stages"):
            edits.add_keyword(lv.call, name, str(value))
    return edits.apply()


def candidates(ctx: MutationContext, lv, static: dict[str, int], uses_dot: bool, has_loop: bool) -> list[dict]:
    current_w = lv.num_warps() or 4
    current_s = lv.const_int(lv.options.get("num_stages")) or 3
    options: list[dict] = []
    if uses_dot:
        names = list(static)
        mn = [n for n in names if not n.upper().endswith("K")]
        k = [n for n in names if n.upper().endswith("K")]
        for dims in itertools.product(DOT_MN, repeat=len(mn)):
            for kdims in itertools.product(DOT_K, repeat=len(k)):
                for w, s in itertools.product(DOT_WARPS, DOT_STAGES):
                    cfg = dict(zip(mn, dims)) | dict(zip(k, kdims))
                    bm, bn = (dims + (64, 64))[:2]
                    bk = kdims[0] if kdims else 32
                    if bm * bn > 128 * 256 or (bm * bk + bk * bn) * 2 * s > SMEM_LIMIT:
                        continue
                    if bm * bn >= 128 * 256 and w < 8:
                        continue
                    options.append(cfg | {"num_warps": w, "num_stages": s})
    elif static:
        names = list(static)
        choices = [ELEMENTWISE_BLOCKS] if len(names) == 1 else [
            [v for v in (8, 16, 32, 64, 128, 256, 512, 1024, 2048) if static[n] / 16 <= v <= static[n] * 16] for n in names
        ]
        for dims in itertools.product(*choices):
            tile = _prod(dims)
            if not ELEMENTWISE_BLOCKS[0] <= tile <= 16384:
                continue
            for w in WARPS:
                if 4 <= tile / (32 * w) <= 64:
                    for s in (STAGES if has_loop else (current_s,)):
                        options.append(dict(zip(names, dims)) | {"num_warps": w} | ({"num_stages": s} if has_loop else {}))
    else:  # tiles computed from the input: only warps (and stages where there is a loop)
        for w in WARPS:
            for s in (STAGES if has_loop else (current_s,)):
                options.append({"num_warps": w} | ({"num_stages": s} if has_loop else {}))
    current = dict(static) | {"num_warps": current_w} | ({"num_stages": current_s} if has_loop or uses_dot else {})
    return [o for o in options if {k: current.get(k) for k in o} != o]


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def prior(knobs: dict, uses_dot: bool) -> float:
    """A rough preference among configurations (higher is better), used to order proposals and
    to pick an autotune list: ~8 elements per thread at 4 warps for streaming kernels; large
    tiles, 8 warps and 3-4 stages for matmul."""
    tiles = [v for k, v in knobs.items() if k not in ("num_warps", "num_stages")]
    warps = knobs.get("num_warps", 4)
    stages = knobs.get("num_stages", 3)
    if uses_dot:
        mn = _prod(tiles[:2]) if len(tiles) >= 2 else 64 * 64
        return math.log2(mn) - 0.3 * abs(stages - 4) - (0.5 if (mn >= 128 * 128) != (warps == 8) else 0.0)
    per_thread = _prod(tiles) / (32 * warps) if tiles else 8
    return -abs(math.log2(per_thread) - 3) - 0.3 * abs(math.log2(warps) - 2) - 0.1 * abs(stages - 3)


def _describe(knobs: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in knobs.items())


@mutator("config", "retune tile sizes, num_warps and num_stages at the launch site")
def propose(ctx: MutationContext):
    kv = ctx.kernel
    if kv is None or kv.kernel.autotuned:
        return
    uses_dot = kv.uses("dot")
    has_loop = bool(kv.loops)
    rng = random.Random(ctx.seed)
    for lv in ctx.entry_launches():
        static = {t: v for t in tile_params(ctx) if (v := lv.const_int(lv.args.get(t))) is not None}
        options = candidates(ctx, lv, static, uses_dot, has_loop)
        rng.shuffle(options)  # ties broken by the seed, deterministically
        options.sort(key=lambda k: -prior(k, uses_dot))
        for knobs in options[:MAX_PROPOSALS]:
            yield Mutation(apply_knobs(ctx, lv, knobs), "config", f"launch with {_describe(knobs)}", knobs)
