"""Row log-softmax — a first draft: three passes over each row in 1024-element chunks."""

import torch
import triton
import triton.language as tl


@triton.jit
def log_softmax_kernel(out_ptr, x_ptr, stride_x, stride_out, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride_x
    out_row = out_ptr + row * stride_out
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m = tl.maximum(m, x)
    row_max = tl.max(m, axis=0)
    d = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        d += tl.exp(x - row_max)
    log_denom = tl.log(tl.sum(d, axis=0))
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        y = x - row_max - log_denom
        tl.store(out_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def log_softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    log_softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK=1024)
    return out


def log_softmax_ref(x: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(x.float(), dim=-1).to(x.dtype)


def log_softmax_inputs(device="cuda"):
    cases = [((4096, 32000), torch.bfloat16), ((8192, 1000), torch.float32),
             ((64, 512), torch.bfloat16)]  # fmt: skip
    return [(torch.randn(s, device=device, dtype=dt),) for s, dt in cases]


def log_softmax_small_inputs(device="cpu"):
    return [(torch.randn(s, device=device, dtype=torch.bfloat16),) for s in ((5, 33), (3, 1500))]
