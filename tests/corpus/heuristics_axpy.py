"""`out = alpha * x + y` with a `@triton.heuristics` flag that drops the mask when the size
divides the block, launched through a grid lambda on the tuned block size."""

import torch
import triton
import triton.language as tl


@triton.heuristics({"EVEN_N": lambda args: args["n_elements"] % args["BLOCK_SIZE"] == 0})
@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n_elements, alpha, BLOCK_SIZE: tl.constexpr, EVEN_N: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    if EVEN_N:
        x = tl.load(x_ptr + offs)
        y = tl.load(y_ptr + offs)
        tl.store(out_ptr + offs, alpha * x + y)
    else:
        mask = offs < n_elements
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, alpha * x + y, mask=mask)


def axpy(alpha, x, y):
    out = torch.empty_like(x)
    n = x.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)  # noqa: E731
    axpy_kernel[grid](x, y, out, n, alpha, BLOCK_SIZE=256)
    return out


def axpy_ref(alpha, x, y):
    return alpha * x + y


def axpy_inputs(device="cuda"):
    return [
        (0.5, torch.randn(1 << 26, device=device), torch.randn(1 << 26, device=device)),
        (2.0, torch.randn(10_000_003, device=device), torch.randn(10_000_003, device=device)),
    ]


def axpy_small_inputs(device="cpu"):
    return [
        (0.5, torch.randn(1024, device=device), torch.randn(1024, device=device)),
        (-1.5, torch.randn(1000, device=device), torch.randn(1000, device=device)),
    ]
