"""KB110: float `tl.atomic_add` makes results nondeterministic and contended."""

from __future__ import annotations

import ast

from .analysis import kwarg
from .registry import RuleContext, rule


@rule(
    "KB110",
    "nondeterministic-atomics",
    "tl.atomic_* accumulation makes results run-to-run nondeterministic",
    severity="information",
)
def check(ctx: RuleContext):
    for kv in ctx.kernels:
        for call in kv.tl_calls("atomic_add"):
            val = kwarg(call, "val", 1)
            if isinstance(val, ast.Constant) and isinstance(val.value, int):
                continue  # integer counters are order-independent
            yield ctx.finding(
                "KB110",
                "`tl.atomic_add` accumulates partial results in whatever order programs finish: float sums "
                "differ in the last bits from run to run (nondeterministic), and programs contend on the same "
                "addresses. Write per-program partials and reduce them in a second small kernel, or give each "
                "output to exactly one program.",
                call,
                kv.name,
            )
