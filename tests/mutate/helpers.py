"""Kernels and helpers the mutator tests share."""

from __future__ import annotations

import textwrap

from kernelbrain.engine.mutate import MutationContext, load_mutators
from kernelbrain.engine.task import find_task
from kernelbrain.engine.task.spec import Task

from ..conftest import EXAMPLES

MUTATORS = load_mutators()


# mutator -> the example it must produce a verified variant on ("example after mutator": on the
# first proposal of another mutator, for a rewrite that applies to what that one makes)
SHOWCASE = {
    "config": "gelu",
    "launcher-cleanup": "matmul",
    "single-pass": "rmsnorm",
    "online-softmax": "cross_entropy",
    "grouped-order": "matmul",
    "hints": "softmax",
    "autotune": "gelu",
    "autotune-space": "gelu after autotune",
    "int64-offsets": "softmax",
    "coarsen-atomics": "col_sum",
    "own-columns": "col_sum",
    "loop-stages": "cross_entropy",
    "host-sync": "cross_entropy",
    "overlap-checks": "cross_entropy after host-sync",
    "exp2": "cross_entropy after online-softmax",
    "unmasked-interior": "softmax after hints",
    "coarsen-programs": "softmax",
}


def example(op: str) -> tuple[Task, str]:
    task = find_task(EXAMPLES / "ops" / f"{op}.py", f"{op}_kernel")
    return task, open(task.file).read()


def propose(name: str, task: Task, source: str):
    return list(MUTATORS[name].propose(MutationContext(task, source)))


LAUNCHER_CONSTANT = """import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


def add(x):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 1024
    grid = (triton.cdiv(n, BLOCK),)
    add_kernel[grid](x, out, n, BLOCK=BLOCK)
    return out


def add_ref(x):
    return x + 1


def add_inputs(device="cuda"):
    return [(torch.randn(1 << 20, device=device),)]


def add_small_inputs(device="cpu"):
    return [(torch.randn(3000, device=device),)]
"""


SUITE = EXAMPLES.parent / "bench" / "suite"


def suite_matmul() -> tuple[Task, str]:
    task = find_task(SUITE / "matmul_bf16.py", "matmul_bf16_kernel")
    return task, open(task.file).read()


BLOCK_SUM = textwrap.dedent("""
    import torch, triton
    import triton.language as tl

    @triton.jit
    def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        partial = tl.sum(x.to(tl.float32), axis=0)
        tl.atomic_add(out_ptr, partial)

    def run(x):
        out = torch.zeros(1, dtype=torch.float32, device=x.device)
        k[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
        return out
""")
