"""Cross-entropy per row with label smoothing and an ignore index: a row whose target is the
ignore index returns before it writes anything, so the launcher zero-fills the loss buffer
and those rows read 0, as in PyTorch."""

import torch
import triton
import triton.language as tl


@triton.jit
def cross_entropy_fwd_kernel(
    logits_ptr, stride, target_ptr, loss_ptr, n_cols, ignore_index, label_smoothing, BLOCK_SIZE: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    target = tl.load(target_ptr + row)
    if target == ignore_index:
        return
    row_ptr = logits_ptr + row * stride
    m = float("-inf")
    d = 0.0
    total = 0.0
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(row_ptr + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        block_max = tl.max(x, axis=0)
        new_m = tl.maximum(m, block_max)
        d = d * tl.exp(m - new_m) + tl.sum(tl.exp(x - new_m), axis=0)
        m = new_m
        total += tl.sum(tl.where(cols < n_cols, x, 0.0), axis=0)
    lse = m + tl.log(d)
    x_t = tl.load(row_ptr + target).to(tl.float32)
    eps = label_smoothing.to(tl.float32)
    loss = (1.0 - eps) * (lse - x_t) + eps * (lse - total / n_cols)
    tl.store(loss_ptr + row, loss)


def cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.1):
    n_rows, n_cols = logits.shape
    loss = torch.zeros(n_rows, dtype=torch.float32, device=logits.device)
    block = min(4096, triton.next_power_of_2(n_cols))
    cross_entropy_fwd_kernel[(n_rows,)](
        logits, logits.stride(0), target, loss, n_cols, ignore_index, label_smoothing, BLOCK_SIZE=block
    )
    return loss


def cross_entropy_ref(logits, target, ignore_index=-100, label_smoothing=0.1):
    return torch.nn.functional.cross_entropy(
        logits.float(), target, ignore_index=ignore_index, reduction="none", label_smoothing=label_smoothing
    )


def _case(rows, cols, device, dtype):
    target = torch.randint(0, cols, (rows,), device=device)
    target[::4] = -100  # every fourth row is padding
    return torch.randn(rows, cols, device=device, dtype=dtype), target


def cross_entropy_inputs(device="cuda"):
    return [_case(8192, 32768, device, torch.bfloat16), _case(4096, 128256, device, torch.bfloat16)]


def cross_entropy_small_inputs(device="cpu"):
    return [_case(8, 100, device, torch.float32), _case(5, 5000, device, torch.bfloat16)]
