"""The `edits` mutator."""

from __future__ import annotations

import ast
import textwrap

from kernelbrain.engine.mutate.edits import Edits
from kernelbrain.engine.task.spec import Task

from .helpers import example, propose


def test_a_rewritten_statement_keeps_its_comments():
    src = textwrap.dedent("""
        import triton
        import triton.language as tl

        @triton.jit
        def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
            # the numerator, shifted for stability
            e = tl.exp(x - tl.max(x, axis=0))  # never overflows
            tl.store(out_ptr + offs, e / tl.sum(e, axis=0), mask=offs < n)

        def run(x, out):
            k[(1,)](x, out, x.numel(), BLOCK=1024)
    """)
    task = Task("config", "/tmp/k.py", "k", "run", "/tmp/k.py", "run", "/tmp/k.py:run")
    p = propose("exp2", task, src)[0]
    assert (
        "    # the numerator, shifted for stability\n"
        "    e = tl.exp2((x - tl.max(x, axis=0)) * 1.4426950408889634)  # never overflows\n"
    ) in p.source
    assert "# tanh(inner)" in propose("exp2", *example("gelu"))[0].source
    # a rewrite that copies a statement into a new branch and keeps it unchanged in the old one:
    # the comments stay with the unchanged original, not copied above the changed copy too
    tree = ast.parse(src)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "k")
    new = ast.parse(src).body[2]
    original = new.body[2]
    changed = ast.parse("e = tl.exp(x)").body[0]
    ast.copy_location(changed, original)
    new.body[2] = ast.If(test=ast.Name("FAST", ast.Load()), body=[changed], orelse=[original])
    out = Edits(src).replace_function(fn, ast.fix_missing_locations(new)).apply()
    assert "    if FAST:\n        e = tl.exp(x)\n    else:\n        # the numerator" in out
    assert out.count("# never overflows") == 1 and out.count("# the numerator") == 1


def test_edits_keywords_and_trailing_commas():
    src = "f(\n    a,\n    b=1,\n)\ng(x)\n"
    tree = ast.parse(src)
    f, g = (s.value for s in tree.body)
    out = (
        Edits(src)
        .add_keyword(f, "c", "2")
        .add_keyword(f, "d", "3")
        .add_keyword(g, "y", "4")
        .apply()
    )
    assert ast.dump(ast.parse(out)) == ast.dump(ast.parse("f(a, b=1, c=2, d=3)\ng(x, y=4)\n"))
    out = Edits(src).remove_keyword(f, "b").apply()
    assert ast.dump(ast.parse(out)) == ast.dump(ast.parse("f(a)\ng(x)\n"))
