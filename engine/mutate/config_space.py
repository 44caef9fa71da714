"""Configuration space: tile sizes, `num_warps` and `num_stages` at the kernel's launch sites,
and the depth of its pipelined streaming loops (`tl.range(..., num_stages=S)` in the kernel).

What the grid says of a tile is tied to its constexpr and changes with it: a literal the grid
repeats (`triton.cdiv(n, 64)` next to `BLOCK=64`) or the launcher constant the launch passes
(`BLOCK = 1024`, `triton.cdiv(n, BLOCK)`, `BLOCK=BLOCK`), in the grid or in the launcher variables
it is computed from. Any constexpr the launch passes can own a literal, tile or not, and a
literal that could stand for two of the same value (`BLOCK_M=16`, `ITERS=16`:
`cdiv(cdiv(n_rows, 16), 16)`) is not guessed at: those two only change together. In a 5-minute
H200 col_sum search six re-tilings of a coarsened kernel took `ITERS`'s literal for
`BLOCK_M`'s, launched a quarter of the programs, quick-timed 3.8x and failed the full harness;
the small inputs of the smoke stage fit in one program and passed. Only literal
(static) tiles are retuned; a tile computed from the input (`triton.next_power_of_2(n_cols)`)
keeps its value and only warps/stages vary.
"""

from __future__ import annotations

import ast
import itertools
import math
import random
from dataclasses import dataclass

from .edits import Edits
from .loop_stages import pipelined_depth, set_depth, streaming_loops
from .registry import Mutation, MutationContext, mutator

ELEMENTWISE_BLOCKS = (256, 512, 1024, 2048, 4096, 8192)
WARPS = (1, 2, 4, 8, 16)
STAGES = (1, 2, 3, 4)
# A pipelined streaming loop's depth (`loop_stages`), every step (a repeated step stays inside);
# it keeps (depth - 1) tiles in shared memory. Up to 6: on an H200, col_sum's column strips ran
# fastest 4-6 deep but for one tiling (128 x 64 at 8 warps, 8 deep), and 8 cost 256 x 64 at
# 8 warps 18% (42.0 vs 35.7 us at 5); a search with 7 and 8 in the space walked there and
# reached 2.55x on 16384x4096, where searches with 6 at most reached 2.76-2.84x.
LOOP_STAGES = (2, 3, 4, 5, 6)
DOT_MN = (32, 64, 128, 256)
DOT_K = (32, 64, 128)
DOT_WARPS = (4, 8)
DOT_STAGES = (2, 3, 4, 5)
SMEM_LIMIT = 200 * 1024  # bytes of shared memory a config may plan for (H100/H200: 227 KB)
MAX_PROPOSALS = 48
LOCALITY = 0.5  # see `ordered`


def tile_params(ctx: MutationContext) -> list[str]:
    """Constexpr parameters that size the tile (used as `tl.arange` bounds or loop steps)."""
    return ctx.kernel.tile_constexprs()


def _grid_node(lv) -> ast.expr | None:
    grid = lv.grid
    resolved = lv.resolve(grid)
    return resolved if resolved is not None else grid


def launch_constants(ctx: MutationContext, lv) -> dict[str, int]:
    """Every constexpr the launch passes as a known integer, tiles or not: a grid literal may stand
    for any of them (a coarsened kernel's `ITERS` is no tile)."""
    return {
        name: v
        for name in ctx.kernel.kernel.constexprs
        if (v := lv.const_int(lv.args.get(name))) is not None
    }


def _grid_exprs(lv) -> list[ast.expr]:
    """The grid, and the launcher variables it is computed from (`grid = (nblocks,)`); module
    constants are left out: other code reads them too."""
    grid = _grid_node(lv)
    exprs, seen = [], set()
    todo = [grid] if grid is not None else []
    while todo and len(exprs) < 16:
        expr = todo.pop()
        exprs.append(expr)
        for node in ast.walk(expr):
            if isinstance(node, ast.Name) and node.id not in seen:
                seen.add(node.id)
                bound = lv.local(node.id)
                if bound is not None and not isinstance(bound, ast.Constant):
                    todo.append(bound)
    return exprs


