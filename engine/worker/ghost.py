"""Ghost replay: the candidate's call with its Triton kernels not run (worker only).

"Some PyTorch op ran" is not "the kernels computed the result": a launcher can compute the
answer in PyTorch inside a `@triton.heuristics` lambda, an autotune `pre_hook` or a prune
function (code that runs around a launch, where the audit is suspended), then launch a kernel
that writes nothing. After the smoke stage passes, the judge has the runner call the entry once
more on the first smoke case with every compiled (or interpreted) kernel's execution skipped
(`JITFunction.run` and a compiled kernel's own launch answer without launching, while the
launcher, its hooks, heuristics and autotuner all run as written; `warmup`, which compiles and
launches nothing, still compiles); if every result comes back bit for bit as in the real call, the
kernels computed nothing of it: `kernels-unused`. Applied where the original's own ghost call
changes its results (it always does when its kernels write them), as in KernelGenBench's ghost
replay.

A ghost call's allocations come from a memory pool of their own (on a GPU): PyTorch's caching
allocator would otherwise hand an output the launcher creates (`torch.empty`, inside a custom op
where the audit's poisoning does not reach) the very block the real call's output just freed,
still holding its results, and an honest kernel would look unused.
"""

from __future__ import annotations

import contextlib
from typing import Callable

from .compare import bitwise_equal
from .failures import HarnessFailure

_depth = 0  # ghost calls in progress (the patched runs check it)
_installed = False


def install() -> None:
    """Wrap Triton's `run` once; a runner does it as it starts, before any candidate is imported,
    so its tamper watch (`tamper.py`) records the wrapped `run` as the process's own."""
    global _installed
    if _installed:
        return
    from triton.runtime.jit import JITFunction

    targets = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction

        targets.append(InterpretedFunction)
    except ImportError:  # a Triton without the interpreter
        pass
    for cls in targets:
        real = cls.run

        def run(self, *args, _real=real, **kwargs):
            if _depth > 0 and not kwargs.get("warmup"):
                return None  # the kernel is not run: its outputs keep what they held
            return _real(self, *args, **kwargs)

        cls.run = run
    _skip_compiled_launches()
    _installed = True


def _skip_compiled_launches() -> None:
    """`compiled[grid](...)` (a kernel compiled by `warmup` or `compile`, launched by the
    launcher itself) launches through `CompiledKernel`, not `JITFunction.run`."""
    from triton.compiler.compiler import CompiledKernel

    real = CompiledKernel.__getitem__

    def __getitem__(self, grid, _real=real):
        launch = _real(self, grid)

        def runner(*args, **kwargs):
            if _depth > 0:
                return None
            return launch(*args, **kwargs)

        return runner

    CompiledKernel.__getitem__ = __getitem__


def _own_memory():
    """A memory pool for the ghost call's allocations (GPU), so none reuses a block that holds
    the real call's results; nothing elsewhere."""
    import torch

    if not torch.cuda.is_initialized() or not hasattr(torch.cuda, "use_mem_pool"):
        return contextlib.nullcontext()
    return torch.cuda.use_mem_pool(torch.cuda.MemPool())


@contextlib.contextmanager
def kernels_skipped():
    """Within: no Triton kernel executes (launchers, hooks and heuristics still run)."""
    global _depth
    install()
    _depth += 1
    try:
        with _own_memory():
            yield
    finally:
        _depth -= 1


def check(original: Callable[[bool], object], candidate: Callable[[bool], object]) -> None:
    """Raise `kernels-unused` when the candidate's results (`candidate(skipped)`) are the same
    bit for bit with its kernels skipped, where the original's (`original(skipped)`) are not."""
    real = original(False)
    try:
        ghost = original(True)
    except Exception:  # its launcher needs what its kernels computed: nothing to hold it to
        return
    if bitwise_equal(real, ghost):
        return  # the original's kernels write none of its results: nothing to hold it to
    real = candidate(False)
    try:
        ghost = candidate(True)
    except HarnessFailure as f:  # its launcher reads what its kernels computed: they compute
        if f.reason == "exception":
            return
        raise
    if bitwise_equal(real, ghost):
        raise HarnessFailure(
            "kernels-unused",
            "with its Triton kernels skipped, the candidate returns the same results bit for "
            "bit: something other than its kernels (code around the launch: a heuristic, a "
            "hook, the launcher) computes them",
        )
