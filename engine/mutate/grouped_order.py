"""Grouped program ordering for matmul (KB112 fixed).

Output tiles walked in row-major order become tiles walked in groups of GROUP_M row-blocks, as in
Triton's matmul tutorial, so programs running at the same time share A and B tiles in L2. Two
row-major forms are rewritten: a 2-D grid (`pid_m = tl.program_id(0)`, `pid_n =
tl.program_id(1)`), which becomes a 1-D grid, and a 1-D grid split by division (`pid_m = pid //
n_tiles_n`, `pid_n = pid % n_tiles_n`, the tutorial's form before grouping), whose grid stays.
"""

from __future__ import annotations

import ast
import copy

from .dataflow import fix
from .edits import Edits
from .registry import Mutation, MutationContext, mutator

GROUP_M = 8


def _assigns(stmt: ast.stmt) -> str | None:
    """The name `stmt` assigns, where it is a plain `name = value`."""
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
    ):
        return stmt.targets[0].id
    return None


def _pid_assign(stmt: ast.stmt, axis: int) -> str | None:
    if (name := _assigns(stmt)) is None:
        return None
    v = stmt.value  # type: ignore[attr-defined]
    if isinstance(v, ast.Call) and ast.unparse(v.func) == "tl.program_id":
        arg = v.args[0] if v.args else next((k.value for k in v.keywords if k.arg == "axis"), None)
        if isinstance(arg, ast.Constant) and arg.value == axis:
            return name
    return None


def _bound(kv, var: str) -> tuple[str, str] | None:
    """(size param, block constexpr) of `offs = var * BLOCK + tl.arange(...)` masked by `offs < SIZE`."""
    block = None
    offs = None
    for name, values in kv.assigns.items():
        for v in values:
            text = ast.unparse(v)
            if text.startswith(f"{var} * ") and "tl.arange" in text:
                block = text.split(" * ")[1].split(" ")[0]
                offs = name
    if block is None or block not in kv.kernel.constexprs:
        return None
    for n in kv.nodes:
        if isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.ops[0], ast.Lt):
            left, right = ast.unparse(n.left), ast.unparse(n.comparators[0])
            if left.startswith(offs) and right in kv.params and not kv.params[right].constexpr:
                return right, block
    return None


def _two_d(body: list[ast.stmt]) -> tuple[str, str, list[int], str | None] | None:
    """(row id, column id, the statements the grouped walk replaces, None): `pid_m =
    tl.program_id(0)` and `pid_n = tl.program_id(1)`; the grouped walk reads a new `pid`."""
    idx = [next((i for i, s in enumerate(body) if _pid_assign(s, axis)), None) for axis in (0, 1)]
    if idx[0] is None or idx[1] is None:
        return None
    rows, cols = _pid_assign(body[idx[0]], 0), _pid_assign(body[idx[1]], 1)
    return rows, cols, idx, None  # type: ignore[return-value]


def _split(stmt: ast.stmt, op: type) -> tuple[str, str, str] | None:
    """(target, dividend, divisor) of `target = pid // divisor` (or `%`)."""
    v = getattr(stmt, "value", None)
    if (
        (name := _assigns(stmt)) is not None
        and isinstance(v, ast.BinOp)
        and isinstance(v.op, op)
        and isinstance(v.left, ast.Name)
    ):
        return name, v.left.id, ast.unparse(v.right)
    return None


