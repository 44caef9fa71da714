"""Keep launcher checks off the host: a validation `if <cond with .item()>: raise ...` makes the
CPU wait for the GPU on every call (KB108), and the GPU idles while the launch that follows
crosses Python again.

Two rewrites of the same check, both computing the condition as one device tensor:
- merged: several `.item()` syncs become one (`if (a | b).item(): raise ...`); the same
  exception, raised at the same point;
- asserted: `torch._assert_async(~cond, msg)`, no sync at all. A failing check still stops the
  program, but as a device-side assertion at the next synchronisation (how PyTorch's own CUDA
  cross_entropy reports an out-of-range target), not as this call's exception. The variant's
  explanation says so.
Preconditions: the `if` has no `else` and its body is a single `raise`; every comparison in the
condition reads a `.item()` (so each operand is a 0-dim device tensor once `.item()` is dropped);
`torch` is imported in the module.
"""

from __future__ import annotations

import ast

from ..rules.analysis import method_call
from .edits import Edits
from .registry import Mutation, MutationContext, mutator

_COMPARE = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}


def _device_condition(node: ast.expr, text) -> tuple[str, int] | None:
    """The condition as a boolean device-tensor expression, and how many `.item()` it dropped."""
    if isinstance(node, ast.BoolOp):
        parts = [_device_condition(v, text) for v in node.values]
        if any(p is None for p in parts):
            return None
        joiner = " | " if isinstance(node.op, ast.Or) else " & "
        return "(" + joiner.join(p[0] for p in parts) + ")", sum(p[1] for p in parts)  # type: ignore[index]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _device_condition(node.operand, text)
        return (f"~{inner[0]}", inner[1]) if inner else None
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
        sides, syncs = [], 0
        for side in (node.left, node.comparators[0]):
            if method_call(side, "item") and not side.args:  # type: ignore[union-attr]
                sides.append(text(side.func.value))  # type: ignore[union-attr]
                syncs += 1
            elif any(method_call(n, "item") for n in ast.walk(side)):
                return None  # a sync buried in arithmetic: leave it
            else:
                sides.append(text(side))
        if not syncs:
            return None
        return f"({sides[0]} {_COMPARE[type(node.ops[0])]} {sides[1]})", syncs
    return None


@mutator(
    "host-sync",
    "launcher checks without host syncs: merged into one `.item()`, or asserted on the GPU",
)
def propose(ctx: MutationContext):
    entry, torch_name = ctx.entry_function(), ctx.torch_name()
    if entry is None or torch_name is None:
        return
    checks = []
    for stmt in entry.body:
        if (
            isinstance(stmt, ast.If)
            and not stmt.orelse
            and len(stmt.body) == 1
            and isinstance(stmt.body[0], ast.Raise)
            and stmt.body[0].exc is not None
        ):
            cond = _device_condition(stmt.test, ctx.module.text)
            if cond is not None:
                checks.append((stmt, cond))
    if not checks:
        return
    syncs = sum(c[1] for _, c in checks)
    multi = [(stmt, cond) for stmt, cond in checks if cond[1] > 1]
    if multi:  # one sync per check; separate checks stay separate (each raises its own exception)
        merged = Edits(ctx.source)
        for stmt, (expr, _) in multi:
            merged.replace(stmt.test, f"{expr}.item()")
        yield Mutation(
            merged.apply(),
            "host-sync",
            f"launcher: {sum(c[1] for _, c in multi)} `.item()` host syncs become {len(multi)} (each "
            f"check's condition is combined on the GPU first); the same exception at the same point",
        )
    asserted = Edits(ctx.source)
    for stmt, (expr, _) in checks:
        exc = stmt.body[0].exc  # type: ignore[attr-defined]
        msg = (
            exc.args[0]
            if isinstance(exc, ast.Call)
            and exc.args
            and isinstance(exc.args[0], ast.Constant)
            and isinstance(exc.args[0].value, str)
            else None
        )
        name = ctx.module.text(exc.func) if isinstance(exc, ast.Call) else ctx.module.text(exc)
        text = f"{name}: {msg.value}" if msg is not None else name
        asserted.replace(stmt, f"{torch_name}._assert_async(~{expr}, {text!r})")
    yield Mutation(
        asserted.apply(),
        "host-sync",
        f"launcher: the check runs on the GPU (`{torch_name}._assert_async`) instead of {syncs} "
        f"`.item()` host sync{'s' if syncs > 1 else ''}. A failing check still stops the program, but "
        f"as a device-side assertion at the next synchronisation (as PyTorch's CUDA cross_entropy "
        f"reports a bad target), not as this call's exception",
    )
