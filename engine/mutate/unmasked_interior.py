"""Unmasked interior: every block that lies wholly inside the data loads and stores without its
bounds mask; only the block that crosses the end keeps it.

A bounds mask `offs < n` costs more than its compare. Triton vectorises a masked access only as
far as it can prove the mask constant over a vector, which it reads from the divisibility of
`n`: with a size that is not a multiple of 16 (10,000,019 elements, a 1000-wide row) every
access is split into single elements. An interior block needs no mask at all, so this rewrite
puts the statements after the mask in both arms of `if start + BLOCK <= n:`, the first arm with
the mask (and its `other=`) dropped from the loads and stores, the second unchanged. The
interior arm then moves full 16-byte vectors whatever `n` is; the branch is uniform per program
(or per loop step), so it costs one scalar compare.

Where (nothing is proposed otherwise): a statement list (the kernel's body, or the body of one
of its top-level `for` loops) holding `offs = S + tl.arange(0, B)` (either order, hints around
it allowed; `offs` assigned only there) and after it a test `offs < N`, with S and N scalars
that the statements after the offsets do not reassign; those statements hold no `return`, and
at least one load or store among them passes exactly that test as its mask (a name bound to
it, or the test written inline). The split goes right after the offsets. Other uses of the test
stay as they are: in the interior it is all true.
"""

from __future__ import annotations

import ast
import copy

from ..rules.analysis import KernelView, assignments, kwarg, tl_name
from .dataflow import fix
from .edits import Edits
from .registry import Mutation, MutationContext, mutator

# Where the mask sits in a positional call: tl.load(pointer, mask, other), tl.store(pointer, value, mask).
_MASK_POSITION = {"load": 1, "store": 2}
_BLOCKS = ("arange", "load", "zeros", "full", "where", "sum", "max", "min")


@mutator(
    "unmasked-interior",
    "interior blocks load and store without the bounds mask; only the last block keeps it",
)
def propose(ctx: MutationContext):
    kv = ctx.kernel
    if kv is None:
        return
    new_fn = copy.deepcopy(kv.node)
    split = _split_in(new_fn.body, kv)
    for stmt in new_fn.body:
        if isinstance(stmt, ast.For) and not stmt.orelse:
            split += _split_in(stmt.body, kv)
    if not split:
        return
    source = Edits(ctx.source).replace_function(kv.node, fix(new_fn)).apply()
    where = ", ".join(dict.fromkeys(split))
    yield Mutation(
        source,
        "unmasked-interior",
        f"blocks wholly inside the data ({where}) load and store without the bounds mask, so "
        "they move full vectors whatever the size; only the block that crosses the end keeps it",
    )


