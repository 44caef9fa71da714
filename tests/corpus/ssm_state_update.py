"""One decode step of a selective state-space layer: the recurrent state is updated in place and
the step's output written into `out`; the launcher returns nothing. The reference returns the
new output and state instead, and the task maps them with `outputs = ["out", "state"]`."""

import torch
import triton
import triton.language as tl


@triton.jit
def ssm_update_kernel(
    state_ptr,
    x_ptr,
    dt_ptr,
    A_ptr,
    B_ptr,
    C_ptr,
    D_ptr,
    out_ptr,
    nheads,
    dim,
    dstate,
    BLOCK_DSTATE: tl.constexpr,
    BLOCK_DIM: tl.constexpr,
):
    b = tl.program_id(0)
    h = tl.program_id(1)
    rows = tl.program_id(2) * BLOCK_DIM + tl.arange(0, BLOCK_DIM)
    cols = tl.arange(0, BLOCK_DSTATE)
    row_mask = rows < dim
    mask = row_mask[:, None] & (cols < dstate)[None, :]
    base = (b * nheads + h) * dim
    state_offs = (base + rows)[:, None] * dstate + cols[None, :]
    state = tl.load(state_ptr + state_offs, mask=mask, other=0.0)
    x = tl.load(x_ptr + base + rows, mask=row_mask, other=0.0).to(tl.float32)
    dt = tl.load(dt_ptr + b * nheads + h).to(tl.float32)
    dt = tl.where(dt > 20.0, dt, tl.log(1.0 + tl.exp(dt)))  # softplus
    a = tl.load(A_ptr + h)
    B = tl.load(B_ptr + b * dstate + cols, mask=cols < dstate, other=0.0).to(tl.float32)
    C = tl.load(C_ptr + b * dstate + cols, mask=cols < dstate, other=0.0).to(tl.float32)
    decay = tl.exp(a * dt)
    state = state * decay + (x * dt)[:, None] * B[None, :]
    tl.store(state_ptr + state_offs, state, mask=mask)
    skip = tl.load(D_ptr + h)
    y = tl.sum(state * C[None, :], axis=1) + skip * x
    tl.store(out_ptr + base + rows, y.to(out_ptr.dtype.element_ty), mask=row_mask)


def selective_state_update(state, x, dt, A, B, C, D, out):
    batch, nheads, dim = x.shape
    dstate = state.shape[-1]
    block = min(triton.next_power_of_2(dim), 64)
    grid = (batch, nheads, triton.cdiv(dim, block))
    ssm_update_kernel[grid](
        state,
        x,
        dt,
        A,
        B,
        C,
        D,
        out,
        nheads,
        dim,
        dstate,
        BLOCK_DSTATE=max(triton.next_power_of_2(dstate), 16),
        BLOCK_DIM=block,
        num_warps=4,
    )


def selective_state_update_ref(state, x, dt, A, B, C, D, out):
    dt = torch.nn.functional.softplus(dt.float())[..., None, None]  # [batch, heads, 1, 1]
    decay = torch.exp(A[None, :, None, None] * dt)
    new_state = state * decay + (x.float()[..., None] * dt) * B.float()[:, None, None, :]
    y = (new_state * C.float()[:, None, None, :]).sum(-1) + D[None, :, None] * x.float()
    return y.to(out.dtype), new_state


def _case(batch, nheads, dim, dstate, device, dtype):
    return (
        torch.randn(batch, nheads, dim, dstate, device=device, dtype=torch.float32),
        torch.randn(batch, nheads, dim, device=device, dtype=dtype),
        torch.randn(batch, nheads, device=device, dtype=dtype),
        -torch.rand(nheads, device=device, dtype=torch.float32) - 0.5,
        torch.randn(batch, dstate, device=device, dtype=dtype),
        torch.randn(batch, dstate, device=device, dtype=dtype),
        torch.randn(nheads, device=device, dtype=torch.float32),
        torch.empty(batch, nheads, dim, device=device, dtype=dtype),
    )


def selective_state_update_inputs(device="cuda"):
    # Decode batches of a 2.7B-parameter state-space model (80 heads of 64, state size 128).
    return [
        _case(1, 80, 64, 128, device, torch.bfloat16),
        _case(64, 80, 64, 128, device, torch.bfloat16),
    ]


def selective_state_update_small_inputs(device="cpu"):
    return [_case(2, 3, 10, 16, device, torch.float16), _case(1, 2, 33, 8, device, torch.float16)]
