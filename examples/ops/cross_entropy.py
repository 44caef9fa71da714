"""Cross-entropy per row (loss without reduction) — a first draft.

Two passes over the logits (max, then sum of exponentials) and a host-side bounds check with
`.item()` that stalls the CPU until the GPU has finished everything queued before it.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def cross_entropy_kernel(logits_ptr, target_ptr, loss_ptr, stride_row, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    row_ptr = logits_ptr + row * stride_row
    m = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(row_ptr + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m = tl.maximum(m, x)
    row_max = tl.max(m, axis=0)
    s = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(row_ptr + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        s += tl.exp(x - row_max)
    lse = row_max + tl.log(tl.sum(s, axis=0))
    target = tl.load(target_ptr + row)
    x_t = tl.load(row_ptr + target).to(tl.float32)
    tl.store(loss_ptr + row, lse - x_t)


def cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = logits.shape
    if target.max().item() >= n_cols or target.min().item() < 0:
        raise ValueError("target index out of range")
    loss = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
    cross_entropy_kernel[(n_rows,)](logits, target, loss, logits.stride(0), n_cols, BLOCK_SIZE=1024)
    return loss


def cross_entropy_ref(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(logits.float(), target, reduction="none")


def cross_entropy_inputs(device="cuda"):
    shapes = [(4096, 32768), (8192, 4096), (1024, 131072)]
    return [
        (torch.randn(s, device=device, dtype=torch.bfloat16), torch.randint(0, s[1], (s[0],), device=device))
        for s in shapes
    ]


def cross_entropy_small_inputs(device="cpu"):
    shapes = [(4, 50), (3, 1100)]
    return [
        (torch.randn(s, device=device, dtype=torch.bfloat16), torch.randint(0, s[1], (s[0],), device=device))
        for s in shapes
    ]