def tied_literals(
    lv, tiles: dict[str, int]
) -> tuple[dict[str, list[ast.expr]], list[frozenset[str]]]:
    """({constexpr: the grid's nodes that stand for its value}, groups of constexprs sharing a
    literal that none of them certainly owns), over `tiles`: every constexpr the launch passes
    (`launch_constants`). A node is an integer literal equal to the value, or a name of the
    launcher constant the launch passes for it."""
    out: dict[str, list[ast.expr]] = {t: [] for t in tiles}
    shared: list[frozenset[str]] = []
    passed = {t: lv.args[t].id for t in tiles if isinstance(lv.args.get(t), ast.Name)}
    for grid in _grid_exprs(lv):
        for node in ast.walk(grid):
            if isinstance(node, ast.Name):
                for t, name in passed.items():
                    if node.id == name:
                        out[t].append(node)
                continue
            if not (
                isinstance(node, ast.Constant)
                and isinstance(node.value, int)
                and not isinstance(node.value, bool)
            ):
                continue
            owners = [t for t, v in tiles.items() if v == node.value and t not in passed]
            if len(owners) > 1:  # e.g. BLOCK_M == BLOCK_N: `(cdiv(n_cols, 64), 1)`
                named = _owner(lv, grid, node, owners)
                if named is None:
                    shared.append(frozenset(owners))
                owners = [named] if named else owners[:1]
            if owners:
                out[owners[0]].append(node)
    return out, shared


@dataclass(frozen=True)
class LaunchKnobs:
    """What one launch fixes that a configuration changes, worked out once per launch: every
    constexpr it passes as a known integer (`launch_constants`), the tiles among them, and the
    grid's nodes tied to each with the groups sharing an unowned literal (`tied_literals`)."""

    consts: dict[str, int]
    static: dict[str, int]
    ties: dict[str, list[ast.expr]]
    shared: list[frozenset[str]]
    warps: int  # the launch's num_warps (Triton's default 4 where it passes none)
    stages: int  # its num_stages (default 3)
    loop_stages: (
        int | None
    )  # the depth the kernel's streaming loops are pipelined at (`pipelined_depth`)

    def current(self, staged: bool) -> dict[str, int]:
        """The launch's own configuration: its tiles, warps, where stages mean something
        (`staged`: a pipelined loop or a dot) stages, and its streaming loops' depth."""
        return (
            dict(self.static)
            | {"num_warps": self.warps}
            | ({"num_stages": self.stages} if staged else {})
            | ({"loop_stages": self.loop_stages} if self.loop_stages else {})
        )

    def splits(self, knobs: dict[str, int]) -> bool:
        """Whether `knobs` give constexprs that share an unowned grid literal different values."""
        values = self.consts | {k: v for k, v in knobs.items() if k in self.static}
        return any(len({values[t] for t in group}) > 1 for group in self.shared)


def launch_knobs(ctx: MutationContext, lv) -> LaunchKnobs:
    consts = launch_constants(ctx, lv)
    ties, shared = tied_literals(lv, consts)
    return LaunchKnobs(
        consts,
        {t: consts[t] for t in tile_params(ctx) if t in consts},
        ties,
        shared,
        lv.num_warps() or 4,
        lv.const_int(lv.options.get("num_stages")) or 3,
        pipelined_depth(ctx),
    )


def _grid_axis(grid: ast.expr, literal: ast.Constant) -> int | None:
    """The grid axis whose size `literal` is part of, where the grid is a tuple (or a lambda
    returning one)."""
    body = grid.body if isinstance(grid, ast.Lambda) else grid
    if isinstance(body, (ast.Tuple, ast.List)):
        for i, elt in enumerate(body.elts):
            if any(n is literal for n in ast.walk(elt)):
                return i
    return None


def _cdiv_size(grid: ast.expr, literal: ast.Constant) -> ast.expr | None:
    """`M` in the grid's `triton.cdiv(M, literal)`."""
    for node in ast.walk(grid):
        if isinstance(node, ast.Call) and len(node.args) == 2 and node.args[1] is literal:
            return node.args[0]
    return None


