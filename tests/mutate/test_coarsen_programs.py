"""The `coarsen-programs` mutator."""

from __future__ import annotations

import ast
import copy
import textwrap
import types

from kernelbrain.engine.mutate.edits import Edits
from kernelbrain.engine.task.spec import Task

from .helpers import propose


def test_coarsen_programs_folds_consecutive_programs_and_only_exact_divisors():
    task = Task("config", "/tmp/k.py", "k", "run", "/tmp/k.py", "run", "/tmp/k.py:run")

    def module(body: str, grid: str = "(x.shape[0],)", decorator: str = "@triton.jit") -> str:
        return (
            textwrap.dedent("""
            import torch, triton
            import triton.language as tl

            DECORATOR
            def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            BODY

            def run(x, y):
                k[GRID](x, y, x.shape[1], BLOCK=64)
        """)
            .replace("BODY", textwrap.indent(textwrap.dedent(body), "    "))
            .replace("GRID", grid)
            .replace("DECORATOR", decorator)
        )

    row = """
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n + cols, mask=cols < n)
        tl.store(y_ptr + row * n + cols, x * 2, mask=cols < n)
    """
    proposals = propose("coarsen-programs", task, module(row))
    assert [p.knobs for p in proposals] == [{"ITEMS": n} for n in (2, 4, 8, 16)]
    p = proposals[1]
    tree = ast.parse(p.source)
    kernel = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "k")
    assert ast.unparse(kernel.args).endswith("ITEMS: tl.constexpr=1")
    first, loop = kernel.body
    assert ast.unparse(first) == "pid_first = tl.program_id(0)"
    assert ast.unparse(loop.iter) == "tl.static_range(ITEMS)"
    assert ast.unparse(loop.body[0]) == "pid_item = pid_first * ITEMS + item"
    assert ast.unparse(loop.body[1]) == "row = pid_item"
    launcher = ast.unparse(
        next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run")
    )
    assert "items = max(min(x.shape[0] & -x.shape[0], 4), 1)" in launcher
    assert "k[x.shape[0] // items,](x, y, x.shape[1], BLOCK=64, ITEMS=items)" in launcher
    # The launcher's choice, run as written, covers exactly the programs the draft launched.
    choice = next(
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "items"
    )
    for count in (1, 6, 12, 15, 64, 4096, 3000 * 40):
        x = types.SimpleNamespace(shape=(count, 7))
        items = eval(compile(ast.Expression(choice), "launcher", "eval"), {"x": x})
        assert count % items == 0 and items in (1, 2, 4) and (count % 4 or items == 4)
    assert propose("coarsen-programs", task, p.source) == []  # already coarsened: no nesting
    widened = propose("int64-offsets", task, p.source)
    assert widened and "pid_first = tl.program_id(0).to(tl.int64)" in widened[0].source
    assert propose("coarsen-programs", task, widened[0].source) == []  # nor once widened
    # A parameter added after one with a default goes after that default (a search once nested
    # this rewrite and wrote `ITEMS: tl.constexpr, ITEMS_2: tl.constexpr=1=1`).
    fn = next(n for n in ast.parse(p.source).body if isinstance(n, ast.FunctionDef))
    grown = copy.deepcopy(fn)
    grown.args.args.append(ast.arg("EXTRA", ast.parse("tl.constexpr").body[0].value))
    grown.args.defaults.append(ast.Constant(2))
    header = Edits(p.source).replace_function(fn, ast.fix_missing_locations(grown)).apply()
    assert "BLOCK: tl.constexpr, ITEMS: tl.constexpr=1, EXTRA: tl.constexpr=2):" in header
    ast.parse(header)

    refused = {
        "a grid-stride loop": module("""
            for row in tl.range(tl.program_id(0), n, tl.num_programs(0)):
                tl.store(y_ptr + row, 1.0)
        """),
        "an early return": module("""
            row = tl.program_id(0)
            if row >= n:
                return
            tl.store(y_ptr + row, 1.0)
        """),
        "an axis that is not a literal": module("""
            row = tl.program_id(BLOCK // 64 - 1)
            tl.store(y_ptr + row, 1.0)
        """),
        "only axis 1 read": module(
            """
            col = tl.program_id(1)
            tl.store(y_ptr + col, 1.0)
        """,
            grid="(1, x.shape[1])",
        ),
        "a grid computed by a function": module(row, grid="lambda meta: (x.shape[0],)"),
        "an autotuned kernel": module(
            row,
            decorator=(
                "@triton.autotune(configs=[triton.Config({}, num_warps=4)], key=['n'])\n@triton.jit"
            ),
        ),
    }
    for what, source in refused.items():
        assert propose("coarsen-programs", task, source) == [], what
