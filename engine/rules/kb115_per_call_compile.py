"""KB115: a launcher compiles its kernel ahead of time (`kernel.warmup(...)`) on every call.

`warmup` binds and looks up the specialisation as a launch does, and the compiled kernel's
launch then repeats part of it: on the H200 such a launcher (warmup, `_init_handles`, device
properties, compiled launch) spent about 45 µs of host time a call where a JIT launch of the
same kernel spent about 22 µs (`bench/launcher_cost_probe.py`, `bench/results/launcher-cost-*`).
A kernel shorter than that is bound by its launcher. KernelBrain does not rewrite it (a cache is state between
calls, which its gate refuses), so the finding says what to do.
"""

from __future__ import annotations

import ast

from .registry import RuleContext, rule


def _cached(launcher: ast.FunctionDef, call: ast.Call) -> bool:
    """The warmup sits under a condition (a cache miss, a first call): not every call pays."""
    for node in ast.walk(launcher):
        if isinstance(node, (ast.If, ast.IfExp)) and any(n is call for n in ast.walk(node)):
            return True
    return False


@rule(
    "KB115", "per-call-compile", "a launcher that compiles its kernel ahead of time on every call"
)
def check(ctx: RuleContext):
    for lv in ctx.launches:
        if not lv.warmup or lv.launcher is None or _cached(lv.launcher, lv.call):
            continue
        props = [
            n
            for n in ast.walk(lv.launcher)
            if isinstance(n, ast.Call)
            and (ctx.module.aliases.canonical(n.func) or "").endswith("get_device_properties")
        ]
        also = " and reads the device's properties" if props else ""
        yield ctx.finding(
            "KB115",
            f"launcher `{lv.site.launcher}` compiles `{lv.kernel.name}` ahead of time with "
            f"`.warmup(...)`{also} on every call, then launches the compiled kernel: about twice "
            "a plain launch's host time (H200: ~45 µs against ~22 µs a call), which a kernel "
            "shorter than that pays in full. Keep the compiled kernel and what you derive from it "
            "(registers, occupancy, the SM count) in a dict keyed by the specialisation (dtypes, "
            "constexprs, num_warps, num_stages, device), or launch through the JIT "
            f"(`{lv.kernel.name}[grid](...)`), which caches compiled kernels itself.",
            lv.call,
            lv.kernel.name,
        )
