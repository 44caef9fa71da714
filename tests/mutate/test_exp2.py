"""The `exp2` mutator."""

from __future__ import annotations

import textwrap

from kernelbrain.engine.task.spec import Task

from .helpers import example, propose


def test_exp2_rewrites_only_provably_fp32_exponentials():
    src = textwrap.dedent("""
        import torch, triton
        import triton.language as tl

        @triton.jit
        def k(x_ptr, h_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
            raw = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            h = tl.load(h_ptr + offs, mask=offs < n, other=0.0).to(tl.float16)
            m = float("-inf")
            s = 0.0
            for start in range(0, n, BLOCK):
                m_new = tl.maximum(m, tl.max(x, axis=0))
                s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
                m = m_new
            d = x.to(tl.float64)
            tl.store(out_ptr + offs, s + tl.exp(raw) + tl.exp(h) + tl.exp(d) + tl.math.exp(-x))

        def run(x, h, out):
            k[(1,)](x, h, out, x.numel(), BLOCK=1024)
    """)
    task = Task("config", "/tmp/k.py", "k", "run", "/tmp/k.py", "run", "/tmp/k.py:run")
    p = propose("exp2", task, src)[0]
    # the loop-carried fp32 values and the upcast tile are rewritten, the subtraction kept first
    assert (
        "s = s * tl.exp2((m - m_new) * 1.4426950408889634) + tl.sum(tl.exp2((x - m_new) * 1.4426950408889634)"
        in p.source
    )
    assert "tl.math.exp2(-x * 1.4426950408889634)" in p.source
    # an unconverted load (its pointer's type), fp16 (scaled in fp16) and fp64 stay tl.exp
    assert "tl.exp(raw) + tl.exp(h) + tl.exp(d)" in p.source and "3 left as tl.exp" in p.description
    assert (
        propose("exp2", task, p.source.replace("tl.exp(raw) + tl.exp(h) + tl.exp(d) + ", "")) == []
    )
    assert propose("exp2", *example("rmsnorm")) == []  # no exponentials
