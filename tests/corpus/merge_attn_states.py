"""Merging two partial attention results (a prefix and a suffix pass over the KV cache) by their
log-sum-exp: the launcher returns nothing and writes `output` and `output_lse`, which the caller
allocated; the reference writes its own copies of them the same way."""

import torch
import triton
import triton.language as tl


@triton.jit
def merge_attn_states_kernel(
    output,
    output_lse,
    prefix_output,
    prefix_lse,
    suffix_output,
    suffix_lse,
    num_tokens,
    num_heads,
    head_size,
    BLOCK_D: tl.constexpr,
):
    token = tl.program_id(0)
    head = tl.program_id(1)
    p_lse = tl.load(prefix_lse + head * num_tokens + token)
    s_lse = tl.load(suffix_lse + head * num_tokens + token)
    # An empty pass (inf lse) contributes nothing.
    p_lse = tl.where(p_lse == float("inf"), float("-inf"), p_lse)
    s_lse = tl.where(s_lse == float("inf"), float("-inf"), s_lse)
    top = tl.maximum(p_lse, s_lse)
    p_w = tl.exp(p_lse - top)
    s_w = tl.exp(s_lse - top)
    total = p_w + s_w
    tl.store(output_lse + head * num_tokens + token, tl.log(total) + top)
    offs = tl.arange(0, BLOCK_D)
    mask = offs < head_size
    row = (token * num_heads + head) * head_size
    p = tl.load(prefix_output + row + offs, mask=mask, other=0.0).to(tl.float32)
    s = tl.load(suffix_output + row + offs, mask=mask, other=0.0).to(tl.float32)
    merged = p * (p_w / total) + s * (s_w / total)
    tl.store(output + row + offs, merged.to(output.dtype.element_ty), mask=mask)


def merge_attn_states(output, output_lse, prefix_output, prefix_lse, suffix_output, suffix_lse):
    num_tokens, num_heads, head_size = output.shape
    merge_attn_states_kernel[(num_tokens, num_heads)](
        output,
        output_lse,
        prefix_output,
        prefix_lse,
        suffix_output,
        suffix_lse,
        num_tokens,
        num_heads,
        head_size,
        BLOCK_D=triton.next_power_of_2(head_size),
    )


def merge_attn_states_ref(output, output_lse, prefix_output, prefix_lse, suffix_output, suffix_lse):
    p_lse = prefix_lse.masked_fill(prefix_lse == float("inf"), float("-inf"))
    s_lse = suffix_lse.masked_fill(suffix_lse == float("inf"), float("-inf"))
    lse = torch.logaddexp(p_lse, s_lse)  # [heads, tokens]
    p_w = torch.exp(p_lse - lse).transpose(0, 1).unsqueeze(-1)
    s_w = torch.exp(s_lse - lse).transpose(0, 1).unsqueeze(-1)
    merged = prefix_output.float() * p_w + suffix_output.float() * s_w
    output.copy_(merged.to(output.dtype))
    output_lse.copy_(lse)


def _case(tokens, heads, head_size, device, dtype):
    def part():
        return torch.randn(tokens, heads, head_size, device=device, dtype=dtype)

    def lse():
        return torch.randn(heads, tokens, device=device, dtype=torch.float32) * 4

    return (
        torch.empty(tokens, heads, head_size, device=device, dtype=dtype),
        torch.empty(heads, tokens, device=device, dtype=torch.float32),
        part(),
        lse(),
        part(),
        lse(),
    )


def merge_attn_states_inputs(device="cuda"):
    # A decode batch of a 32-head, 128-wide model and a long prefill.
    return [
        _case(256, 32, 128, device, torch.bfloat16),
        _case(16384, 32, 128, device, torch.bfloat16),
    ]


def merge_attn_states_small_inputs(device="cpu"):
    return [_case(5, 3, 40, device, torch.float16), _case(2, 4, 64, device, torch.float16)]
