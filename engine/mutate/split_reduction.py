"""Find a split reduction: programs along one grid axis that each reduce a block and meet in the
same output through one `tl.atomic_add` (the column-sum first draft). `coarsen-atomics` folds a
few of those programs into one; `own-columns` folds the whole axis into every program.

What qualifies (nothing is found otherwise): exactly one atomic, `tl.atomic_add(ptr, partial)` as
a top-level statement, where `partial = tl.sum(E, ...)` and E is a `.to(tl.float32)` of a load
whose masked-off elements are zero (`other=0`), so blocks past the end add nothing; a
`tl.program_id(axis)` the atomic's address does not depend on; between it and the sum only
straight-line code without stores; after the sum nothing that depends on that program id.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator
from dataclasses import dataclass

from ..rules.analysis import KernelView, LaunchView, kwarg, method_call, tl_name
from .registry import MutationContext


@dataclass
class SplitReduction:
    kv: KernelView
    body: list[ast.stmt]
    atomic: ast.Call  # the `tl.atomic_add` call
    p_idx: int  # the statement `pid = tl.program_id(axis)`
    r_idx: int  # the statement `partial = tl.sum(E, ...)`
    pid: str
    pid_call: ast.Call
    axis: int
    middle: list[ast.stmt]  # between the two: the block's loads
    launches: list[LaunchView]

    @property
    def reduced(self) -> ast.expr:
        """E in `partial = tl.sum(E, ...)`: one block's values."""
        return self.body[self.r_idx].value.args[0]  # type: ignore[attr-defined]

    def sum_of(self, acc: str) -> ast.stmt:
        """The reduction statement, summing `acc` instead of one block."""
        stmt = copy.deepcopy(self.body[self.r_idx])
        stmt.value.args[0] = ast.Name(id=acc, ctx=ast.Load())  # type: ignore[attr-defined]
        return stmt


def _pid_assign(stmt: ast.stmt, pm) -> tuple[str, ast.Call] | None:
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(stmt.value, ast.Call)
        and tl_name(pm, stmt.value) == "program_id"
    ):
        return stmt.targets[0].id, stmt.value
    return None


def _zero_when_masked(expr: ast.expr, kv) -> bool:
    """`X.to(tl.float32)` where X is (or is assigned once from) a load with `other=0`."""
    if not (
        method_call(expr, "to")
        and expr.args
        and ast.unparse(expr.args[0]) in ("tl.float32", "float32")
    ):
        return False
    inner = expr.func.value  # type: ignore[attr-defined]
    if isinstance(inner, ast.Name):
        values = kv.assigns.get(inner.id, [])
        if len(values) != 1:
            return False
        inner = values[0]
    if not (isinstance(inner, ast.Call) and tl_name(kv.pm, inner) == "load"):
        return False
    other = kwarg(inner, "other", 2)
    return (
        isinstance(other, ast.Constant) and other.value == 0 and not isinstance(other.value, bool)
    )


def _written(stmt: ast.stmt) -> bool:
    return any(
        isinstance(c, ast.Call)
        and isinstance(c.func, ast.Attribute)
        and (c.func.attr == "store" or c.func.attr.startswith("atomic_"))
        for c in ast.walk(stmt)
    )


def split_reductions(ctx: MutationContext) -> Iterator[SplitReduction]:
    """Every grid axis of the target kernel whose programs meet in one atomic sum.

    Long because each grid axis's atomic sum is matched and rewritten in one walk.
    """
    kv = ctx.kernel
    if kv is None or kv.kernel.autotuned:
        return
    atomics = [
        c
        for c in kv.nodes
        if isinstance(c, ast.Call)
        and isinstance(c.func, ast.Attribute)
        and c.func.attr.startswith("atomic_")
    ]
    body = kv.node.body
    if len(atomics) != 1 or atomics[0].func.attr != "atomic_add":  # type: ignore[attr-defined]
        return
    call = atomics[0]
    a_idx = next(
        (i for i, s in enumerate(body) if isinstance(s, ast.Expr) and s.value is call), None
    )
    value = kwarg(call, "val", 1)
    if a_idx is None or not isinstance(value, ast.Name) or len(kv.assigns.get(value.id, [])) != 1:
        return
    partial = value.id
    r_idx = next(
        (
            i
            for i, s in enumerate(body[:a_idx])
            if isinstance(s, ast.Assign)
            and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name)
            and s.targets[0].id == partial
        ),
        None,
    )
    if r_idx is None:
        return
    reduce_call = body[r_idx].value  # type: ignore[attr-defined]
    if not (
        isinstance(reduce_call, ast.Call)
        and tl_name(kv.pm, reduce_call) == "sum"
        and reduce_call.args
        and _zero_when_masked(reduce_call.args[0], kv)
    ):
        return
    launches = [lv for lv in ctx.entry_launches() if lv.launcher is not None]
    if not launches or "import triton" not in ctx.source:
        return
    for p_idx, stmt in enumerate(body[:r_idx]):
        found = _pid_assign(stmt, kv.pm)
        if found is None:
            continue
        pid, pid_call = found
        axis = (
            pid_call.args[0]
            if pid_call.args
            else next((k.value for k in pid_call.keywords if k.arg == "axis"), None)
        )
        if not isinstance(axis, ast.Constant) or not isinstance(axis.value, int):
            continue

        def on_pid(n, pid=pid):
            return type(n) is ast.Name and n.id == pid

        key = f"name:{pid}"
        address = [a for i, a in enumerate(call.args) if i != 1] + [
            k.value for k in call.keywords if k.arg != "val"
        ]
        if any(kv.reaches(a, key, on_pid) for a in address):
            continue  # programs along this axis update different addresses: nothing to combine
        middle = body[p_idx + 1 : r_idx]
        if any(
            isinstance(s, (ast.For, ast.While, ast.If, ast.With, ast.Return)) or _written(s)
            for s in middle
        ):
            continue
        after = body[r_idx + 1 :]
        if any(
            kv.reaches(n, key, on_pid)
            for s in after
            for n in ast.walk(s)
            if type(n) is ast.Name and n.id != partial
        ):
            continue
        yield SplitReduction(
            kv, body, call, p_idx, r_idx, pid, pid_call, axis.value, middle, launches
        )


def grid_axis(lv: LaunchView, axis: int) -> tuple[ast.Tuple, ast.expr] | None:
    """The launch's grid tuple and its element for `axis` (a literal tuple, or a name bound to one);
    None for a warmup launch, whose compiled kernel's launch passes every argument by position."""
    if lv.warmup:
        return None
    grid = lv.grid
    node = lv.resolve(grid) if isinstance(grid, ast.Name) else grid
    if not (isinstance(node, ast.Tuple) and len(node.elts) > axis):
        return None
    return node, node.elts[axis]
