"""KB113: the launcher upcasts an input to fp32 before the kernel instead of in registers."""

from __future__ import annotations

import ast

from .analysis import method_call
from .registry import RuleContext, rule


def _upcast(node: ast.expr | None) -> bool:
    if method_call(node, "float", "double"):
        return True
    if method_call(node, "to"):
        return any(
            "float32" in ast.unparse(a) or "float64" in ast.unparse(a)
            for a in list(node.args) + [k.value for k in node.keywords]
        )  # type: ignore[union-attr]
    return False


@rule("KB113", "host-upcast", "an input is upcast to fp32 in the launcher before the kernel")
def check(ctx: RuleContext):
    for lv in ctx.launches:
        for param, arg in lv.args.items():
            value = lv.resolve(arg)
            if _upcast(value) and lv.kernel.loads_of(param):
                yield ctx.finding(
                    "KB113",
                    f"`{ast.unparse(value)}` converts the input in a separate PyTorch kernel (one more full read "
                    f"and a write at twice the width), then `{lv.kernel.name}` reads twice the bytes. Pass the "
                    f"original tensor and upcast in registers with `.to(tl.float32)` after `tl.load`.",
                    value,
                    lv.kernel.name,
                )
