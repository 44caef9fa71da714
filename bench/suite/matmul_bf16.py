"""bf16 matrix product — a naive first draft: 32x32 tiles, programs in row-major order."""

import torch
import triton
import triton.language as tl


@triton.jit
def matmul_bf16_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                       stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       BLOCK_K: tl.constexpr):  # fmt: skip
    pid = tl.program_id(0)
    n_tiles_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // n_tiles_n
    pid_n = pid % n_tiles_n
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * stride_am + (k + rk)[None, :] * stride_ak,
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)  # fmt: skip
        b = tl.load(b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :] * stride_bn,
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)  # fmt: skip
        acc += tl.dot(a, b)
    c = acc.to(c_ptr.dtype.element_ty)
    tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn, c,
             mask=(rm[:, None] < M) & (rn[None, :] < N))  # fmt: skip


def matmul_bf16(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(M, 32) * triton.cdiv(N, 32),)
    matmul_bf16_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                             c.stride(0), c.stride(1), BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)  # fmt: skip
    return c


def matmul_bf16_ref(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a.float() @ b.float()).to(a.dtype)


def matmul_bf16_torch(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """What PyTorch runs for this in bf16 (cuBLAS): the benchmark's baseline, since the reference
    computes in fp32."""
    return a @ b


def matmul_bf16_inputs(device="cuda"):
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (4000, 11008, 4096), (128, 128, 128)]
    return [
        (torch.randn(m, k, device=device, dtype=torch.bfloat16),
         torch.randn(k, n, device=device, dtype=torch.bfloat16))
        for m, n, k in shapes
    ]  # fmt: skip


def matmul_bf16_small_inputs(device="cpu"):
    return [
        (torch.randn(m, k, device=device, dtype=torch.bfloat16),
         torch.randn(k, n, device=device, dtype=torch.bfloat16))
        for m, n, k in ((64, 64, 64), (33, 70, 40))
    ]  # fmt: skip