def _one_d(kv, body: list[ast.stmt]) -> tuple[str, str, list[int], str | None] | None:
    """(row id, column id, the statements the grouped walk replaces, the program id's name):
    `pid_m = pid // n_tiles_n` and `pid_n = pid % n_tiles_n` with `pid = tl.program_id(0)` and
    the divisor the column tiles' count (`tl.cdiv(N, BLOCK_N)`, directly or through a local)."""
    pid = next((_pid_assign(s, 0) for s in body if _pid_assign(s, 0)), None)
    divs = [(i, d) for i, s in enumerate(body) if (d := _split(s, ast.FloorDiv)) and d[1] == pid]
    mods = [(i, d) for i, s in enumerate(body) if (d := _split(s, ast.Mod)) and d[1] == pid]
    if pid is None or len(divs) != 1 or len(mods) != 1 or divs[0][1][2] != mods[0][1][2]:
        return None
    (i_row, (row, _, divisor)), (i_col, (col, _, _)) = divs[0], mods[0]
    bound = _bound(kv, col)
    counted = {divisor} | {ast.unparse(v) for v in kv.assigns.get(divisor, [])}
    if bound is None or not any(
        all(name in text for name in bound) and "cdiv" in text for text in counted
    ):
        return None  # a divisor that is not the column tiles' count: not a row-major walk
    replaced = [i_row, i_col]
    # the divisor's own local goes too when nothing else reads it (`n_tiles_n = tl.cdiv(...)`)
    defs = [i for i, s in enumerate(body) if _assigns(s) == divisor]
    reads = [
        n
        for i, s in enumerate(body)
        if i not in replaced
        for n in ast.walk(s)
        if isinstance(n, ast.Name) and n.id == divisor and isinstance(n.ctx, ast.Load)
    ]
    if len(defs) == 1 and not reads:
        replaced.append(defs[0])
    return row, col, replaced, pid


@mutator("grouped-order", "walk matmul tiles in groups so concurrent programs share operands in L2")
def propose(ctx: MutationContext):
    kv = ctx.kernel
    if kv is None or not kv.uses("dot") or any("group" in p.lower() for p in kv.params):
        return
    body = kv.node.body
    form = _two_d(body) or _one_d(kv, body)
    if form is None:
        return
    pid_m, pid_n, idx, pid = form
    bm, bn = _bound(kv, pid_m), _bound(kv, pid_n)
    if bm is None or bn is None:
        return
    (m, block_m), (n, block_n) = bm, bn
    grouped = ast.parse(
        ("pid = tl.program_id(0)\n" if pid is None else "")
        + f"num_pid_m = tl.cdiv({m}, {block_m})\n"
        f"num_pid_n = tl.cdiv({n}, {block_n})\n"
        f"num_pid_in_group = GROUP_M * num_pid_n\n"
        f"group_id = {pid or 'pid'} // num_pid_in_group\n"
        f"first_pid_m = group_id * GROUP_M\n"
        f"group_size_m = min(num_pid_m - first_pid_m, GROUP_M)\n"
        f"{pid_m} = first_pid_m + {pid or 'pid'} % num_pid_in_group % group_size_m\n"
        f"{pid_n} = {pid or 'pid'} % num_pid_in_group // group_size_m\n"
    ).body
    new_fn = copy.deepcopy(kv.node)
    first = min(idx)
    new_fn.body = (
        body[:first] + grouped + [s for k, s in enumerate(body) if k > first and k not in idx]
    )
    new_fn.args.args.append(
        ast.arg(arg="GROUP_M", annotation=ast.parse("tl.constexpr", mode="eval").body)
    )
    new_fn.args.defaults.append(ast.Constant(GROUP_M))
    edits = Edits(ctx.source).replace_function(kv.node, fix(new_fn))
    for lv in ctx.entry_launches():
        if lv.warmup:
            return  # its compiled launch passes every parameter by position: no new one fits
        if pid is None:  # the 2-D grid becomes 1-D
            grid = lv.grid
            node = lv.resolve(grid) if isinstance(grid, ast.Name) else grid
            if not (isinstance(node, ast.Tuple) and len(node.elts) == 2):
                return
            edits.replace(node, f"({edits.text(node.elts[0])} * {edits.text(node.elts[1])},)")
        edits.add_keyword(lv.call, "GROUP_M", str(GROUP_M))
    yield Mutation(
        edits.apply(),
        "grouped-order",
        f"output tiles walked in groups of {GROUP_M} row-blocks (grouped ordering): programs in flight "
        "reuse A and B tiles from L2 instead of re-reading them from memory",
    )
