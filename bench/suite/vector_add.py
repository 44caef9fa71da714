"""Elementwise add of two vectors — a first draft: small tiles, one warp."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    add_kernel[(triton.cdiv(n, 128),)](x, y, out, n, BLOCK=128, num_warps=1)
    return out


def add_ref(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y


def add_inputs(device="cuda"):
    cases = [(1 << 24, torch.float32), (10_000_019, torch.bfloat16), (8192, torch.float32)]
    return [
        (torch.randn(n, device=device, dtype=dt), torch.randn(n, device=device, dtype=dt))
        for n, dt in cases
    ]


def add_small_inputs(device="cpu"):
    return [
        (torch.randn(n, device=device, dtype=dt), torch.randn(n, device=device, dtype=dt))
        for n, dt in ((1000, torch.float32), (4099, torch.bfloat16))
    ]
