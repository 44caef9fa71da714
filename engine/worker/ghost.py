"""Ghost replay: the candidate's call with its Triton kernels not run (worker only).

"Some PyTorch op ran" is not "the kernels computed the result": a launcher can compute the
answer in PyTorch inside a `@triton.heuristics` lambda, an autotune `pre_hook` or a prune
function (code that runs around a launch, where the audit is suspended), then launch a kernel
that writes nothing. After the smoke stage passes, the judge has the runner call the entry once
more on the first smoke case with every compiled (or interpreted) kernel's execution skipped
(`JITFunction.run` answers without launching, while the launcher, its hooks, heuristics and
autotuner all run as written); if every result comes back bit for bit as in the real call, the
kernels computed nothing of it: `kernels-unused`. Applied where the original's own ghost call
changes its results (it always does when its kernels write them), as in KernelGenBench's ghost
replay.
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
            if _depth > 0:
                return None  # the kernel is not run: its outputs keep what they held
            return _real(self, *args, **kwargs)

        cls.run = run
    _installed = True


@contextlib.contextmanager
def kernels_skipped():
    """Within: no Triton kernel executes (launchers, hooks and heuristics still run)."""
    global _depth
    install()
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1


def check(original: Callable[[bool], object], candidate: Callable[[bool], object]) -> None:
    """Raise `kernels-unused` when the candidate's results (`candidate(skipped)`) are the same
    bit for bit with its kernels skipped, where the original's (`original(skipped)`) are not."""
    if bitwise_equal(original(False), original(True)):
        return  # the original's kernels write none of its results: nothing to hold it to
    if bitwise_equal(candidate(False), candidate(True)):
        raise HarnessFailure(
            "kernels-unused",
            "with its Triton kernels skipped, the candidate returns the same results bit for "
            "bit: something other than its kernels (code around the launch: a heuristic, a "
            "hook, the launcher) computes them",
        )
