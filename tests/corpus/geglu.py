"""GeGLU forward and backward in one file (two kernels, two tasks) on bf16 3-D activations,
computed in fp32 through `libdevice.erf` from the `triton.language.extra` module."""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

INV_SQRT_2 = tl.constexpr(0.7071067811865476)


@triton.jit
def geglu_fwd_kernel(gate_ptr, up_ptr, out_ptr, n_cols, stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    g = tl.load(gate_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(up_ptr + row * stride + cols, mask=mask, other=0.0)
    gelu = 0.5 * g * (1.0 + libdevice.erf(g * INV_SQRT_2))
    tl.store(out_ptr + row * stride + cols, (gelu * u).to(u.dtype), mask=mask)


@triton.jit
def geglu_bwd_kernel(dout_ptr, gate_ptr, up_ptr, dgate_ptr, dup_ptr, n_cols, stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    dout = tl.load(dout_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(gate_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(up_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    cdf = 0.5 * (1.0 + libdevice.erf(g * INV_SQRT_2))
    pdf = tl.exp(-0.5 * g * g) * 0.3989422804014327
    gelu = g * cdf
    tl.store(dup_ptr + row * stride + cols, (dout * gelu).to(dup_ptr.dtype.element_ty), mask=mask)
    tl.store(dgate_ptr + row * stride + cols, (dout * u * (cdf + g * pdf)).to(dgate_ptr.dtype.element_ty), mask=mask)


def _rows(t):
    return t.reshape(-1, t.shape[-1])


def geglu(gate, up):
    g, u = _rows(gate), _rows(up)
    out = torch.empty_like(u)
    n_rows, n_cols = g.shape
    geglu_fwd_kernel[(n_rows, triton.cdiv(n_cols, 1024))](g, u, out, n_cols, g.stride(0), BLOCK_SIZE=1024)
    return out.reshape(up.shape)


def geglu_backward(dout, gate, up):
    d, g, u = _rows(dout), _rows(gate), _rows(up)
    dgate, dup = torch.empty_like(g), torch.empty_like(u)
    n_rows, n_cols = g.shape
    geglu_bwd_kernel[(n_rows, triton.cdiv(n_cols, 1024))](d, g, u, dgate, dup, n_cols, g.stride(0), BLOCK_SIZE=1024)
    return dgate.reshape(gate.shape), dup.reshape(up.shape)


def geglu_ref(gate, up):
    return (torch.nn.functional.gelu(gate.float()) * up.float()).to(up.dtype)


def geglu_backward_ref(dout, gate, up):
    d, g, u = dout.float(), gate.float(), up.float()
    cdf = 0.5 * (1.0 + torch.erf(g * INV_SQRT_2.value))
    pdf = torch.exp(-0.5 * g * g) / (2 * torch.pi) ** 0.5
    return (d * u * (cdf + g * pdf)).to(gate.dtype), (d * g * cdf).to(up.dtype)


def _pair(shape, device):
    return [torch.randn(shape, device=device, dtype=torch.bfloat16) for _ in range(2)]


def geglu_inputs(device="cuda"):
    return [tuple(_pair((8, 2048, 11008), device)), tuple(_pair((4, 512, 4096), device))]


def geglu_small_inputs(device="cpu"):
    return [tuple(_pair((2, 3, 100), device)), tuple(_pair((1, 4, 1500), device))]


def geglu_backward_inputs(device="cuda"):
    return [(torch.randn(8, 2048, 11008, device=device, dtype=torch.bfloat16),) + tuple(_pair((8, 2048, 11008), device))]


def geglu_backward_small_inputs(device="cpu"):
    return [(torch.randn(2, 3, 100, device=device, dtype=torch.bfloat16),) + tuple(_pair((2, 3, 100), device))]
