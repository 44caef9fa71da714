"""KB107: the launcher copies an input (`.contiguous()`, `.clone()`) that the kernel does not need copied."""

from __future__ import annotations

import ast

from .analysis import method_call
from .registry import RuleContext, rule


def _strides_passed(lv, name: str) -> set[int]:
    dims: set[int] = set()
    for arg in lv.args.values():
        if (
            method_call(arg, "stride")
            and isinstance(arg.func.value, ast.Name)
            and arg.func.value.id == name
        ):
            if (
                arg.args
                and isinstance(arg.args[0], ast.Constant)
                and isinstance(arg.args[0].value, int)
            ):
                dims.add(arg.args[0].value)
    return dims


@rule("KB107", "redundant-copy", "the launcher copies an input the kernel could read in place")
def check(ctx: RuleContext):
    for lv in ctx.launches:
        kv = lv.kernel
        for param, arg in lv.args.items():
            if not isinstance(arg, ast.Name):
                continue
            value = lv.resolve(arg)
            if method_call(value, "contiguous"):
                dims = _strides_passed(lv, arg.id)
                if len(dims) >= 2:
                    yield ctx.finding(
                        "KB107",
                        f"`{ast.unparse(value)}` copies a non-contiguous input before launch, but `{kv.name}` "
                        f"already receives every stride of `{arg.id}` ({', '.join(f'stride({d})' for d in sorted(dims))}) "
                        f"and can read it in place: the copy is an extra read and write of the whole tensor. "
                        f"Pass the original tensor and its strides.",
                        value,
                        kv.name,
                    )
            elif (
                method_call(value, "clone")
                and kv.loads_of(param)
                and not kv.stores_to(param)
                and not kv.atomics_on(param)
            ):
                yield ctx.finding(
                    "KB107",
                    f"`{ast.unparse(value)}` copies `{ast.unparse(value.func.value)}` although `{kv.name}` only reads "
                    f"it: the clone is an extra read and write of the whole tensor. Pass the original.",
                    value,
                    kv.name,
                )