def _split_in(body: list[ast.stmt], kv: KernelView) -> list[str]:
    """Rewrite `body` in place after its first tile's offsets that a bounds mask tests; the
    test it split on, or nothing."""
    assigned = _single_assignments(body)
    for o_idx, stmt in enumerate(body):
        tile = _tile_offsets(stmt, assigned, kv)
        if tile is None:
            continue
        offs, start, size = tile
        after = body[o_idx + 1 :]
        bound = _first_bound(after, offs, kv)
        if bound is None or any(isinstance(n, ast.Return) for s in after for n in ast.walk(s)):
            continue
        written = {
            n.id
            for s in after
            for n in ast.walk(s)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        if any(
            isinstance(n, ast.Name) and n.id in written for e in (start, bound) for n in ast.walk(e)
        ):
            continue  # the test must mean in the interior arm what it meant at the split
        compare = ast.Compare(
            left=ast.Name(id=offs, ctx=ast.Load()), ops=[ast.Lt()], comparators=[bound]
        )
        masks = {
            name
            for name, value in assigned.items()
            if isinstance(value, ast.Compare) and ast.dump(value) == ast.dump(compare)
        }
        unmask = _Unmask(masks, ast.dump(compare), kv)
        interior = [unmask.visit(copy.deepcopy(s)) for s in after]
        if not unmask.dropped:
            continue
        test = ast.parse(
            f"{ast.unparse(start)} + {ast.unparse(size)} <= {ast.unparse(bound)}", mode="eval"
        ).body
        body[o_idx + 1 :] = [ast.If(test=test, body=interior, orelse=copy.deepcopy(after))]
        return [ast.unparse(test)]
    return []


def _single_assignments(body: list[ast.stmt]) -> dict[str, ast.expr]:
    """Names the list assigns exactly once (anywhere inside it), with their value."""
    values = assignments(n for stmt in body for n in ast.walk(stmt))
    return {name: v[0] for name, v in values.items() if len(v) == 1}


def _tile_offsets(
    stmt: ast.stmt, assigned: dict[str, ast.expr], kv: KernelView
) -> tuple[str, ast.expr, ast.expr] | None:
    """(offs, S, B) for `offs = S + tl.arange(0, B)`, offs assigned only there, S a scalar."""
    if not (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and assigned.get(stmt.targets[0].id) is stmt.value
    ):
        return None
    tile = _tile(stmt.value, kv)
    if tile is None or _holds_tensor(tile[0], kv):
        return None
    return stmt.targets[0].id, tile[0], tile[1]


def _first_bound(stmts: list[ast.stmt], offs: str, kv: KernelView) -> ast.expr | None:
    """N of the first `offs < N` the statements test (N a scalar), bound to a name or inline."""
    for stmt in stmts:
        for node in ast.walk(stmt):
            if (
                isinstance(node, ast.Compare)
                and len(node.ops) == 1
                and isinstance(node.ops[0], ast.Lt)
                and isinstance(node.left, ast.Name)
                and node.left.id == offs
                and not _holds_tensor(node.comparators[0], kv)
            ):
                return node.comparators[0]
    return None


def _tile(value: ast.expr, kv: KernelView) -> tuple[ast.expr, ast.expr] | None:
    """(S, B) of `S + tl.arange(0, B)` or `tl.arange(0, B) + S`, seen through the
    `tl.multiple_of` / `tl.max_contiguous` hints."""
    while isinstance(value, ast.Call) and tl_name(kv.pm, value) in (
        "multiple_of",
        "max_contiguous",
    ):
        value = value.args[0]
    if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)):
        return None
    for arange, start in ((value.right, value.left), (value.left, value.right)):
        if (
            isinstance(arange, ast.Call)
            and tl_name(kv.pm, arange) == "arange"
            and len(arange.args) == 2
            and isinstance(arange.args[0], ast.Constant)
            and arange.args[0].value == 0
        ):
            return start, arange.args[1]
    return None


def _holds_tensor(expr: ast.expr, kv: KernelView, depth: int = 0) -> bool:
    """Whether `expr` may be a block rather than a scalar: it calls `tl.arange`, a load or a
    block constructor, or names a local any of whose values (anywhere in the kernel) does."""
    for node in ast.walk(expr):
        if isinstance(node, ast.Call) and tl_name(kv.pm, node) in _BLOCKS:
            return True
        if isinstance(node, ast.Name) and node.id not in kv.params:
            if depth > 8 or any(
                _holds_tensor(v, kv, depth + 1) for v in kv.assigns.get(node.id, [])
            ):
                return True
    return False


class _Unmask(ast.NodeTransformer):
    """Drops the mask (and `other=`) from loads and stores whose mask is the bounds test:
    a name bound to it, or the test written inline."""

    def __init__(self, masks: set[str], compare: str, kv: KernelView):
        self.masks, self.compare, self.kv, self.dropped = masks, compare, kv, 0

    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        name = tl_name(self.kv.pm, node)
        if name not in _MASK_POSITION:
            return node
        given = kwarg(node, "mask", _MASK_POSITION[name])
        if not (
            (isinstance(given, ast.Name) and given.id in self.masks)
            or (given is not None and ast.dump(given) == self.compare)
        ):
            return node
        node.keywords = [k for k in node.keywords if k.arg not in ("mask", "other")]
        node.args = node.args[: _MASK_POSITION[name]]
        self.dropped += 1
        return node
