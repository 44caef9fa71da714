"""Insert a pruned `@triton.autotune`: a handful of configurations taken in the order `config`
walks the space (a step that paid repeated, then near the launch by the prior), keyed on the
size parameters, so each input size gets its best tile at run time.

The launch stops passing the tuned values, and a grid that spelled out the block becomes a
function of the chosen configuration (`lambda META: ...`). The depth of pipelined streaming loops
is tuned with the tiles: their literal `num_stages` becomes a constexpr parameter (`LOOP_STAGES`,
defaulting to the literal, so other callers see the same kernel) that each configuration sets.
"""

from __future__ import annotations

import ast

from .config_space import launch_knobs, launch_stages_matter, tile_params, walk
from .dataflow import unique_name
from .edits import Edits
from .loop_stages import set_depth, streaming_loops
from .registry import Mutation, MutationContext, mutator

N_CONFIGS = 6


def _config_text(knobs: dict) -> str:
    meta = ", ".join(
        f'"{k}": {v}' for k, v in knobs.items() if k not in ("num_warps", "num_stages")
    )
    extra = "".join(f", {k}={knobs[k]}" for k in ("num_warps", "num_stages") if k in knobs)
    return f"triton.Config({{{meta}}}{extra})"


def _tiling(knobs: dict) -> dict:
    return {k: v for k, v in knobs.items() if k not in ("num_stages", "loop_stages")}


@mutator("autotune", "insert a pruned @triton.autotune over tiles, warps and stages")
def propose(ctx: MutationContext):
    """The kernel under a pruned `@triton.autotune` over its tiles, warps and stages, its launch
    passing them no more.

    Long because the rewrite's preconditions, decorator and launch edits must agree.
    """
    kv = ctx.kernel
    if (
        kv is None
        or kv.kernel.autotuned
        or kv.tl_calls("atomic_add", "atomic_max", "atomic_min", "atomic_xchg")
    ):
        return  # autotuning re-runs the kernel: accumulating outputs would be corrupted
    launches = ctx.entry_launches()
    tiles = tile_params(ctx)
    if len(launches) != 1 or not tiles:
        return
    lv = launches[0]
    if lv.warmup:
        return  # an autotuner has no ahead-of-time compile of one configuration to hand back
    lk = launch_knobs(ctx, lv)
    static = lk.static
    if len(static) != len(tiles):
        return  # a tile computed from the input (e.g. the whole row) is not a free knob
    uses_dot = kv.uses("dot")
    pipelined = launch_stages_matter(kv)
    current = lk.current(pipelined or uses_dot)
    options = walk(ctx, 0, lk, uses_dot, pipelined)  # a step that paid, repeated, among the first
    ties = {
        t: nodes for t, nodes in lk.ties.items() if t in static
    }  # the others keep their literals
    # A literal that two equal constexprs could stand for cannot become either's META entry: only
    # configs that keep them equal.
    options = [o for o in options if not lk.splits(o)]
    configs = [current]
    for (
        o
    ) in options:  # the loops' depth varies within a tile, and the tiles vary: two a tiling at most
        if len(configs) < N_CONFIGS and sum(_tiling(c) == _tiling(o) for c in configs) < 2:
            configs.append(dict(static) | o)
    if len(configs) < 2:
        return
    edits = Edits(ctx.source)
    if lk.loop_stages:  # the loops' depth becomes a constexpr each configuration sets
        args = kv.node.args
        if args.vararg or args.kwarg or args.kwonlyargs or not args.args:
            return
        depth = unique_name(
            "LOOP_STAGES", {n.id for n in kv.nodes if isinstance(n, ast.Name)} | set(kv.params)
        )
        last = args.defaults[-1] if args.defaults else args.args[-1]
        edits.insert_after(last, f", {depth}: tl.constexpr = {lk.loop_stages}")
        set_depth(edits, streaming_loops(ctx), depth)
        configs = [{(depth if k == "loop_stages" else k): v for k, v in c.items()} for c in configs]
    pointer_like = (
        set().union(*(kv.pointer_params_of(c) for c in kv.tl_calls("load", "store")))
        if kv.tl_calls("load", "store")
        else set()
    )
    key = [
        p.name
        for p in kv.kernel.params
        if not p.constexpr and p.name not in pointer_like and not p.name.startswith("stride")
    ]
    if not kv.node.decorator_list:
        return  # made by assignment (`f = triton.jit(f)`): a decorator above would wrap the plain function
    first = kv.node.decorator_list[0]
    deco = (
        "@triton.autotune(\n    configs=[\n"
        + "".join(f"        {_config_text(c)},\n" for c in configs)
        + f"    ],\n    key={key!r},\n)"
    )
    edits.insert_line(first.lineno, deco)
    grid = lv.grid
    grid_node = lv.resolve(grid) if isinstance(grid, ast.Name) else grid
    g0, g1 = edits.span(grid_node)
    if any(
        not (g0 <= edits.span(n)[0] and edits.span(n)[1] <= g1)
        for nodes in ties.values()
        for n in nodes
    ):
        return  # the grid's size comes from launcher variables: META reaches only the grid itself
    if any(ties.values()):
        text = edits.text(grid_node)
        start, _ = edits.span(grid_node)
        pairs = [(lit, tile) for tile, lits in ties.items() for lit in lits]
        for lit, tile in sorted(
            pairs, key=lambda p: edits.span(p[0]), reverse=True
        ):  # last first: offsets hold
            a, b = edits.span(lit)
            text = text[: a - start] + f'META["{tile}"]' + text[b - start :]
        edits.replace(grid_node, f"lambda META: {text}")
    for name in list(static) + ["num_warps", "num_stages"]:
        if name in lv.options or any(k.arg == name for k in lv.call.keywords):
            edits.remove_keyword(lv.call, name)
    if any(name in lv.args and not any(k.arg == name for k in lv.call.keywords) for name in static):
        return  # a tile passed positionally cannot be dropped from the call cleanly
    yield Mutation(
        edits.apply(),
        "autotune",
        f"`@triton.autotune` over {len(configs)} configurations keyed on {', '.join(key) or 'nothing'}: "
        "each input size gets its best tile, warps and stages at run time",
    )