def _owner(lv, grid: ast.expr, literal: ast.Constant, owners: list[str]) -> str | None:
    """Which of several equal constexprs a grid literal stands for, or None where nothing tells.
    Each clue narrows the owners in turn: the tile that scales `tl.program_id(axis)` for the
    grid axis the literal sizes; the tile whose offsets the kernel masks with the size the
    literal divides (`cdiv(M, 32)` where the launch passes `M` for a parameter masked by
    `BLOCK_M`'s offsets); the tile named after that size. A 1-D grid of a matmul
    (`cdiv(M, 32) * cdiv(N, 32)`) scales one program id by both tiles: only the masks tell
    `BLOCK_M` from `BLOCK_N` there, and without them all three of the suite's naive bf16 draft's
    32s changed together, so no configuration reached Triton's fast 128 x 256 x 64 Hopper tile."""
    axis = _grid_axis(grid, literal)
    size = _cdiv_size(grid, literal)
    clues: list[set[str]] = []
    if axis is not None:
        clues.append(lv.kernel.axis_tiles(axis))
    if size is not None:
        text = ast.unparse(size)
        params = [p for p, arg in lv.args.items() if ast.unparse(arg) == text]
        clues.append(set().union(*(lv.kernel.masked_tiles(p) for p in params)))
        dim = text.split(".")[-1].split("[")[0].upper()
        clues.append({t for t in owners if dim and t.upper().endswith(dim)})
    left = list(owners)
    for clue in clues:
        narrowed = [t for t in left if t in clue]
        left = narrowed or left
        if len(left) == 1:
            return left[0]
    return None


def apply_knobs(ctx: MutationContext, lv, lk: LaunchKnobs, knobs: dict[str, int]) -> str | None:
    """Source with one launch's tiles / num_warps / num_stages set (what the grid ties to a tile
    follows it); None when the knobs would split constexprs that share a grid literal."""
    if lk.splits(knobs):
        return None
    edits = Edits(ctx.source)
    for name, value in knobs.items():
        if name in lk.static:
            edits.replace(
                lv.args[name], str(value)
            )  # the literal, or the name of a launcher constant
            for node in lk.ties.get(name, []):
                edits.replace(node, str(value))
        elif name in ("num_warps", "num_stages"):
            edits.add_keyword(lv.call, name, str(value))
        elif name == "loop_stages":
            set_depth(edits, streaming_loops(ctx), str(value))
    return edits.apply()


def candidates(lk: LaunchKnobs, uses_dot: bool, pipelined: bool) -> list[dict]:
    """Every configuration worth proposing for one launch, its own left out."""
    static, current_s = lk.static, lk.stages
    depths = [{"loop_stages": d} for d in LOOP_STAGES] if lk.loop_stages else [{}]
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
        choices = (
            [ELEMENTWISE_BLOCKS]
            if len(names) == 1
            else [
                [
                    v
                    for v in (8, 16, 32, 64, 128, 256, 512, 1024, 2048)
                    if static[n] / 16 <= v <= static[n] * 16
                ]
                for n in names
            ]
        )
        for dims in itertools.product(*choices):
            tile = _prod(dims)
            if not ELEMENTWISE_BLOCKS[0] <= tile <= 16384:
                continue
            for w in WARPS:
                if 4 <= tile / (32 * w) <= 64:
                    for s, d in itertools.product(STAGES if pipelined else (current_s,), depths):
                        if (
                            tile * 2 * (d.get("loop_stages", 1) - 1) > SMEM_LIMIT
                        ):  # 2-byte elements at least
                            continue
                        options.append(
                            dict(zip(names, dims))
                            | {"num_warps": w}
                            | ({"num_stages": s} if pipelined else {})
                            | d
                        )
    else:  # tiles computed from the input: only warps (and stages where there is a loop)
        for w in WARPS:
            for s, d in itertools.product(STAGES if pipelined else (current_s,), depths):
                options.append({"num_warps": w} | ({"num_stages": s} if pipelined else {}) | d)
    current = lk.current(pipelined or uses_dot)
    return [o for o in options if {k: current.get(k) for k in o} != o]


