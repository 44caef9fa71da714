"""A kernel launched the way public projects launch theirs: an autograd.Function whose forward
calls a helper that computes the launch parameters, the entry an alias of `apply`."""

import torch
import triton
import triton.language as tl


@triton.jit
def scale_rows_kernel(x_ptr, out_ptr, n_cols, alpha, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * n_cols + cols, x * alpha, mask=mask)


def launch_settings(n_cols):
    block = triton.next_power_of_2(n_cols)
    return block, 4 if block <= 2048 else 8


def _scale_rows(x, alpha):
    out = torch.empty_like(x)
    block, warps = launch_settings(x.shape[1])
    scale_rows_kernel[(x.shape[0],)](x, out, x.shape[1], alpha, BLOCK=block, num_warps=warps)
    return out


class ScaleRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return _scale_rows(x, alpha)

    @staticmethod
    def backward(ctx, grad):
        return _scale_rows(grad, ctx.alpha), None


scale_rows = ScaleRows.apply


def scale_rows_ref(x, alpha):
    return x * alpha


def scale_rows_inputs(device="cuda"):
    return [(torch.randn(4096, 1000, device=device), 0.5)]


def scale_rows_small_inputs(device="cpu"):
    return [(torch.randn(5, 100, device=device), 0.5), (torch.randn(3, 33, device=device), 2.0)]
