"""GELU (tanh approximation) on bf16 activations, computed in fp32 with libdevice's `tanh`
imported by name, the launch settings passed as `**kwargs`."""

import torch
import triton
import triton.language as tl
from triton.language.extra.libdevice import tanh

SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)


@triton.jit
def gelu_tanh_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    inner = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
    y = 0.5 * x * (1.0 + tanh(inner))
    tl.store(out_ptr + offs, y.to(tl.bfloat16), mask=mask)


LAUNCH = {"BLOCK_SIZE": 1024, "num_warps": 4}


def gelu_tanh(x):
    out = torch.empty_like(x)
    n = x.numel()
    gelu_tanh_kernel[(triton.cdiv(n, LAUNCH["BLOCK_SIZE"]),)](x, out, n, **LAUNCH)
    return out


def gelu_tanh_ref(x):
    return torch.nn.functional.gelu(x.float(), approximate="tanh").to(torch.bfloat16)


def gelu_tanh_inputs(device="cuda"):
    return [(torch.randn(16, 4096, 4096, device=device, dtype=torch.bfloat16),)]


def gelu_tanh_small_inputs(device="cpu"):
    return [(torch.randn(3, 5, 70, device=device, dtype=torch.bfloat16),), (torch.randn(1000, device=device, dtype=torch.bfloat16),)]
