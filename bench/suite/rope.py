"""Rotary position embedding (the half-split form of Llama and GPT-NeoX) — a first draft: one
program per (token, head), one warp."""

import torch
import triton
import triton.language as tl


@triton.jit
def rope_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, n_heads, head_dim, HALF: tl.constexpr):
    pid = tl.program_id(0)
    token = pid // n_heads
    base = pid * head_dim
    offs = tl.arange(0, HALF)
    mask = offs < head_dim // 2
    x1 = tl.load(x_ptr + base + offs, mask=mask).to(tl.float32)
    x2 = tl.load(x_ptr + base + head_dim // 2 + offs, mask=mask).to(tl.float32)
    c = tl.load(cos_ptr + token * (head_dim // 2) + offs, mask=mask).to(tl.float32)
    s = tl.load(sin_ptr + token * (head_dim // 2) + offs, mask=mask).to(tl.float32)
    y1 = x1 * c - x2 * s
    y2 = x2 * c + x1 * s
    tl.store(out_ptr + base + offs, y1.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(out_ptr + base + head_dim // 2 + offs, y2.to(out_ptr.dtype.element_ty), mask=mask)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: [tokens, heads, head_dim] (contiguous); cos, sin: [tokens, head_dim // 2]."""
    tokens, heads, head_dim = x.shape
    out = torch.empty_like(x)
    half = triton.next_power_of_2(head_dim // 2)
    rope_kernel[(tokens * heads,)](x, cos, sin, out, heads, head_dim, HALF=half, num_warps=1)
    return out


def rope_ref(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    xf = x.float()
    x1, x2 = xf[..., :half], xf[..., half:]
    c, s = cos.float()[:, None, :], sin.float()[:, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)


def _case(tokens, heads, head_dim, dtype, device):
    angles = torch.rand(tokens, head_dim // 2, device=device) * 6.283
    return (
        torch.randn(tokens, heads, head_dim, device=device, dtype=dtype),
        angles.cos().to(dtype),
        angles.sin().to(dtype),
    )


def rope_inputs(device="cuda"):
    cases = [(8192, 32, 128, torch.bfloat16), (3000, 40, 128, torch.bfloat16),
             (4096, 8, 64, torch.float32), (32, 8, 64, torch.bfloat16)]  # fmt: skip
    torch.manual_seed(0)
    return [_case(*c, device) for c in cases]


def rope_small_inputs(device="cpu"):
    return [_case(5, 3, 64, torch.bfloat16, device), _case(7, 2, 96, torch.float32, device)]
