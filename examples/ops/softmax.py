"""Row softmax — a first draft.

Handles any row length by looping over the row in 1024-element chunks, three times: once for
the max, once for the denominator, once to write. Row offsets are computed in int32.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, x_ptr, stride_x, stride_out, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    out_row = out_ptr + row * stride_out
    # pass 1: row maximum
    m = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m = tl.maximum(m, x)
    row_max = tl.max(m, axis=0)
    # pass 2: denominator
    d = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        d += tl.exp(x - row_max)
    denom = tl.sum(d, axis=0)
    # pass 3: normalise and write
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=float("-inf")).to(tl.float32)
        y = tl.exp(x - row_max) / denom
        tl.store(out_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=1024)
    return out


def softmax_ref(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def softmax_inputs(device="cuda"):
    shapes = [(16384, 4096), (4096, 1024), (1024, 32768)]
    return [(torch.randn(s, device=device, dtype=torch.bfloat16),) for s in shapes]


def softmax_small_inputs(device="cpu"):
    shapes = [(5, 33), (3, 1500)]
    return [(torch.randn(s, device=device, dtype=torch.bfloat16),) for s in shapes]
