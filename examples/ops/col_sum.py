"""Column sum (reduce over rows) — a first draft.

Splits the rows across programs and adds the per-tile partial sums with float atomics, so the
summation order (and the last bits of the result) changes from run to run.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def col_sum_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_row, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows[:, None] * stride_row + cols[None, :], mask=mask, other=0.0)
    partial = tl.sum(x.to(tl.float32), axis=0)
    tl.atomic_add(out_ptr + cols, partial, mask=cols < n_cols)


def col_sum(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.zeros(n_cols, dtype=torch.float32, device=x.device)
    grid = (triton.cdiv(n_cols, 64), triton.cdiv(n_rows, 32))
    col_sum_kernel[grid](x, out, n_rows, n_cols, x.stride(0), BLOCK_M=32, BLOCK_N=64)
    return out


def col_sum_ref(x: torch.Tensor) -> torch.Tensor:
    return x.float().sum(dim=0)


def col_sum_inputs(device="cuda"):
    shapes = [(16384, 4096), (65536, 1024), (1024, 65536)]
    return [(torch.randn(s, device=device, dtype=torch.bfloat16),) for s in shapes]


def col_sum_small_inputs(device="cpu"):
    shapes = [(70, 33), (5, 130)]
    return [(torch.randn(s, device=device, dtype=torch.bfloat16),) for s in shapes]
