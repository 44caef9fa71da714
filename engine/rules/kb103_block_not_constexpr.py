"""KB103: a block-size parameter passed as a runtime value instead of `tl.constexpr`."""

from __future__ import annotations

import ast
import re

from .analysis import kwarg
from .registry import RuleContext, rule

_BLOCKISH = re.compile(r"^(BLOCK|TILE|GROUP)(_[A-Z0-9]+)*$|^[A-Z0-9_]*_(BLOCK|TILE)(_SIZE)?$")


def _shape_uses(kv) -> set[str]:
    used: set[str] = set()
    for c in kv.tl_calls("arange"):
        for a in c.args:
            if isinstance(a, ast.Name):
                used.add(a.id)
    for c in kv.tl_calls("zeros", "full"):
        shape = kwarg(c, "shape", 0)
        if shape is not None:
            used |= {n.id for n in ast.walk(shape) if isinstance(n, ast.Name)}
    for loop in kv.loops:
        if (
            isinstance(loop, ast.For)
            and isinstance(loop.iter, ast.Call)
            and len(loop.iter.args) == 3
        ):
            step = loop.iter.args[2]
            if isinstance(step, ast.Name):
                used.add(step.id)
    return used


@rule("KB103", "block-not-constexpr", "a block-size parameter that is not tl.constexpr")
def check(ctx: RuleContext):
    for kv in ctx.kernels:
        shape_names = _shape_uses(kv)
        for p in kv.kernel.params:
            if p.constexpr:
                continue
            if p.name in shape_names or _BLOCKISH.match(p.name):
                node = kv.arg_node(p.name)
                yield ctx.finding(
                    "KB103",
                    f"`{p.name}` sets a tile size but is a runtime argument: Triton cannot specialise on it, "
                    f"so offsets, masks and loop bounds use a runtime value, loops are not unrolled and "
                    f"`tl.arange`/`tl.zeros` cannot take it. Annotate it `{p.name}: tl.constexpr`.",
                    node if node is not None else kv.node,
                    kv.name,
                )
