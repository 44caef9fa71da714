"""KL divergence per row, as distillation losses compute it: the launcher is a custom operator
(`torch.library.triton_op`) that launches through `torch.library.wrap_triton`, so torch.compile
can trace it."""

import torch
import triton
import triton.language as tl


@triton.jit
def kl_div_kernel(p_ptr, q_ptr, out_ptr, n_cols, stride_row, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        mask = cols < n_cols
        # log-probabilities in, as torch.nn.functional.kl_div(log_target=True) takes them
        logp = tl.load(p_ptr + row * stride_row + cols, mask=mask, other=0.0).to(tl.float32)
        logq = tl.load(q_ptr + row * stride_row + cols, mask=mask, other=0.0).to(tl.float32)
        acc += tl.where(mask, tl.exp(logq) * (logq - logp), 0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


@torch.library.triton_op("kernelbrain_corpus::kl_div_rows", mutates_args={})
def kl_div_rows(logp: torch.Tensor, logq: torch.Tensor) -> torch.Tensor:
    rows = logp.shape[0]
    out = torch.empty(rows, device=logp.device, dtype=torch.float32)
    block = min(triton.next_power_of_2(logp.shape[1]), 4096)
    torch.library.wrap_triton(kl_div_kernel)[(rows,)](
        logp, logq, out, logp.shape[1], logp.stride(0), BLOCK_N=block
    )
    return out


def kl_div_ref(logp, logq):
    return torch.nn.functional.kl_div(
        logp.float(), logq.float(), reduction="none", log_target=True
    ).sum(-1)


def kl_div_inputs(device="cuda"):
    return [
        (
            torch.randn(4096, 32000, device=device).log_softmax(-1),
            torch.randn(4096, 32000, device=device).log_softmax(-1),
        ),
    ]


def kl_div_small_inputs(device="cpu"):
    return [
        (
            torch.randn(5, 300, device=device).log_softmax(-1),
            torch.randn(5, 300, device=device).log_softmax(-1),
        ),
        (
            torch.randn(3, 40, device=device).log_softmax(-1),
            torch.randn(3, 40, device=device).log_softmax(-1),
        ),
    ]
