"""Attention forward (non-causal, softmax(q kᵀ / √d) v) for short sequences — a first draft:
16×16 tiles, online softmax in fp32, one program per (query block, batch × head)."""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def attention_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, seq_len, head_dim, scale, D: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):  # fmt: skip
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    base = bh.to(tl.int64) * seq_len * head_dim
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, D)
    d_mask = rd[None, :] < head_dim
    q = tl.load(q_ptr + base + rm[:, None] * head_dim + rd[None, :],
                mask=(rm[:, None] < seq_len) & d_mask, other=0.0)  # fmt: skip
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start in range(0, seq_len, BLOCK_N):
        rn = start + tl.arange(0, BLOCK_N)
        kv_mask = (rn[:, None] < seq_len) & d_mask
        k = tl.load(k_ptr + base + rn[:, None] * head_dim + rd[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        s = tl.where(rn[None, :] < seq_len, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + rn[:, None] * head_dim + rd[None, :], mask=kv_mask, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + base + rm[:, None] * head_dim + rd[None, :], out.to(o_ptr.dtype.element_ty),
             mask=(rm[:, None] < seq_len) & d_mask)  # fmt: skip


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """q, k, v: [batch, heads, seq, head_dim], contiguous."""
    batch, heads, seq, head_dim = q.shape
    o = torch.empty_like(q)
    grid = (triton.cdiv(seq, 16), batch * heads)
    attention_fwd_kernel[grid](q, k, v, o, seq, head_dim, 1.0 / math.sqrt(head_dim),
                               D=max(16, triton.next_power_of_2(head_dim)), BLOCK_M=16,
                               BLOCK_N=16)  # fmt: skip
    return o


def attention_ref(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    scale = 1.0 / math.sqrt(q.shape[-1])
    p = torch.softmax((q.float() @ k.float().transpose(-1, -2)) * scale, dim=-1)
    return (p @ v.float()).to(q.dtype)


def attention_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """What PyTorch runs for this in bf16 (flash attention): the benchmark's baseline, since the
    reference computes in fp32."""
    return torch.nn.functional.scaled_dot_product_attention(q, k, v)


def _qkv(b, h, s, d, device):
    return tuple(torch.randn(b, h, s, d, device=device, dtype=torch.bfloat16) for _ in range(3))


def attention_inputs(device="cuda"):
    shapes = [(4, 16, 1024, 64), (8, 12, 1000, 64), (2, 16, 512, 128), (1, 4, 128, 64)]
    torch.manual_seed(0)
    return [_qkv(*s, device) for s in shapes]


def attention_small_inputs(device="cpu"):
    return [_qkv(1, 2, 40, 16, device), _qkv(2, 1, 17, 32, device)]
