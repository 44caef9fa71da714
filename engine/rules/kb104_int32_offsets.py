"""KB104: program-id-derived offsets multiplied by a runtime stride in 32-bit integers."""

from __future__ import annotations

import ast

from .registry import RuleContext, rule


def _runtime_scalar(kv, node: ast.expr) -> str | None:
    """A runtime (non-constexpr) scalar parameter, directly or through a local alias."""
    if isinstance(node, ast.Name):
        if kv.is_runtime_param(node.id):
            return node.id
        values = kv.assigns.get(node.id, [])
        if len(values) == 1 and isinstance(values[0], ast.Name):
            return _runtime_scalar(kv, values[0])
    return None


@rule("KB104", "int32-offsets", "pid * stride computed in int32 can overflow beyond 2^31 elements")
def check(ctx: RuleContext):
    for kv in ctx.kernels:
        hits: list[tuple[ast.BinOp, ast.expr, str]] = []
        for node in kv.nodes:
            if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)):
                continue
            for pid_side, other in ((node.left, node.right), (node.right, node.left)):
                stride = _runtime_scalar(kv, other)
                if stride is None or not kv.depends_on_program_id(pid_side):
                    continue
                if kv.casts_to_int64(pid_side) or kv.casts_to_int64(other):
                    continue
                hits.append((node, pid_side, stride))
                break
        if not hits:
            continue
        node, pid_side, stride = min(hits, key=lambda h: (h[0].lineno, h[0].col_offset))
        more = len({h[0].lineno for h in hits}) - 1
        also = (
            f" ({more} more such product{'s' if more != 1 else ''} in this kernel)"
            if more > 0
            else ""
        )
        pid_text = ast.unparse(pid_side)
        yield ctx.finding(
            "KB104",
            f"`{ast.unparse(node)}` is computed in 32-bit integers{also}: once an offset passes 2^31 "
            f"(e.g. 16384 rows x 131072 columns) it wraps and the kernel touches the wrong memory. "
            f"Cast before multiplying: `{pid_text}.to(tl.int64) * {stride}` (int64 only on this offset, "
            f"practically free).",
            node,
            kv.name,
        )
