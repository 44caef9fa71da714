"""Launch settings shared by the package's kernels."""

import triton


def rope_block(head_dim: int) -> int:
    return triton.next_power_of_2(head_dim // 2)
