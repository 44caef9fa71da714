"""The `single-pass` mutator."""

from __future__ import annotations

import ast

from .helpers import example, propose


def test_single_pass_refuses_single_loop_and_loop_free_kernels():
    assert propose("single-pass", *example("gelu")) == []
    assert propose("single-pass", *example("col_sum")) == []
    p = propose("single-pass", *example("softmax"))[0]
    assert "ONE_PASS: tl.constexpr=False" in p.source and "<= 32768" in p.source
    tree = ast.parse(p.source)
    kernel = next(
        n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "softmax_kernel"
    )
    one_pass = kernel.body[0].body
    loads = [
        n
        for n in ast.walk(ast.Module(body=one_pass, type_ignores=[]))
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "tl.load"
    ]
    assert len(loads) == 1  # the row is read once


def test_single_pass_keeps_rows_up_to_max_row_without_spills(pool):
    """The widest row the single pass takes (the softmax example's 1024x32768 case) compiles for
    sm_90 without spills: the bound MAX_ROW is what registers hold, not a guess."""
    from kernelbrain.engine import protocol as m
    from kernelbrain.engine.mutate.single_pass import MAX_ROW

    task, source = example("softmax")
    p = propose("single-pass", task, source)[0]
    spec = pool.call("compile:0", m.Specialize(task, p.source, seed=0), 300.0)
    widest = [
        r
        for c in spec.cases
        for r in c.launches
        if any(a.name == "ONE_PASS" and a.value for a in r.args)
        and next(a.value for a in r.args if a.name == "BLOCK_SIZE") == MAX_ROW
    ]
    assert widest, "no case reaches MAX_ROW"
    (facts,) = pool.call("compile:0", m.Compile(p.source, task.file, widest[:1]), 600.0).facts
    assert facts.ok and facts.n_spills == 0 and facts.n_regs <= 255, facts
