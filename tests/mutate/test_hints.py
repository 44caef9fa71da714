"""The `hints` mutator."""

from __future__ import annotations

import textwrap

from kernelbrain.engine.task.spec import Task

from .helpers import example, propose


def test_hints_only_where_offsets_are_block_aligned():
    src = textwrap.dedent("""
        import torch, triton
        import triton.language as tl

        @triton.jit
        def k(x_ptr, idx_ptr, n, BLOCK: tl.constexpr):
            start = tl.load(idx_ptr)
            offs = start + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 1.0, mask=offs < n)

        def run(x, idx):
            k[(1,)](x, idx, x.numel(), BLOCK=1024)
    """)
    task = Task("config", "/tmp/k.py", "k", "run", "/tmp/k.py", "run", "/tmp/k.py:run")
    assert propose("hints", task, src) == []  # a loaded start need not be a multiple of the block
    task_g, gelu = example("gelu")
    p = propose("hints", task_g, gelu)[0]
    assert "tl.multiple_of(pid * BLOCK + tl.arange(0, BLOCK), BLOCK)" in p.source
    assert propose("hints", task_g, p.source) == []
