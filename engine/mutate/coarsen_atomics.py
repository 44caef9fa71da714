"""Fewer atomics: each program reduces several blocks in registers before one atomic update.

A split reduction such as the column-sum first draft gives every block of rows its own program,
which sums its tile and adds the partial result into the output with `tl.atomic_add`. When the
atomic's address does not depend on that grid axis (the programs along it meet in the same
output), a program can take ITERS consecutive blocks instead: the loads of all ITERS blocks are
unrolled (`tl.static_range`, so they are in flight together), their values are added elementwise
and reduced once, and the grid along that axis shrinks ITERS-fold, and so do the atomics.

Preconditions (nothing is proposed otherwise): a split reduction (`split_reduction.py`): one
`tl.atomic_add` of a `tl.sum` of a load masked to zero, whose address does not depend on the grid
axis folded, with only straight-line, store-free code between that axis' program id and the sum.
"""

from __future__ import annotations

import ast
import copy

from .dataflow import fix, unique_name
from .edits import Edits
from .registry import Mutation, MutationContext, mutator
from .split_reduction import SplitReduction, grid_axis, split_reductions

ITERS = (
    4,
    8,
    16,
)  # unrolled: 32 blocks of 32x64 bf16 per program would hold 256 registers of loads


@mutator(
    "coarsen-atomics", "reduce several blocks per program before one atomic update (fewer atomics)"
)
def propose(ctx: MutationContext):
    site = next(split_reductions(ctx), None)
    if site is not None:
        yield from _rewrite(ctx, site)


def _rewrite(ctx: MutationContext, site: SplitReduction):
    kv, body, p_idx, r_idx, pid, pid_call = (
        site.kv,
        site.body,
        site.p_idx,
        site.r_idx,
        site.pid,
        site.pid_call,
    )
    taken = {n.id for n in kv.nodes if isinstance(n, ast.Name)} | set(kv.params)
    iters = unique_name("ITERS", taken)
    base = unique_name(f"{pid}_first", taken)
    acc = unique_name("acc", taken)
    it = unique_name("it", taken)
    loop = ast.parse(
        f"for {it} in tl.static_range({iters}):\n"
        f"    {pid} = {base} * {iters} + {it}\n"
        f"    {acc} += 0\n"
    ).body[0]
    loop.body = [loop.body[0]] + copy.deepcopy(site.middle) + [loop.body[1]]
    loop.body[-1].value = copy.deepcopy(site.reduced)  # type: ignore[attr-defined]
    head = ast.parse(f"{base} = {ast.unparse(pid_call)}\n{acc} = 0.0\n").body
    new_fn = copy.deepcopy(kv.node)
    new_fn.body = body[:p_idx] + head + [loop, site.sum_of(acc)] + body[r_idx + 1 :]
    new_fn.args.args.append(
        ast.arg(arg=iters, annotation=ast.parse("tl.constexpr", mode="eval").body)
    )
    new_fn.args.defaults.append(ast.Constant(1))  # other callers keep one block per program
    fn = fix(new_fn)
    for n in ITERS:
        edits = Edits(ctx.source).replace_function(kv.node, fn)
        for lv in site.launches:
            found = grid_axis(lv, site.axis)
            if found is None:
                return
            edits.replace(found[1], f"triton.cdiv({edits.text(found[1])}, {n})")
            edits.add_keyword(lv.call, iters, str(n))
        yield Mutation(
            edits.apply(),
            "coarsen-atomics",
            f"each program sums {n} consecutive blocks along grid axis {site.axis} in registers (loads "
            f"unrolled, in flight together) and makes one atomic update for them: {n}x fewer programs "
            f"and atomic adds",
            {iters: n},
        )
