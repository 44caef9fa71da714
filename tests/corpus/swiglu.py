"""SwiGLU as an autograd.Function with forward and backward kernels in one file, the block
size and warps from a helper module, computed in fp32 on bf16 activations."""

import torch
import triton
import triton.language as tl
from corpus_utils import calculate_settings


@triton.jit
def swiglu_fwd_kernel(a_ptr, b_ptr, c_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    a = tl.load(a_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + row * stride + cols, mask=mask, other=0.0)
    silu = a * tl.sigmoid(a)
    tl.store(c_ptr + row * stride + cols, silu.to(b.dtype) * b, mask=mask)


@triton.jit
def swiglu_bwd_kernel(dc_ptr, a_ptr, b_ptr, stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    dc = tl.load(dc_ptr + row * stride + cols, mask=mask, other=0.0)
    a = tl.load(a_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + row * stride + cols, mask=mask, other=0.0)
    sig = tl.sigmoid(a)
    silu = a * sig
    db = dc * silu
    da = dc * (silu * (1 - sig) + sig) * b
    tl.store(a_ptr + row * stride + cols, da, mask=mask)
    tl.store(b_ptr + row * stride + cols, db, mask=mask)


class SwiGLUFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        shape = a.shape
        a2, b2 = a.reshape(-1, shape[-1]), b.reshape(-1, shape[-1])
        c = torch.empty_like(a2)
        block, warps = calculate_settings(shape[-1])
        swiglu_fwd_kernel[(a2.shape[0],)](a2, b2, c, c.stride(0), shape[-1], BLOCK_SIZE=block, num_warps=warps)
        ctx.save_for_backward(a, b)
        return c.reshape(shape)

    @staticmethod
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        shape = dc.shape
        dc2 = dc.reshape(-1, shape[-1])
        a2, b2 = a.reshape(-1, shape[-1]).clone(), b.reshape(-1, shape[-1]).clone()
        block, warps = calculate_settings(shape[-1])
        swiglu_bwd_kernel[(dc2.shape[0],)](dc2, a2, b2, dc2.stride(0), shape[-1], BLOCK_SIZE=block, num_warps=warps)
        return a2.reshape(shape), b2.reshape(shape)


swiglu = SwiGLUFunction.apply


def swiglu_ref(a, b):
    return (torch.nn.functional.silu(a.float()).to(a.dtype) * b)


def _case(shape, device):
    return tuple(torch.randn(shape, device=device, dtype=torch.bfloat16) for _ in range(2))


def swiglu_inputs(device="cuda"):
    return [_case((8, 2048, 11008), device), _case((2, 4096, 14336), device)]


def swiglu_small_inputs(device="cpu"):
    return [_case((2, 3, 100), device), _case((1, 2, 1000), device)]
