"""KB105: a masked load with no neutral `other=` feeding a reduction."""

from __future__ import annotations

import ast

from .analysis import kwarg, tl_name
from .registry import RuleContext, rule

NEUTRAL = {
    "sum": "0.0",
    "xor_sum": "0",
    "max": 'float("-inf")',
    "argmax": 'float("-inf")',
    "min": 'float("inf")',
    "argmin": 'float("inf")',
    "reduce": "the combine function's identity",
}


def _is_zero(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value == 0 and not isinstance(node.value, bool)


def _is_mask(kv, node: ast.expr, depth: int = 0) -> bool:
    """Whether `node` is a boolean mask: a comparison, `&`/`|` of masks, a mask cast with
    `.to(...)`, or a name only ever assigned a mask (`mask = cols < n`)."""
    if depth > 8:
        return False
    if isinstance(node, ast.Compare):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr)):
        return _is_mask(kv, node.left, depth + 1) and _is_mask(kv, node.right, depth + 1)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "to"
    ):
        return _is_mask(kv, node.func.value, depth + 1)
    if isinstance(node, ast.Name):
        values = kv.assigns.get(node.id, ())
        return bool(values) and all(_is_mask(kv, v, depth + 1) for v in values)
    return False


def _feeding_loads(kv, expr: ast.expr, seen: set[str] | None = None) -> list[tuple[ast.Call, bool]]:
    """Loads whose values reach `expr`, each with whether they reach it unchanged.

    Values that pass through `tl.where`, or are multiplied by a mask (`x * mask`, which zeroes
    the masked-off lanes as `other=0` would), are sanitised and are not followed.
    """
    seen = seen if seen is not None else set()
    out: list[tuple[ast.Call, bool]] = []

    def sanitises(node: ast.expr) -> bool:
        return tl_name(kv.pm, node) == "where" or (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Mult)
            and (_is_mask(kv, node.left) or _is_mask(kv, node.right))
        )

    def visit(node: ast.expr, direct: bool) -> None:
        name = tl_name(kv.pm, node)
        if sanitises(node):
            return
        if name == "load":
            out.append((node, direct))  # type: ignore[arg-type]
            return
        if isinstance(node, ast.Name):
            if node.id in seen:
                return
            seen.add(node.id)
            values = kv.assigns.get(node.id, ())
            if any(sanitises(v) for v in values):
                return  # re-masked somewhere: assume the reduction sees the sanitised value
            for v in values:
                visit(v, direct)
            return
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "to"
        ):
            visit(node.func.value, direct)
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                visit(child, False)

    visit(expr, True)
    return out


@rule("KB105", "masked-reduction-other", "a masked load without a neutral other= feeds a reduction")
def check(ctx: RuleContext):
    for kv in ctx.kernels:
        reported: set[int] = set()
        for red in kv.tl_calls(*NEUTRAL):
            op = (tl_name(kv.pm, red) or "").split(".")[-1]
            arg = kwarg(red, "input", 0)
            if arg is None:
                continue
            for load, direct in _feeding_loads(kv, arg):
                if id(load) in reported or kwarg(load, "mask", 1) is None:
                    continue
                other = kwarg(load, "other", 2)
                if other is None:
                    problem = "masked-off lanes hold undefined values that enter the reduction"
                elif direct and op in ("max", "argmax", "min", "argmin") and _is_zero(other):
                    problem = f"masked-off lanes read 0, so a row whose values are all {'negative' if 'max' in op else 'positive'} gets the wrong {op}"
                else:
                    continue
                reported.add(id(load))
                yield ctx.finding(
                    "KB105",
                    f"masked `tl.load` feeds `tl.{op}` (line {red.lineno}) and {problem}; "
                    f"pass `other={NEUTRAL[op]}`, the neutral element of {op}.",
                    load,
                    kv.name,
                )
