"""KB109: `tl.dot` on fp32 operands without an explicit `input_precision`."""

from __future__ import annotations

import ast

from .analysis import kwarg, method_call, tl_name
from .registry import RuleContext, rule


def _is_fp32(kv, expr: ast.expr) -> bool:
    def fp32(n: ast.AST) -> bool:
        if method_call(n, "to") or tl_name(kv.pm, n) in ("cast", "zeros", "full"):
            values = list(n.args) + [k.value for k in n.keywords]  # type: ignore[attr-defined]
            return any(kv.pm.aliases.canonical(v) == "triton.language.float32" for v in values)
        return False

    # Only the operand's own definition chain: `.to(tl.float32)` or an fp32 tl.zeros/tl.full.
    node = expr
    for _ in range(8):
        if fp32(node):
            return True
        if isinstance(node, ast.Name) and len(kv.assigns.get(node.id, [])) == 1:
            node = kv.assigns[node.id][0]
            continue
        return False
    return False


@rule("KB109", "fp32-dot-precision", "tl.dot on fp32 inputs without an explicit input_precision")
def check(ctx: RuleContext):
    for kv in ctx.kernels:
        for dot in kv.tl_calls("dot"):
            if kwarg(dot, "input_precision") is not None or kwarg(dot, "allow_tf32") is not None:
                continue
            operands = [
                x for x in (kwarg(dot, "input", 0), kwarg(dot, "other", 1)) if x is not None
            ]
            if any(_is_fp32(kv, x) for x in operands):
                yield ctx.finding(
                    "KB109",
                    "`tl.dot` on fp32 operands runs in TF32 by default (10-bit mantissa, ~1e-3 relative error): "
                    'say `input_precision="tf32"` if that is intended, `"ieee"` for exact fp32 (several times '
                    "slower), or cast the operands to bf16 for the fastest tensor-core path.",
                    dot,
                    kv.name,
                )
