"""Tiled matrix multiply (bf16 in, fp32 accumulate) — a first draft.

Programs walk the output tiles in plain row-major order on a 2-D grid, and the output is
zero-filled before a kernel that writes every element of it.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        ks = k + offs_k
        a = tl.load(
            a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak,
            mask=(offs_m[:, None] < M) & (ks[None, :] < K), other=0.0,
        )
        b = tl.load(
            b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn,
            mask=(ks[:, None] < K) & (offs_n[None, :] < N), other=0.0,
        )
        acc += tl.dot(a, b)
    c = acc.to(c_ptr.dtype.element_ty)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, c, mask=mask)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    _, N = b.shape
    c = torch.zeros((M, N), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
    matmul_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=64, BLOCK_N=64, BLOCK_K=32,
    )
    return c


def matmul_ref(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.float() @ b.float()).to(a.dtype)


def matmul_inputs(device="cuda"):
    shapes = [(4096, 4096, 4096), (2048, 8192, 1024), (8192, 2048, 4096)]
    return [
        (torch.randn(m, k, device=device, dtype=torch.bfloat16), torch.randn(k, n, device=device, dtype=torch.bfloat16))
        for m, n, k in shapes
    ]


def matmul_small_inputs(device="cpu"):
    # fp16, not bf16: the CPU interpreter multiplies bf16 bit patterns in tl.dot (triton#11584).
    shapes = [(33, 65, 17), (70, 40, 96)]
    return [
        (torch.randn(m, k, device=device, dtype=torch.float16), torch.randn(k, n, device=device, dtype=torch.float16))
        for m, n, k in shapes
    ]
