"""int64 offsets only where needed (KB104 fixed): the program id is widened before it
multiplies a runtime stride, so offsets past 2^31 elements stay correct; everything else
stays in cheaper 32-bit arithmetic."""

from __future__ import annotations

import ast

from ..rules import check_module
from .edits import Edits
from .registry import Mutation, MutationContext, mutator


@mutator("int64-offsets", "widen program-id offsets that can pass 2^31 elements")
def propose(ctx: MutationContext):
    kv = ctx.kernel
    if kv is None or not any(
        f.code == "KB104" and f.kernel == kv.name
        for f in check_module(ctx.module, select=["KB104"])
    ):
        return
    edits = Edits(ctx.source)
    widened = []
    for stmt in kv.node.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Call)
            and ast.unparse(stmt.value.func) == "tl.program_id"
        ):
            edits.replace(stmt.value, f"{edits.text(stmt.value)}.to(tl.int64)")
            widened.append(stmt.targets[0].id)
    if widened:
        yield Mutation(
            edits.apply(),
            "int64-offsets",
            f"{', '.join(f'`{w}`' for w in widened)} widened to int64 before multiplying strides "
            "(offsets beyond 2^31 elements stay correct)",
        )
