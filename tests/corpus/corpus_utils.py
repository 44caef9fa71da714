"""Launch helpers shared by several corpus kernels, imported the way projects import theirs
(`from corpus_utils import calculate_settings`): the launch settings come from another module."""

import triton

MAX_FUSED_SIZE = 65536


def calculate_settings(n):
    """(BLOCK_SIZE, num_warps) for a row of `n` elements held in one block."""
    block = triton.next_power_of_2(n)
    if block > MAX_FUSED_SIZE:
        raise RuntimeError(f"a row of {n} elements does not fit one block of {MAX_FUSED_SIZE}")
    warps = 4
    if block >= 32768:
        warps = 32
    elif block >= 8192:
        warps = 16
    elif block >= 2048:
        warps = 8
    return block, warps
