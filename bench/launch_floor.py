"""The least time one Triton launch takes when timed as the suite times everything
(`timing.measure`: CUDA graph replays for short functions): an empty kernel, one program.

A latency-bound case whose best variant runs within `run_suite.LAUNCH_BOUND` of this floor has
nothing left in the kernel to speed up; what separates it from torch.compile there is the launch,
not the code (the suite's table says so for that case).
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _empty_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass


def launch_floor_us(median_us) -> float:
    """`median_us(fn)`: the suite's timer. One program of an empty kernel, launched through the
    JIT as a first draft's launcher does."""
    import torch

    x = torch.empty(16, device="cuda")

    def launch():
        _empty_kernel[(1,)](x, 16, BLOCK=16)

    launch()  # compiled before it is timed
    torch.cuda.synchronize()
    return median_us(launch)
