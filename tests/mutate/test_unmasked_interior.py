"""The `unmasked-interior` mutator."""

from __future__ import annotations

import ast
import textwrap

from kernelbrain.engine.task.spec import Task

from .helpers import propose


def test_unmasked_interior_drops_only_the_bounds_test_and_only_where_it_can_prove_it():
    task = Task("config", "/tmp/k.py", "k", "run", "/tmp/k.py", "run", "/tmp/k.py:run")

    def kernel(body: str) -> str:
        return textwrap.dedent("""
            import torch, triton
            import triton.language as tl

            @triton.jit
            def k(x_ptr, y_ptr, idx_ptr, n, BLOCK: tl.constexpr):
            BODY

            def run(x, y, idx):
                k[(triton.cdiv(x.numel(), 1024),)](x, y, idx, x.numel(), BLOCK=1024)
        """).replace("BODY", textwrap.indent(textwrap.dedent(body), "    "))

    plain = kernel("""
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        keep = offs < n
        x = tl.load(x_ptr + offs, mask=keep, other=0.0)
        tl.store(y_ptr + offs, x, mask=keep & (x > 0))
        tl.store(x_ptr + offs, x * 2, mask=keep)
    """)
    (p,) = propose("unmasked-interior", task, plain)
    tree = ast.parse(p.source)
    branch = next(n for n in ast.walk(tree) if isinstance(n, ast.If))
    assert ast.unparse(branch.test) == "tl.program_id(0) * BLOCK + BLOCK <= n"
    interior, tail = ast.unparse(branch.body), ast.unparse(branch.orelse)
    assert "tl.load(x_ptr + offs)" in interior and "other" not in interior
    assert "mask=keep & (x > 0)" in interior  # not the bounds test alone: kept
    assert "tl.store(x_ptr + offs, x * 2)" in interior
    assert tail.count("mask=keep") == 3  # the last block keeps every mask
    assert propose("unmasked-interior", task, p.source) == []  # nothing left to split
    inline = kernel("""
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        tl.store(y_ptr + offs, x, mask=offs < n)
    """)
    (q,) = propose("unmasked-interior", task, inline)
    branch = next(n for n in ast.walk(ast.parse(q.source)) if isinstance(n, ast.If))
    assert (
        "mask" not in ast.unparse(branch.body) and ast.unparse(branch.orelse).count("offs < n") == 2
    )

    refused = {
        "a start read from memory, a block": """
            start = tl.load(idx_ptr + tl.arange(0, BLOCK))
            offs = start + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 1.0, mask=offs < n)
        """,
        "a bound that is a block": """
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            lim = tl.load(idx_ptr + tl.arange(0, BLOCK))
            tl.store(x_ptr + offs, 1.0, mask=offs < lim)
        """,
        "offsets assigned twice": """
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            offs = offs * 2
            tl.store(x_ptr + offs, 1.0, mask=offs < n)
        """,
        "a return after the mask": """
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            if n == 0:
                return
            tl.store(x_ptr + offs, 1.0, mask=offs < n)
        """,
        "no access passes the bounds test alone": """
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=(offs < n) & (offs > 3))
            tl.store(y_ptr + offs, x, mask=(offs < n) & (offs > 3))
        """,
    }
    for why, body in refused.items():
        assert propose("unmasked-interior", task, kernel(body)) == [], why
