"""KB106: the launcher zero-fills an output that the kernel overwrites anyway."""

from __future__ import annotations

import ast

from .registry import RuleContext, rule

_ZERO_FACTORIES = {"zeros": "empty", "zeros_like": "empty_like", "new_zeros": "new_empty"}


def _zero_factory(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Call):
        fn = node.func
        name = (
            fn.attr
            if isinstance(fn, ast.Attribute)
            else fn.id
            if isinstance(fn, ast.Name)
            else None
        )
        if name in _ZERO_FACTORIES:
            return name
    return None


@rule("KB106", "redundant-zero-fill", "the launcher zero-fills an output the kernel fully writes")
def check(ctx: RuleContext):
    for lv in ctx.launches:
        kv = lv.kernel
        for param, arg in lv.args.items():
            value = lv.resolve(arg)
            factory = _zero_factory(value)
            if factory is None or not kv.stores_to(param):
                continue
            if kv.loads_of(param) or kv.atomics_on(param):
                continue  # read-modify-write or accumulation: the zeros are needed
            if kv.unwritten_reason(param) is not None:
                continue  # some path leaves elements unwritten: they must read zero
            name = ast.unparse(arg)
            yield ctx.finding(
                "KB106",
                f"`{name}` is zero-filled by `{factory}` but `{kv.name}` only writes it (through `{param}`, "
                f"never read or accumulated): the fill is an extra kernel that writes the whole buffer "
                f"before the real one does. Allocate it with `{_ZERO_FACTORIES[factory]}` instead.",
                value,
                kv.name,
            )
