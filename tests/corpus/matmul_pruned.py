"""An fp32 matmul autotuned over configurations built in a loop and pruned by problem size
(`prune_configs_by`). `tl.dot` runs fp32 inputs in TF32 on a GPU: the original is a little off
an fp32 reference there, and candidates are held to no worse than it."""

import torch
import triton
import triton.language as tl


def _configs():
    configs = []
    for block_m in (32, 64, 128):
        for block_n in (32, 64, 128):
            for warps in (4, 8):
                configs.append(
                    triton.Config(
                        {"BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": 32},
                        num_warps=warps,
                        num_stages=3,
                    )
                )
    return configs


def _prune(configs, named_args, **kwargs):
    """Blocks no taller or wider than the problem (rounded up to a power of two)."""
    m, n = named_args["M"], named_args["N"]
    kept = [
        c
        for c in configs
        if c.kwargs["BLOCK_M"] <= max(32, triton.next_power_of_2(m))
        and c.kwargs["BLOCK_N"] <= max(32, triton.next_power_of_2(n))
    ]
    return kept or configs[:1]


@triton.autotune(configs=_configs(), key=["M", "N", "K"], prune_configs_by={"early_config_prune": _prune})
@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(
            a_ptr + rm[:, None] * stride_am + (k + rk)[None, :] * stride_ak,
            mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :] * stride_bn,
            mask=((k + rk)[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        acc += tl.dot(a, b)
    tl.store(
        c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn,
        acc,
        mask=(rm[:, None] < M) & (rn[None, :] < N),
    )


def matmul(a, b):
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.float32)

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]))

    matmul_kernel[grid](
        a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1)
    )
    return c


def matmul_ref(a, b):
    return a @ b


def matmul_inputs(device="cuda"):
    return [
        (torch.randn(4096, 4096, device=device), torch.randn(4096, 4096, device=device)),
        (torch.randn(8192, 1024, device=device), torch.randn(1024, 2048, device=device)),
    ]


def matmul_small_inputs(device="cpu"):
    return [
        (torch.randn(48, 64, device=device), torch.randn(64, 40, device=device)),
        (torch.randn(33, 96, device=device), torch.randn(96, 70, device=device)),
    ]
