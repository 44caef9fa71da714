"""GELU (tanh approximation), elementwise — a first draft.

Written the way a first version usually is: a tiny 64-element tile on one warp, and an
output buffer that is zero-filled although the kernel overwrites every element.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    t = 2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0  # tanh(inner)
    y = 0.5 * x * (1.0 + t)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def gelu(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(x)
    n = x.numel()
    gelu_kernel[(triton.cdiv(n, 64),)](x, out, n, BLOCK=64, num_warps=1)
    return out


def gelu_ref(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x.float(), approximate="tanh").to(x.dtype)


def gelu_inputs(device="cuda"):
    return [(torch.randn(n, device=device, dtype=torch.bfloat16),) for n in (1 << 20, 1 << 24, 1 << 28)]


def gelu_small_inputs(device="cpu"):
    return [(torch.randn(n, device=device, dtype=torch.bfloat16),) for n in (1000, 4099)]
