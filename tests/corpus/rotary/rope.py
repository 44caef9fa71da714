"""Rotary position embedding applied in place to queries, in the GPT-NeoX layout (the two halves
of each head rotate together). The kernel is made by assignment, as some projects write it
(`_rope_fwd = triton.jit(_rope_fwd)`), and the launch settings come from a helper imported
relative to the package."""

import torch
import triton
import triton.language as tl

from ._shapes import rope_block


def _rope_fwd(q_ptr, cos_ptr, sin_ptr, stride_tok, stride_head, n_heads, half, BLOCK: tl.constexpr):
    tok = tl.program_id(0)
    head = tl.program_id(1)
    offs = tl.arange(0, BLOCK)
    mask = offs < half
    base = q_ptr + tok * stride_tok + head * stride_head
    x1 = tl.load(base + offs, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(base + half + offs, mask=mask, other=0.0).to(tl.float32)
    c = tl.load(cos_ptr + tok * half + offs, mask=mask, other=0.0)
    s = tl.load(sin_ptr + tok * half + offs, mask=mask, other=0.0)
    tl.store(base + offs, (x1 * c - x2 * s).to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(base + half + offs, (x2 * c + x1 * s).to(q_ptr.dtype.element_ty), mask=mask)


_rope_fwd = triton.jit(_rope_fwd)


def apply_rope(q, cos, sin):
    tokens, heads, head_dim = q.shape
    half = head_dim // 2
    _rope_fwd[(tokens, heads)](
        q, cos, sin, q.stride(0), q.stride(1), heads, half, BLOCK=rope_block(head_dim)
    )


def apply_rope_ref(q, cos, sin):
    half = q.shape[-1] // 2
    x1, x2 = q.float()[..., :half], q.float()[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    q.copy_(torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(q.dtype))


def _case(tokens, heads, head_dim, device, dtype):
    angles = torch.rand(tokens, head_dim // 2, device=device) * 6.28
    return (
        torch.randn(tokens, heads, head_dim, device=device, dtype=dtype),
        torch.cos(angles),
        torch.sin(angles),
    )


def apply_rope_inputs(device="cuda"):
    # A 4k-token prefill of a 32-head, 128-wide model; a decode batch of 256 tokens.
    return [_case(4096, 32, 128, device, torch.bfloat16), _case(256, 32, 128, device, torch.bfloat16)]


def apply_rope_small_inputs(device="cpu"):
    return [_case(5, 3, 16, device, torch.float16), _case(2, 2, 40, device, torch.float16)]
