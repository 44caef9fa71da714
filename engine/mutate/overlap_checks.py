"""Run a launcher's device-side checks on a side CUDA stream, beside the kernel.

`torch._assert_async(cond)` statements (what `host-sync` makes of `.item()` checks) are small
launches the kernel does not wait for, yet on one stream the GPU runs them first, one after the
other: on an H200 cross_entropy's range check (a max, a min, two compares, an or, a not, the
assert: seven launches) took 21 us in front of an 81 us kernel (bench/structure_probe.py).
Forked onto a side stream they run while the kernel does; the launcher's stream waits for them
before the call returns, so what follows the call is ordered after the check as before, and a
failing check still stops the program at the next synchronisation. The side stream has high
priority: the checks are seven launches in a row, each waiting for the one before, and at equal
priority the GPU dispatches each of them only after every pending block of the kernel launched
beside it, so the chain ends after the kernel's last wave instead of hiding inside it (H200,
cross_entropy 4096x32768 at 4096 wide and 2 warps, timed eagerly: 95.3 us at equal priority, 82.5
at high, 72.4 without the check; the search's A/Bs then measured 75.0-75.1 us, 84.1-84.2% of
copy, against 87.4-87.6 us before). On the CPU
(interpreter) the side stream is None and `torch.cuda.stream(None)` changes nothing.

Preconditions: the entry has one launch; the `_assert_async` statements are consecutive
top-level statements before it; they read at least one of the entry's parameters not annotated
as a Python scalar (its device picks the stream); nothing between them and the launch, nor the
kernel, writes a tensor they read (in-place methods, item assignment, stores and atomics).
"""

from __future__ import annotations

import ast

from .dataflow import unique_name
from .edits import Edits
from .registry import Mutation, MutationContext, mutator


def _is_assert_async(stmt: ast.stmt, torch_name: str) -> bool:
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "_assert_async"
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == torch_name
    )


def _writes(stmt: ast.stmt, names: set[str]) -> bool:
    """Whether a launcher statement may write into one of `names`' tensors in place."""
    for n in ast.walk(stmt):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr.endswith("_")
            and not n.func.attr.startswith("_")
            and isinstance(n.func.value, ast.Name)
            and n.func.value.id in names
        ):
            return True
        if isinstance(n, (ast.Assign, ast.AugAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(
                isinstance(t, ast.Subscript)
                and isinstance(t.value, ast.Name)
                and t.value.id in names
                for t in targets
            ):
                return True
        if (
            isinstance(n, ast.keyword)
            and n.arg == "out"
            and isinstance(n.value, ast.Name)
            and n.value.id in names
        ):
            return True
    return False


@mutator(
    "overlap-checks", "a launcher's device-side checks run on a side CUDA stream, beside the kernel"
)
def propose(ctx: MutationContext):
    entry, torch_name = ctx.entry_function(), ctx.torch_name()
    launches = ctx.entry_launches()
    kv = ctx.kernel
    if entry is None or torch_name is None or kv is None or len(launches) != 1:
        return
    lv = launches[0]
    body = entry.body
    launch_at = next(
        (i for i, s in enumerate(body) if any(n is lv.call for n in ast.walk(s))), None
    )
    checks = [i for i, s in enumerate(body[: launch_at or 0]) if _is_assert_async(s, torch_name)]
    if launch_at is None or not checks or checks != list(range(checks[0], checks[-1] + 1)):
        return
    read = {n.id for i in checks for n in ast.walk(body[i]) if isinstance(n, ast.Name)}
    params = [a.arg for a in entry.args.args]
    scalars = {
        a.arg
        for a in entry.args.args
        if isinstance(a.annotation, ast.Name) and a.annotation.id in ("int", "float", "bool", "str")
    }  # no `.device` to pick a stream by
    device_of = next((p for p in params if p in read and p not in scalars), None)
    if device_of is None:
        return
    if any(_writes(s, read) for s in body[checks[-1] + 1 : launch_at + 1]):
        return
    written = {p for p in kv.params if kv.stores_to(p) or kv.atomics_on(p)}
    if any(isinstance(a, ast.Name) and a.id in read for p, a in lv.args.items() if p in written):
        return
    taken = {n.id for n in ast.walk(ctx.tree) if isinstance(n, ast.Name)} | set(params)
    side = unique_name("check_stream", taken)
    t = torch_name
    indent = " " * body[checks[0]].col_offset
    edits = Edits(ctx.source)
    edits.insert_before(
        body[checks[0]],
        f"# the checks run on a side stream, beside the kernel; the launcher's stream waits for them\n"
        f"{side} = {t}.cuda.Stream(device={device_of}.device, priority=-1) if {device_of}.is_cuda else None\n"
        f"if {side} is not None:\n"
        f"    {side}.wait_stream({t}.cuda.current_stream({device_of}.device))\n"
        f"with {t}.cuda.stream({side}):",
    )
    for i in checks:  # into the `with` block
        edits.replace(body[i], "    " + edits.text(body[i]).replace("\n", "\n    "))
    edits.insert_after(
        body[launch_at],
        f"\n{indent}if {side} is not None:\n"
        f"{indent}    {t}.cuda.current_stream({device_of}.device).wait_stream({side})",
    )
    yield Mutation(
        edits.apply(),
        "overlap-checks",
        f"launcher: {len(checks)} device-side check{'s' if len(checks) > 1 else ''} "
        f"(`{t}._assert_async`) run on a side CUDA stream while the kernel runs, instead of in front of "
        f"it; the launcher's stream waits for them before returning, so a failing check still stops the "
        f"program at the next synchronisation",
    )
