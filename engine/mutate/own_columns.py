"""No atomics: each program of a split reduction loops over the whole reduced grid axis and
stores its result, so it owns its slice of the output.

`coarsen-atomics` folds a few blocks into each program; this folds them all. The column-sum
first draft then runs one program per column strip over every row: no atomic updates, and the
launcher's zero-filled output becomes redundant (`launcher-cleanup` turns it into an empty one).
Why: col_sum 16384x4096 on an H200 timed 35.7 us, 87.7% of copy, with 256 x 64 tiles at 8 warps
and 5 pipeline stages, against 37.9 us for the best coarsened-atomics variant, whose output must
be zero-filled first (bench/structure_probe.py; a zero-fill before a read of the
same bytes cost 1.8 us). It leaves few programs on short reductions (16-32 on
65536x1024: 80-120 us there), which is what a dispatch per shape is for.

Preconditions (nothing is proposed otherwise): a split reduction (`split_reduction.py`) along an
axis whose grid size is `triton.cdiv(A, B)` in every launch, where A is passed to a runtime
parameter P of the kernel and B is the value passed to the constexpr C that multiplies the
program id in the block's address: the program then loops over `tl.cdiv(P, C)` blocks, no new
parameter needed. The atomic takes no keyword but `mask`.
"""

from __future__ import annotations

import ast
import copy

from ..rules.analysis import kwarg
from .dataflow import fix, unique_name
from .edits import Edits
from .registry import Mutation, MutationContext, mutator
from .split_reduction import SplitReduction, grid_axis, split_reductions


def _block_size(site: SplitReduction) -> str | None:
    """The constexpr C in `pid * C` (or `C * pid`) inside the block's code: the block's extent."""
    constexprs = set(site.kv.kernel.constexprs)
    found = set()
    for stmt in site.middle:
        for n in ast.walk(stmt):
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
                sides = [n.left, n.right]
                if any(isinstance(x, ast.Name) and x.id == site.pid for x in sides):
                    found |= {x.id for x in sides if isinstance(x, ast.Name) and x.id in constexprs}
    return found.pop() if len(found) == 1 else None


def _block_count(site: SplitReduction, block: str) -> str | None:
    """`tl.cdiv(P, C)`: the blocks along the axis, in the kernel's own terms, if every launch's grid
    says `triton.cdiv(A, B)` with A passed as P and B as the constexpr C."""
    params = {p.name for p in site.kv.kernel.params if not p.constexpr}
    counts = set()
    for lv in site.launches:
        found = grid_axis(lv, site.axis)
        if found is None:
            return None
        size = found[1]
        if not (
            isinstance(size, ast.Call)
            and isinstance(size.func, ast.Attribute)
            and size.func.attr == "cdiv"
            and len(size.args) == 2
            and not size.keywords
        ):
            return None
        total, step = size.args
        passed = lv.args.get(block)
        if passed is None or ast.unparse(lv.resolve(passed) or passed) != ast.unparse(
            lv.resolve(step) or step
        ):
            return None
        names = [
            p for p in params if p in lv.args and ast.unparse(lv.args[p]) == ast.unparse(total)
        ]
        if len(names) != 1:
            return None
        counts.add(f"tl.cdiv({names[0]}, {block})")
    return counts.pop() if len(counts) == 1 else None


@mutator(
    "own-columns",
    "each program reduces a whole grid axis and stores its slice: no atomics, no zero-fill",
)
def propose(ctx: MutationContext):
    for site in split_reductions(ctx):
        block = _block_size(site)
        count = _block_count(site, block) if block else None
        if (
            count is None
            or any(k.arg not in ("val", "mask") for k in site.atomic.keywords)
            or len(site.atomic.args) > 3
        ):
            continue
        yield _rewrite(ctx, site, count)
        return


def _rewrite(ctx: MutationContext, site: SplitReduction, count: str) -> Mutation:
    kv, body, pid = site.kv, site.body, site.pid
    taken = {n.id for n in kv.nodes if isinstance(n, ast.Name)} | set(kv.params)
    acc = unique_name("acc", taken)
    # The first block is peeled off so the accumulator starts as a tile: a runtime loop keeps the
    # type of what it carries, and a scalar 0.0 would become a tile after one iteration.
    first = ast.parse(f"{pid} = 0\n{acc} = 0").body
    first[1].value = copy.deepcopy(site.reduced)  # type: ignore[attr-defined]
    # Pipelined at Triton's default depth (`loop-stages` tunes it): the launch's stages do not
    # reach a loop without a dot, and unpipelined a column strip streams one tile at a time
    # (H200 16384x4096, 32 x 64 tiles: 268 us, 0.38x the first draft).
    loop = ast.parse(f"for {pid} in tl.range(1, {count}, num_stages=3):\n    {acc} += 0\n").body[0]
    loop.body = copy.deepcopy(site.middle) + [loop.body[0]]
    loop.body[-1].value = copy.deepcopy(site.reduced)  # type: ignore[attr-defined]
    atomic = site.atomic
    ptr, val = atomic.args[0], kwarg(atomic, "val", 1)
    mask = kwarg(atomic, "mask", 2)
    store = ast.parse(
        f"tl.store({ast.unparse(ptr)}, {ast.unparse(val)}"
        + (f", mask={ast.unparse(mask)})" if mask is not None else ")")
    ).body[0]
    after = [
        store if isinstance(s, ast.Expr) and s.value is atomic else s
        for s in body[site.r_idx + 1 :]
    ]
    new_fn = copy.deepcopy(kv.node)
    new_fn.body = (
        body[: site.p_idx]
        + [first[0]]
        + copy.deepcopy(site.middle)
        + [first[1], loop, site.sum_of(acc)]
        + [copy.deepcopy(s) for s in after]
    )
    fn = fix(new_fn)
    edits = Edits(ctx.source).replace_function(kv.node, fn)
    for lv in site.launches:
        edits.replace(grid_axis(lv, site.axis)[1], "1")  # type: ignore[index]
    return Mutation(
        edits.apply(),
        "own-columns",
        f"each program loops over all blocks along grid axis {site.axis} ({count}) and stores its "
        f"reduced slice instead of adding a partial atomically: one program per output slice, no "
        f"atomic updates, and an output the kernel fully writes (its zero-fill becomes redundant)",
    )
