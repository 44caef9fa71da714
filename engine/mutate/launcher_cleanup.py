"""Remove launcher work the kernel makes redundant: zero-fills of fully written outputs, copies
of inputs the kernel reads in place (the findings of KB106 and KB107)."""

from __future__ import annotations

import ast

from ..rules import check_module
from .edits import Edits
from .registry import Mutation, MutationContext, mutator

_EMPTY = {"zeros": "empty", "zeros_like": "empty_like", "new_zeros": "new_empty"}


def _at(node: ast.AST, finding) -> bool:
    return node.lineno - 1 == finding.span.line and node.col_offset == finding.span.col  # type: ignore[attr-defined]


@mutator("launcher-cleanup", "drop zero-fills and copies the kernel makes redundant")
def propose(ctx: MutationContext):
    if ctx.kernel is None:
        return
    findings = [
        f
        for f in check_module(ctx.module, select=["KB106", "KB107"])
        if f.kernel == ctx.task.kernel
    ]
    if not findings:
        return
    edits = Edits(ctx.source)
    done = []
    for node in ast.walk(ctx.tree):
        if not isinstance(node, ast.Call):
            continue
        for f in findings:
            if not _at(node, f):
                continue
            if f.code == "KB106":
                fn = node.func
                old = fn.attr if isinstance(fn, ast.Attribute) else fn.id  # type: ignore[union-attr]
                if isinstance(fn, ast.Attribute):
                    edits.replace(fn, f"{edits.text(fn.value)}.{_EMPTY[old]}")
                else:
                    edits.replace(fn, _EMPTY[old])
                done.append(f"`{old}` -> `{_EMPTY[old]}` (the kernel writes every element)")
            elif f.code == "KB107" and isinstance(node.func, ast.Attribute):
                edits.replace(node, edits.text(node.func.value))
                done.append(f"drop `.{node.func.attr}()` (the kernel reads the input in place)")
    if done:
        yield Mutation(edits.apply(), "launcher-cleanup", "launcher: " + "; ".join(done))
