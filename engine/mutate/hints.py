"""Vectorisation and alignment hints: tell the compiler that tile offsets are contiguous and
block-aligned, so loads and stores can be 128-bit wide where the data allows."""

from __future__ import annotations

import ast
import copy

from .dataflow import fix
from .edits import Edits
from .registry import Mutation, MutationContext, mutator


def _tile_offset(value: ast.expr, constexprs: set[str]) -> str | None:
    """The block of `X * BLOCK + tl.arange(0, BLOCK)` or `start + tl.arange(0, BLOCK)`."""
    if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)):
        return None
    right = value.right
    if not (
        isinstance(right, ast.Call)
        and ast.unparse(right.func) == "tl.arange"
        and len(right.args) == 2
    ):
        return None
    block = ast.unparse(right.args[1])
    if block not in constexprs:
        return None
    left = ast.unparse(value.left)
    if left.endswith(f"* {block}") or isinstance(value.left, ast.Name):
        return block
    return None


class _Hint(ast.NodeTransformer):
    def __init__(self, constexprs: set[str], loop_vars: set[str]):
        self.constexprs, self.loop_vars, self.count = constexprs, loop_vars, 0

    def visit_Assign(self, node: ast.Assign):
        block = _tile_offset(node.value, self.constexprs)
        if block is None or "multiple_of" in ast.unparse(node.value):
            return node
        if isinstance(node.value.left, ast.Name) and node.value.left.id not in self.loop_vars:  # type: ignore[attr-defined]
            return node  # `start + arange` is aligned only when start steps by the block
        self.count += 1
        hinted = ast.parse(
            f"tl.max_contiguous(tl.multiple_of({ast.unparse(node.value)}, {block}), {block})",
            mode="eval",
        ).body
        return ast.Assign(targets=node.targets, value=hinted, lineno=node.lineno)


@mutator("hints", "alignment and contiguity hints on tile offsets")
def propose(ctx: MutationContext):
    kv = ctx.kernel
    if kv is None or kv.uses("multiple_of", "max_contiguous"):
        return
    loop_vars = {
        lp.target.id
        for lp in kv.loops
        if isinstance(lp, ast.For)
        and isinstance(lp.target, ast.Name)
        and isinstance(lp.iter, ast.Call)
        and len(lp.iter.args) == 3
        and ast.unparse(lp.iter.args[2]) in kv.kernel.constexprs
    }
    new_fn = copy.deepcopy(kv.node)
    hint = _Hint(set(kv.kernel.constexprs), loop_vars)
    new_fn = hint.visit(new_fn)
    if hint.count:
        source = Edits(ctx.source).replace_function(kv.node, fix(new_fn)).apply()
        yield Mutation(
            source,
            "hints",
            f"{hint.count} tile offset{'s' if hint.count > 1 else ''} marked contiguous and "
            "block-aligned (`tl.multiple_of`, `tl.max_contiguous`) for wide vector accesses",
        )
