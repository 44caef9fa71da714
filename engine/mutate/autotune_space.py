"""Widen a user's `@triton.autotune`: its configurations stay, a few more join them.

Projects build configuration lists in loops and helpers (`configs=_configs()`) and prune them by
problem size (`prune_configs_by`), so the list is not a literal a rewrite can edit in place, and
the launch passes no tile to retune. What a rewrite can always do is add configurations to the
expression the decorator is given (`configs=_configs() + [triton.Config(...), ...]`): the
autotuner still picks the best per key, the user's pruning still applies, and a configuration
the sweep never had (deeper pipelines, larger K steps, bigger or smaller tiles) gets its chance.
"""

from __future__ import annotations

import ast
import re

from .config_space import tile_params
from .edits import Edits
from .registry import Mutation, MutationContext, mutator

# Matmul-shaped tiles (M, N, K blocks): the H100/H200 configurations Triton's own matmul
# tutorial and the common libraries sweep, in two groups (large tiles; deeper pipelines).
DOT_GROUPS = (
    ("larger tiles", [(128, 128, 64, 8, 3), (128, 256, 64, 8, 3), (256, 128, 64, 8, 3)]),
    ("deeper pipelines", [(64, 128, 64, 4, 4), (128, 64, 64, 4, 4), (64, 64, 64, 4, 5)]),
)
# One tile over a row or a flat range.
FLAT_GROUPS = (
    ("larger blocks", [(2048, 8, None), (4096, 8, None), (8192, 16, None)]),
    ("smaller blocks", [(256, 2, None), (512, 4, None), (1024, 4, None)]),
)


def _axis(name: str) -> str | None:
    m = re.search(r"(?:^|_)(M|N|K)$", name)
    return m.group(1) if m else None


def _config(meta: dict[str, int], warps: int, stages: int | None) -> str:
    body = ", ".join(f'"{k}": {v}' for k, v in meta.items())
    tail = f", num_warps={warps}" + (f", num_stages={stages}" if stages else "")
    return f"triton.Config({{{body}}}{tail})"


def _decorator(ctx: MutationContext) -> tuple[ast.Call, ast.expr] | None:
    kv = ctx.kernel
    for deco in kv.node.decorator_list:  # type: ignore[union-attr]
        if not isinstance(deco, ast.Call):
            continue
        name = ctx.module.aliases.canonical(deco.func) or ""
        if not name.endswith("autotune"):
            continue
        given = next((k.value for k in deco.keywords if k.arg == "configs"), None)
        given = given if given is not None else (deco.args[0] if deco.args else None)
        return (deco, given) if given is not None else None
    return None


@mutator(
    "autotune-space", "add configurations to an existing @triton.autotune (loops, pruning kept)"
)
def propose(ctx: MutationContext):
    kv = ctx.kernel
    if kv is None or not kv.kernel.autotuned or "triton" not in ctx.module.aliases.names:
        return
    found = _decorator(ctx)
    if found is None:
        return
    _, given = found
    literal = kv.kernel.autotune_configs
    keys = list(literal[0].kwargs) if literal else tile_params(ctx)
    tiles = [k for k in keys if k in kv.params and kv.params[k].constexpr]
    if not tiles or len(tiles) != len(keys):
        return  # a configuration key that is not a tile (a flag, a group size): not ours to guess
    existing = {(tuple(sorted(c.kwargs.items())), c.num_warps, c.num_stages) for c in literal}
    axes = {t: _axis(t) for t in tiles}
    if (
        kv.uses("dot")
        and sorted(a for a in axes.values() if a) == ["K", "M", "N"]
        and len(tiles) == 3
    ):
        groups = [
            (
                why,
                [
                    ({t: dict(zip("MNK", (m, n, k)))[axes[t]] for t in tiles}, w, s)
                    for m, n, k, w, s in shapes
                ],
            )
            for why, shapes in DOT_GROUPS
        ]
    elif len(tiles) == 1 and not kv.uses("dot"):
        groups = [
            (why, [({tiles[0]: b}, w, s) for b, w, s in shapes]) for why, shapes in FLAT_GROUPS
        ]
    else:
        return
    for why, configs in groups:
        fresh = [c for c in configs if (tuple(sorted(c[0].items())), c[1], c[2]) not in existing]
        if not fresh:
            continue
        edits = Edits(ctx.source)
        added = ", ".join(_config(*c) for c in fresh)
        edits.replace(given, f"{edits.text(given)} + [{added}]")
        yield Mutation(
            edits.apply(),
            "autotune-space",
            f"the autotuner also tries {len(fresh)} configurations with {why} "
            f"({', '.join(' '.join(f'{k}={v}' for k, v in c[0].items()) for c in fresh)}); "
            "its own configurations and pruning are kept",
        )