def _prod(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def prior(knobs: dict, uses_dot: bool) -> float:
    """A rough preference among configurations (higher is better), used to order proposals and
    to pick an autotune list: ~16 elements per thread at 4 warps for streaming kernels; large
    tiles, 8 warps and 3-4 stages for matmul. H200 structure probe (engine timing, 2026-11-30):
    cross_entropy's loop ran 80.8 us at 4096 wide and 4 warps (32 elements a thread), 83.0 at
    2048/4 (16), 92.8 at 2048/8 (8); col_sum's fastest tile was 32x128 at 4 warps (32). The
    earlier target of 8 kept the 4-warp 4096 block out of the proposals of every search."""
    tiles = [v for k, v in knobs.items() if k not in ("num_warps", "num_stages", "loop_stages")]
    warps = knobs.get("num_warps", 4)
    stages = knobs.get("num_stages", 3)
    if uses_dot:
        mn = _prod(tiles[:2]) if len(tiles) >= 2 else 64 * 64
        return (
            math.log2(mn)
            - 0.3 * abs(stages - 4)
            - (0.5 if (mn >= 128 * 128) != (warps == 8) else 0.0)
        )
    per_thread = math.log2(_prod(tiles) / (32 * warps) if tiles else 8)
    # A pipelined streaming loop (`loop_stages` set) is as fast from 16 to 64 elements a thread:
    # one H200 run's five fastest column-strip tilings held 16-64 (256 x 64 at 8 warps: 64).
    off = (
        max(0.0, 4 - per_thread, per_thread - 6) if "loop_stages" in knobs else abs(per_thread - 4)
    )
    return -off - 0.3 * abs(math.log2(warps) - 2) - 0.1 * abs(stages - 3)


def _distance(a: dict, b: dict) -> float:
    """Doublings and halvings between two configurations, over the knobs both set."""
    return sum(
        abs(math.log2(v / b[k]))
        for k, v in a.items()
        if isinstance(b.get(k), int) and b[k] > 0 and v > 0
    )


def ordered(options: list[dict], current: dict, uses_dot: bool) -> list[dict]:
    """Proposal order: near the current configuration first, then by `prior` (`LOCALITY` prior
    points per doubling or halving of one knob away from it), so a search walks the space from
    its best so far instead of proposing the same few far-off favourites to every parent; and for
    a kernel without a dot every tile and warp count before any change of stages (the launch's
    stages do not reach its loops: `launch_stages_matter`). Stable: ties keep the caller's
    (seeded) order."""

    def key(o: dict) -> tuple[bool, float]:
        restaged = (
            not uses_dot and "num_stages" in o and o["num_stages"] != current.get("num_stages")
        )
        distance = _distance({k: v for k, v in o.items() if k != "num_stages"}, current)
        return restaged, LOCALITY * distance - prior(o, uses_dot)

    ranked = sorted(options, key=key)
    depth = current.get("loop_stages")
    if depth is None:
        return ranked

    # Moves of the loops' depth alone, of the tiles and warps alone, and of both take turns: by
    # distance alone the depths of the one or two tilings the prior favours fill a parent's share
    # of proposals (PROPOSALS_PER_MUTATOR in the search). The depth that pays depends on the tile
    # (H200, col_sum strips: 256 x 32 at 4 warps 37.0 / 44.3 / 39.6 us at 4 / 5 / 6 stages).
    def move(o: dict) -> int:
        same_tiling = all(o.get(k) == current.get(k) for k in o if k != "loop_stages")
        return 0 if same_tiling else 1 if o.get("loop_stages") == depth else 2

    kinds = [[o for o in ranked if move(o) == m] for m in range(3)]
    return [o for turn in itertools.zip_longest(*kinds) for o in turn if o is not None]


def _describe(knobs: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in knobs.items() if k != "loop_stages") + (
        f", its loops pipelined {knobs['loop_stages']} stages deep"
        if "loop_stages" in knobs
        else ""
    )


def launch_stages_matter(kv) -> bool:
    """Whether the launch's `num_stages` changes the code: Triton 3.6 software-pipelines with it
    only loops that feed `tl.dot`. A streaming loop compiles to the same PTX at launch stages 1,
    3 and 5 (sm_90); it is pipelined by `tl.range(..., num_stages=S)` alone, which the
    `loop-stages` rewrite writes. (cross_entropy's launch stages 1-3 timed within 0.1% of each
    other on an H200: they were the same kernel.)"""
    return kv.uses("dot") and bool(kv.pipelined_loops())


def repeated_steps(ctx: MutationContext, index: int, lk: LaunchKnobs, staged: bool) -> list[dict]:
    """The configurations one and two more of the step that made the parent (`ctx.previous`,
    given where that step paid) lead to: tiles and warps scaled by the same factor again, stages
    moved by the same count; empty where the step changed no knob of this launch. A pattern move
    (Hooke-Jeeves): a walk of one doubling per generation stays near where it started. H200
    col_sum, one program per column strip, 16384x4096: 32 x 64 -> 64 x 64 tiles, 1.35x -> 1.94x
    the first draft, and no further in one H200 run's 5 minutes; with the repeated step (and equal tiles
    told apart) one H200 run's walk reached 128 x 32, 2.84x."""
    if ctx.previous is None:
        return []
    before_ctx = MutationContext(ctx.task, ctx.previous)
    launches = before_ctx.entry_launches()
    if len(launches) != len(ctx.entry_launches()):
        return []
    before, now = launch_knobs(before_ctx, launches[index]).current(staged), lk.current(staged)
    if before.keys() != now.keys() or before == now or any(v <= 0 for v in before.values()):
        return []
    moves = []
    for times in (1, 2):
        move = {}
        for k, v in now.items():
            if before[k] == v:
                continue
            step = (
                v * (v / before[k]) ** times
                if k not in ("num_stages", "loop_stages")
                else v + (v - before[k]) * times
            )
            move[k] = round(step)
        moves.append(move)
    return moves


def walk(
    ctx: MutationContext,
    index: int,
    lk: LaunchKnobs,
    uses_dot: bool,
    pipelined: bool,
    rng: random.Random | None = None,
) -> list[dict]:
    """Every configuration of one launch (`candidates`) in the order a search should try them: a
    step that paid repeated first (`repeated_steps`; the configuration of the space nearest to
    it that makes the step, other tiles kept before warps: 128 x 64 tiles at 4 warps -> 256 rows
    at 8 warps, 64 elements a thread), then `ordered`. `rng` shuffles first, so ties fall by the
    seed."""
    options = candidates(lk, uses_dot, pipelined)
    if rng is not None:
        rng.shuffle(options)
    current = lk.current(pipelined or uses_dot)
    options = ordered(options, current, uses_dot)
    repeats: list[dict] = []
    for move in repeated_steps(ctx, index, lk, pipelined or uses_dot):
        target = current | move
        making = [o for o in options if all(o.get(k) == v for k, v in move.items())]
        if making:
            nearest = min(
                making,
                key=lambda o: (
                    _distance({k: v for k, v in o.items() if k in lk.static}, target),
                    _distance(o, target),
                ),
            )
            if nearest not in repeats:
                repeats.append(nearest)
    return repeats + [o for o in options if o not in repeats]


def from_compiler(suggested: dict, lk: LaunchKnobs, uses_dot: bool, staged: bool) -> dict | None:
    """A configuration torch.compile chose for the reference's kernel, on this launch's knobs:
    `num_warps`, `num_stages` where stages matter, and tiles where the names leave no doubt (a
    dot's tiles by their axis letter: `BLOCK_SIZE_M` <- `BLOCK_M`; the one tile of a launch
    without a dot <- Inductor's one block size, a pointwise kernel's `XBLOCK`). None where it
    changes nothing of the launch."""
    blocks = {k: v for k, v in suggested.items() if "BLOCK" in k.upper()}  # not GROUP_M
    knobs: dict[str, int] = {}
    if uses_dot:
        for tile in lk.static:
            axis = tile.upper()[-1]
            match = [v for k, v in blocks.items() if k.upper().endswith(axis)]
            if len(match) == 1:
                knobs[tile] = match[0]
    elif len(lk.static) == 1 and len(blocks) == 1:
        knobs[next(iter(lk.static))] = next(iter(blocks.values()))
    if suggested.get("num_warps") in WARPS:
        knobs["num_warps"] = suggested["num_warps"]
    if staged and suggested.get("num_stages") in STAGES + DOT_STAGES:
        knobs["num_stages"] = suggested["num_stages"]
    current = lk.current(staged)
    return knobs if knobs and {k: current.get(k) for k in knobs} != knobs else None


@mutator("config", "retune tile sizes, num_warps and num_stages at the launch site")
def propose(ctx: MutationContext):
    kv = ctx.kernel
    if kv is None or kv.kernel.autotuned:
        return
    uses_dot = kv.uses("dot")
    pipelined = launch_stages_matter(kv)
    rng = random.Random(ctx.seed)
    for index, lv in enumerate(ctx.entry_launches()):
        lk = launch_knobs(ctx, lv)
        compiler = [from_compiler(s, lk, uses_dot, pipelined or uses_dot) for s in ctx.suggested]
        compiler = [c for i, c in enumerate(compiler) if c and c not in compiler[:i]]
        options = compiler + [o for o in walk(ctx, index, lk, uses_dot, pipelined, rng)]
        options = [o for i, o in enumerate(options) if i < len(compiler) or o not in compiler]
        made = 0
        for knobs in options:
            source = apply_knobs(ctx, lv, lk, knobs)
            if source is None:
                continue
            why = " (torch.compile's choice for the reference)" if knobs in compiler else ""
            yield Mutation(source, "config", f"launch with {_describe(knobs)}{why}", knobs)
            made += 1
            if made >= MAX_PROPOSALS:
                break
