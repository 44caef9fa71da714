"""What the original does, that a candidate may then do too.

A candidate may compute with PyTorch outside its kernels, return without launching a Triton
kernel, change its input arguments or return an argument's storage only where the original
does the same. What the original does can depend on the case (a branch on the size, an early
return), so before a candidate is blamed the original runs on that very case as well.
"""

from __future__ import annotations

from typing import Callable

import torch

from .compare import bitwise_equal
from .failures import HarnessFailure
from .runs import Run


class OriginalBehaviour:
    """The original's outputs and habits, learnt by running it (`run_original`, in the judge)."""

    def __init__(self, run_original: Callable[[tuple], Run]):
        self.run_original = run_original
        self.outputs: dict[tuple, object] = {}  # input dtypes -> the original's output
        self.ops: set[str] = set()  # PyTorch compute ops of the original's calls
        self.launches = 0  # most Triton launches of one original call
        self.mutates = False  # the original changed an argument on some case
        self.aliases = False  # the original returned an argument's storage
        self.extra_ops: set[str] = set()  # PyTorch ops candidates ran that the original does not

    def baseline(self, args):
        """The original's output for inputs of these dtypes (a candidate must return the same
        dtypes; small and full cases may differ, e.g. fp16 vs bf16), learning on the way what
        the original does."""
        key = tuple(str(a.dtype) for a in args if isinstance(a, torch.Tensor))
        if key not in self.outputs:
            run = self.run_original(args)
            self.outputs[key] = run.output
            self.ops |= run.ops
            self.launches = max(self.launches, run.launches)
            self.mutates |= not bitwise_equal(args, run.args_after)
            self.aliases |= bool(run.aliases)
        return self.outputs[key]

    def check(self, desc: str, args, run: Run) -> None:
        """Raise the candidate's misbehaviour on this case, if the original does not behave so
        either, here or on the cases seen before."""
        seen = (self.ops, self.launches > 0, self.mutates, self.aliases)
        if misbehaviour(desc, args, run, *seen) is None:
            return
        here = self.run_original(args)
        problem = misbehaviour(
            desc,
            args,
            run,
            seen[0] | here.ops,
            here.launches > 0,
            seen[2] or not bitwise_equal(args, here.args_after),
            seen[3] or bool(here.aliases),
        )
        if problem is not None:
            if problem.reason == "torch-fallback":
                self.extra_ops |= run.ops - seen[0] - here.ops
            raise problem


def misbehaviour(
    desc: str, args, run: Run, ops: set[str], launches: bool, mutates: bool, aliases: bool
) -> HarnessFailure | None:
    """What `run` does that an original with these habits does not, as the failure to report."""
    extra = run.ops - ops
    if extra:
        return HarnessFailure(
            "torch-fallback",
            f"on {desc}: the candidate computes with PyTorch "
            f"({', '.join(sorted('aten.' + o for o in extra))}) instead of its "
            "Triton kernels",
        )
    if run.launches == 0 and launches:
        return HarnessFailure(
            "no-triton-launch",
            f"on {desc}: the candidate returned a result without launching any Triton "
            "kernel (the original launches one)",
        )
    if not mutates and not bitwise_equal(args, run.args_after):
        return HarnessFailure(
            "mutated-input",
            f"on {desc}: the candidate changed its input arguments (the original leaves "
            "them as they were): the caller's tensors would be destroyed",
        )
    if run.aliases and not aliases:
        return HarnessFailure(
            "aliased-output",
            f"on {desc}: output {run.aliases[0]} shares storage with an input argument "
            "(the original returns fresh tensors)",
        )
    return None
