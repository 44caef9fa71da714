"""KB114: a kernel reads a module-level value that is not a `tl.constexpr`.

Compiled Triton refuses it ("Cannot access global variable ... from within @jit'ed function"),
while the CPU interpreter reads it like any Python global: a kernel verified without a GPU can
still fail to compile on one. A module constant the kernel reads must be `tl.constexpr(value)`.
"""

from __future__ import annotations

import ast

from .registry import RuleContext, rule


def _plain_value(value: ast.expr) -> bool:
    """A value Triton refuses as a global: numbers, strings, containers and arithmetic of them
    (a module, a function or `tl.constexpr(...)` bound to a name is fine)."""
    if isinstance(value, ast.Constant):
        return not isinstance(value.value, type(None))
    if isinstance(value, (ast.Tuple, ast.List, ast.Set)):
        return all(_plain_value(e) for e in value.elts)
    if isinstance(value, ast.Dict):
        return True
    if isinstance(value, ast.UnaryOp):
        return _plain_value(value.operand)
    if isinstance(value, ast.BinOp):
        return _plain_value(value.left) and _plain_value(value.right)
    return False


@rule(
    "KB114",
    "non-constexpr-global",
    "a kernel reads a module-level value not wrapped in tl.constexpr (fails to compile on a GPU)",
    severity="error",
)
def check(ctx: RuleContext):
    constants = ctx.module.module_constants
    for kv in ctx.kernels:
        local = set(kv.params) | set(kv.assigns)
        seen: set[str] = set()
        # Decorators run in Python at import (`configs=[... for b in BLOCKS]`): only the body is
        # compiled, so only the body's reads matter.
        decorating = {id(n) for d in kv.node.decorator_list for n in ast.walk(d)}
        for node in kv.nodes:
            if (
                id(node) not in decorating
                and isinstance(node, ast.Name)
                and isinstance(node.ctx, ast.Load)
                and node.id in constants
                and node.id not in local
                and node.id not in seen
                and _plain_value(constants[node.id])
            ):
                seen.add(node.id)
                value = ast.unparse(constants[node.id])
                yield ctx.finding(
                    "KB114",
                    f"`{kv.name}` reads the module-level `{node.id} = {value[:40]}`, which compiled "
                    "Triton refuses (only `tl.constexpr` globals are visible to a kernel; the CPU "
                    f"interpreter reads it anyway). Define it as `{node.id} = tl.constexpr({value[:40]})`.",
                    node,
                    kv.name,
                )
