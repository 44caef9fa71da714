"""Fewer atomics: each program reduces several blocks in registers before one atomic update.

A split reduction such as the column-sum first draft gives every block of rows its own program,
which sums its tile and adds the partial result into the output with `tl.atomic_add`. When the
atomic's address does not depend on that grid axis (the programs along it meet in the same
output), a program can take ITERS consecutive blocks instead: the loads of all ITERS blocks are
unrolled (`tl.static_range`, so they are in flight together), their values are added elementwise
and reduced once, and the grid along that axis shrinks ITERS-fold, and so do the atomics.

Preconditions (nothing is proposed otherwise): exactly one atomic, `tl.atomic_add(ptr, partial)`
as a top-level statement, where `partial = tl.sum(E, ...)` and E is a `.to(tl.float32)` of a load
whose masked-off elements are zero (`other=0`), so the blocks past the end that the last program
now also visits add nothing; between the `tl.program_id` and the sum only straight-line code
without stores; after the sum nothing that depends on that program id.
"""

from __future__ import annotations

import ast
import copy

from ..rules.analysis import kwarg, method_call, tl_name
from .base import Mutation, MutationContext, mutator
from .dataflow import fix, unique_name
from .edits import Edits

ITERS = (4, 8, 16)  # unrolled: 32 blocks of 32x64 bf16 per program would hold 256 registers of loads


def _pid_assign(stmt: ast.stmt, pm) -> tuple[str, ast.expr] | None:
    if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Call) and tl_name(pm, stmt.value) == "program_id"):
        return stmt.targets[0].id, stmt.value
    return None


def _zero_when_masked(expr: ast.expr, kv) -> bool:
    """`X.to(tl.float32)` where X is (or is assigned once from) a load with `other=0`."""
    if not (method_call(expr, "to") and expr.args and ast.unparse(expr.args[0]) in ("tl.float32", "float32")):
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
    return isinstance(other, ast.Constant) and other.value == 0 and not isinstance(other.value, bool)


def _written(stmt: ast.stmt) -> bool:
    return any(isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
               and (c.func.attr == "store" or c.func.attr.startswith("atomic_")) for c in ast.walk(stmt))


@mutator("coarsen-atomics", "reduce several blocks per program before one atomic update (fewer atomics)")
def propose(ctx: MutationContext):
    kv = ctx.kernel
    if kv is None or kv.kernel.autotuned:
        return
    atomics = [c for c in kv.nodes if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
               and c.func.attr.startswith("atomic_")]
    body = kv.node.body
    if len(atomics) != 1 or atomics[0].func.attr != "atomic_add":  # type: ignore[attr-defined]
        return
    call = atomics[0]
    a_idx = next((i for i, s in enumerate(body) if isinstance(s, ast.Expr) and s.value is call), None)
    value = kwarg(call, "val", 1)
    if a_idx is None or not isinstance(value, ast.Name) or len(kv.assigns.get(value.id, [])) != 1:
        return
    partial = value.id
    r_idx = next((i for i, s in enumerate(body[:a_idx]) if isinstance(s, ast.Assign)
                  and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) and s.targets[0].id == partial), None)
    if r_idx is None:
        return
    reduce_call = body[r_idx].value  # type: ignore[attr-defined]
    if not (isinstance(reduce_call, ast.Call) and tl_name(kv.pm, reduce_call) == "sum" and reduce_call.args
            and _zero_when_masked(reduce_call.args[0], kv)):
        return
    launches = [lv for lv in ctx.entry_launches() if lv.launcher is not None]
    if not launches or "import triton" not in ctx.source:
        return
    for p_idx, stmt in enumerate(body[:r_idx]):
        found = _pid_assign(stmt, kv.pm)
        if found is None:
            continue
        pid, pid_call = found
        axis = pid_call.args[0] if pid_call.args else next((k.value for k in pid_call.keywords if k.arg == "axis"), None)
        if not isinstance(axis, ast.Constant) or not isinstance(axis.value, int):
            continue
        on_pid = (lambda n, pid=pid: type(n) is ast.Name and n.id == pid)
        key = f"name:{pid}"
        address = [a for i, a in enumerate(call.args) if i != 1] + [k.value for k in call.keywords if k.arg != "val"]
        if any(kv.reaches(a, key, on_pid) for a in address):
            continue  # programs along this axis update different addresses: nothing to combine
        middle = body[p_idx + 1:r_idx]
        if any(isinstance(s, (ast.For, ast.While, ast.If, ast.With, ast.Return)) or _written(s) for s in middle):
            continue
        after = body[r_idx + 1:]
        if any(kv.reaches(n, key, on_pid) for s in after for n in ast.walk(s)
               if type(n) is ast.Name and n.id != partial):
            continue
        yield from _rewrite(ctx, kv, body, p_idx, r_idx, pid, pid_call, axis.value, middle, launches)
        return


def _rewrite(ctx, kv, body, p_idx, r_idx, pid, pid_call, axis, middle, launches):
    taken = {n.id for n in kv.nodes if isinstance(n, ast.Name)} | set(kv.params)
    iters = unique_name("ITERS", taken)
    base = unique_name(f"{pid}_first", taken)
    acc = unique_name("acc", taken)
    it = unique_name("it", taken)
    reduce_stmt = body[r_idx]
    reduced = reduce_stmt.value.args[0]
    loop = ast.parse(f"for {it} in tl.static_range({iters}):\n"
                     f"    {pid} = {base} * {iters} + {it}\n"
                     f"    {acc} += 0\n").body[0]
    loop.body = [loop.body[0]] + copy.deepcopy(middle) + [loop.body[1]]
    loop.body[-1].value = copy.deepcopy(reduced)  # type: ignore[attr-defined]
    new_reduce = copy.deepcopy(reduce_stmt)
    new_reduce.value.args[0] = ast.Name(id=acc, ctx=ast.Load())  # type: ignore[attr-defined]
    head = ast.parse(f"{base} = {ast.unparse(pid_call)}\n{acc} = 0.0\n").body
    new_fn = copy.deepcopy(kv.node)
    new_fn.body = body[:p_idx] + head + [loop, new_reduce] + body[r_idx + 1:]
    new_fn.args.args.append(ast.arg(arg=iters, annotation=ast.parse("tl.constexpr", mode="eval").body))
    new_fn.args.defaults.append(ast.Constant(1))  # other callers keep one block per program
    fn = fix(new_fn)
    for n in ITERS:
        edits = Edits(ctx.source).replace_function(kv.node, fn)
        for lv in launches:
            grid = lv.call.func.slice  # type: ignore[attr-defined]
            node = lv.resolve(grid) if isinstance(grid, ast.Name) else grid
            if not (isinstance(node, ast.Tuple) and len(node.elts) > axis):
                return
            edits.replace(node.elts[axis], f"triton.cdiv({edits.text(node.elts[axis])}, {n})")
            edits.add_keyword(lv.call, iters, str(n))
        yield Mutation(edits.apply(), "coarsen-atomics",
                       f"each program sums {n} consecutive blocks along grid axis {axis} in registers (loads "
                       f"unrolled, in flight together) and makes one atomic update for them: {n}x fewer programs "
                       f"and atomic adds", {iters: n})
