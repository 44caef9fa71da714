"""A kernel's features for the experience memory: its op family and a set of traits.

Read from the source alone (the index and the static rules), so two kernels are similar when
they compute the same kind of thing the same way, whatever their shapes: the family says what
(matmul, softmax-like row reduction, normalisation, other reductions, elementwise), the traits
how (the Triton calls used, the static findings, the dtypes of the cases).
"""

from __future__ import annotations

import ast
import re

from ..rules import check_module

_DTYPE = re.compile(r"\b(bfloat16|float16|float32|float64)\b")  # `bfloat16` is no float16


def kernel_features(ctx, case_labels: list[str]) -> tuple[str, set[str]]:
    kv = ctx.kernel
    if kv is None:
        return "unknown", set()
    calls = {c.func.attr for c in kv.nodes if _tl_call(c)}  # type: ignore[attr-defined]
    reduces = bool(calls & {"sum", "max", "min", "reduce", "argmax", "argmin"})
    if "dot" in calls:
        family = "matmul"
    elif calls & {"atomic_add", "atomic_max", "atomic_min"}:
        family = "atomic-reduction"
    elif reduces and calls & {"exp", "exp2", "log", "log2"}:
        family = "softmax-like"
    elif reduces and calls & {"rsqrt", "sqrt"}:
        family = "normalization"
    elif reduces:
        family = "reduction"
    else:
        family = "elementwise"
    findings = {f.code for f in check_module(ctx.module) if f.kernel in (None, ctx.task.kernel)}
    dtypes = {d for label in case_labels for d in _DTYPE.findall(label)}
    traits = {f"tl.{c}" for c in calls} | findings | {f"dtype:{d}" for d in dtypes}
    if kv.kernel.autotuned:
        traits.add("autotuned")
    return family, traits


def _tl_call(node) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in ("tl", "triton.language")
    )
