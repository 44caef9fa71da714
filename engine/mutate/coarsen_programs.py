"""Fewer, fatter programs: each program does the work of ITEMS consecutive programs along grid
axis 0, and that axis of the grid shrinks ITEMS-fold.

A draft that gives every small piece of work its own program (one row of a RoPE head, one short
row) launches hundreds of thousands of programs that each move a few hundred bytes: the cost of
starting a program, its address arithmetic and its scalar loads then outweighs its memory
traffic, and the GPU streams at a fraction of its bandwidth. Here the kernel's body runs in an
unrolled `tl.static_range(ITEMS)` loop, with every `tl.program_id(0)` replaced by
`first * ITEMS + i`: consecutive program ids touch neighbouring memory, so a program's ITEMS
pieces stream as one, and their loads are in flight together.

No bound check is added (a runtime parameter would change the kernel's signature). Instead the
launcher takes the largest power of two up to ITEMS that divides the axis' program count, so
the programs cover exactly the ids the draft launched; a count with no such divisor runs as the
draft did.

Where (nothing is proposed otherwise): a kernel that is not autotuned, that reads
`tl.program_id(0)` and never `tl.num_programs(0)` (a grid-stride loop already sizes its own
work), and has no `return`; at least one launch the entry makes with a literal grid tuple.
Other launches keep ITEMS at its default of 1.
"""

from __future__ import annotations

import ast
import copy

from ..rules.analysis import KernelView, kwarg, tl_name
from .dataflow import fix, unique_name
from .edits import Edits
from .registry import Mutation, MutationContext, mutator

# Unrolled: the body is repeated ITEMS times, and 16 small programs' worth of loads in flight is
# already a full row of a large head.
ITEMS = (2, 4, 8, 16)


@mutator("coarsen-programs", "each program does the work of several consecutive programs")
def propose(ctx: MutationContext):
    kv = ctx.kernel
    if kv is None or kv.kernel.autotuned or not _coarsenable(kv) or _coarsened(kv):
        return
    launches = [
        (lv, stmt)
        for lv in ctx.entry_launches()
        if (stmt := lv.statement) is not None
        and not lv.warmup
        and isinstance(lv.grid, ast.Tuple)
        and lv.grid.elts
        and not any(isinstance(e, ast.Starred) for e in lv.grid.elts)
    ]
    if not launches:
        return
    taken = (
        {n.id for n in kv.nodes if isinstance(n, ast.Name)}
        | set(kv.params)
        | {n.id for lv, _ in launches for n in ast.walk(lv.launcher) if isinstance(n, ast.Name)}
    )
    items, first, step, pid, chosen = (
        unique_name(n, taken) for n in ("ITEMS", "pid_first", "item", "pid_item", "items")
    )
    fn = fix(_rewritten(kv, items, first, step, pid))
    for n in ITEMS:
        edits = Edits(ctx.source).replace_function(kv.node, fn)
        for lv, stmt in launches:
            count = lv.grid.elts[0]
            edits.insert_before(
                stmt,
                f"{chosen} = max(min(({ast.unparse(count)}) & -({ast.unparse(count)}), {n}), 1)"
                f"  # the largest power of two up to {n} that divides the program count",
            )
            edits.replace(count, f"({edits.text(count)}) // {chosen}")
            edits.add_keyword(lv.call, items, chosen)
        yield Mutation(
            edits.apply(),
            "coarsen-programs",
            f"each program does the work of {n} consecutive programs along grid axis 0 (their "
            f"loads unrolled, in flight together): up to {n}x fewer programs",
            {items: n},
        )


def _coarsenable(kv: KernelView) -> bool:
    """The body reads its program id along axis 0, never that axis' program count, and has no
    `return` (which would end every item after it)."""
    reads = False
    for node in kv.nodes:
        if isinstance(node, ast.Return):
            return False
        name = tl_name(kv.pm, node)
        if name in ("program_id", "num_programs") and _axis(node) is None:
            return False  # an axis that is not a literal: cannot tell which
        if name == "num_programs" and _axis(node) == 0:
            return False
        reads |= name == "program_id" and _axis(node) == 0
    return reads


def _coarsened(kv: KernelView) -> bool:
    """Whether the kernel already has this rewrite's shape: its body is the program id read
    once, then one `static_range` loop over a constexpr (its count is a configuration knob;
    coarsening again would only nest loops)."""
    _, body = _docstring_split(kv.node.body)
    if len(body) != 2 or not isinstance(body[0], ast.Assign) or not isinstance(body[1], ast.For):
        return False
    loop = body[1].iter
    return (
        any(tl_name(kv.pm, n) == "program_id" for n in ast.walk(body[0].value))  # maybe widened
        and tl_name(kv.pm, loop) == "static_range"
        and len(loop.args) == 1  # type: ignore[attr-defined]
        and isinstance(loop.args[0], ast.Name)  # type: ignore[attr-defined]
        and loop.args[0].id in kv.kernel.constexprs  # type: ignore[attr-defined]
    )


def _axis(call: ast.Call) -> int | None:
    axis = kwarg(call, "axis", 0)
    return axis.value if isinstance(axis, ast.Constant) and isinstance(axis.value, int) else None


def _rewritten(kv: KernelView, items: str, first: str, step: str, pid: str) -> ast.FunctionDef:
    """The kernel with its body in `for step in tl.static_range(items)` and `program_id(0)`
    read as `first * items + step`."""
    fn = copy.deepcopy(kv.node)
    tl = _tl_spelling(kv)

    class ProgramId(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call):
            self.generic_visit(node)
            if tl_name(kv.pm, node) == "program_id" and _axis(node) == 0:
                return ast.Name(pid, ast.Load())
            return node

    doc, body = _docstring_split([ProgramId().visit(s) for s in fn.body])
    head = ast.parse(f"{first} = {tl}.program_id(0)").body
    loop = ast.parse(
        f"for {step} in {tl}.static_range({items}):\n    {pid} = {first} * {items} + {step}\n"
    ).body[0]
    loop.body += body  # type: ignore[attr-defined]
    fn.body = doc + head + [loop]
    fn.args.args.append(ast.arg(arg=items, annotation=ast.parse(f"{tl}.constexpr").body[0].value))  # type: ignore[attr-defined]
    fn.args.defaults.append(ast.Constant(1))  # other launches keep one piece per program
    return fn


def _docstring_split(body: list[ast.stmt]) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """(the docstring, if any, as a list; the statements after it)."""
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        return body[:1], body[1:]
    return [], body


def _tl_spelling(kv: KernelView) -> str:
    """How the kernel spells `triton.language` (from its own `tl.program_id` call)."""
    for node in kv.nodes:
        if tl_name(kv.pm, node) == "program_id" and isinstance(node.func, ast.Attribute):
            return ast.unparse(node.func.value)
    return "tl"
