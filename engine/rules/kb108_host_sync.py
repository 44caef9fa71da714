"""KB108: the launcher synchronises with the GPU (`.item()`, `.cpu()`, `.tolist()`, ...)."""

from __future__ import annotations

import ast

from .analysis import method_call
from .registry import RuleContext, rule

_SYNC_METHODS = ("item", "cpu", "tolist", "numpy")


@rule("KB108", "host-sync", "a host synchronisation in the launcher")
def check(ctx: RuleContext):
    seen: set[int] = set()
    for lv in ctx.launches:
        if lv.launcher is None or id(lv.launcher) in seen:
            continue
        seen.add(id(lv.launcher))
        for node in ast.walk(lv.launcher):
            sync = None
            if method_call(node, *_SYNC_METHODS):
                sync = f".{node.func.attr}()"
            elif isinstance(node, ast.Call) and (
                ctx.module.aliases.canonical(node.func) or ""
            ).endswith("cuda.synchronize"):
                sync = "torch.cuda.synchronize()"
            if sync is None:
                continue
            yield ctx.finding(
                "KB108",
                f"`{sync}` in launcher `{lv.site.launcher}` makes the CPU wait until the GPU has finished all "
                f"queued work on every call (a host sync: tens of microseconds plus the lost overlap between "
                f"launches). Keep the value on the device, derive it from shapes, or check it once outside "
                f"the hot path.",
                node,
                lv.kernel.name,
            )
