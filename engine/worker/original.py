"""What the original does, that a candidate may then do too.

A candidate may compute with PyTorch outside its kernels, return without launching a Triton
kernel, change an argument or return an argument's storage only where the original does the
same. The arguments the original changes are its results (`results.py`): the judge compares
them, in the candidate's calls, with the reference's. What the original does can depend on the case (a branch on the size, an early
return), so before a candidate is blamed the original runs on that very case as well.
"""

from __future__ import annotations

from typing import Callable

import torch

from .failures import HarnessFailure
from .results import changed, returned_arguments
from .runs import Run


class OriginalBehaviour:
    """The original's outputs and habits, learnt by running it (`run_original`, in the judge)."""

    def __init__(self, run_original: Callable[[tuple], Run]):
        self.run_original = run_original
        self.runs: dict[tuple, Run] = {}  # input dtypes -> the original's run
        self.ops: set[str] = set()  # PyTorch compute ops of the original's calls
        self.launches = 0  # most Triton launches of one original call
        self.writes: set[int] = set()  # arguments the original changed on some case
        self.returned: dict[int, str] = {}  # argument -> where the original returns its storage
        self.rebinds: set[int] = set()  # arguments the original points at other memory
        self.keeps = False  # the original returns memory it keeps between calls
        self.extra_ops: set[str] = set()  # PyTorch ops candidates ran that the original does not

    @property
    def aliases(self) -> bool:
        """Whether the original returned an argument's storage."""
        return bool(self.returned)

    def learn(self, args, run: Run) -> Run:
        """Note what the original did in `run`, a call on `args`."""
        self.ops |= run.ops
        self.launches = max(self.launches, run.launches)
        self.writes |= changed(args, run.args_after)
        self.rebinds |= set(run.rebound)
        self.keeps = self.keeps or bool(run.kept)
        for i, path in returned_arguments(run.output, run.args_after).items():
            self.returned.setdefault(i, path)
        return run

    def baseline(self, args) -> Run:
        """The original's run for inputs of these dtypes (a candidate must return the same
        dtypes; small and full cases may differ, e.g. fp16 vs bf16), learning on the way what
        the original does."""
        key = tuple(str(a.dtype) for a in args if isinstance(a, torch.Tensor))
        if key not in self.runs:
            self.runs[key] = self.learn(args, self.run_original(args))
        return self.runs[key]

    def check(self, desc: str, args, run: Run) -> None:
        """Raise the candidate's misbehaviour on this case, if the original does not behave so
        either, here or on the cases seen before."""
        seen_ops = set(self.ops)
        seen = (seen_ops, self.launches > 0, self.writes, self.aliases, self.rebinds, self.keeps)
        if misbehaviour(desc, args, run, *seen) is None:
            return
        here = self.run_original(args)
        problem = misbehaviour(
            desc,
            args,
            run,
            seen_ops | here.ops,
            here.launches > 0,
            self.writes | changed(args, here.args_after),
            self.aliases or bool(here.aliases),
            self.rebinds | set(here.rebound),
            self.keeps or bool(here.kept),
        )
        self.learn(args, here)
        if problem is not None:
            if problem.reason == "torch-fallback":
                self.extra_ops |= run.ops - seen_ops - here.ops
            raise problem


def misbehaviour(
    desc: str,
    args,
    run: Run,
    ops: set[str],
    launches: bool,
    writes: set[int],
    aliases: bool,
    rebinds: set[int] = frozenset(),
    keeps: bool = False,
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
    rebound = sorted(set(run.rebound) - rebinds)
    if rebound:
        return HarnessFailure(
            "rebound-argument",
            f"on {desc}: the candidate pointed argument {rebound[0]} at other memory or "
            "reshaped it in place (`set_`, `resize_`, `.data =`): the caller's tensor never "
            "holds what the argument object reads afterwards",
        )
    written = sorted(changed(args, run.args_after) - writes)
    if written:
        return HarnessFailure(
            "mutated-input",
            f"on {desc}: the candidate changed its input argument {written[0]} (the original "
            "leaves it as it was): the caller's tensors would be destroyed",
        )
    if run.kept and not keeps:
        return HarnessFailure(
            "stateful",
            f"on {desc}: output {run.kept[0]} is memory the candidate kept from before the call "
            "(a memo or a pool of output buffers; the original returns what each call "
            "creates): a later call would overwrite it, or serve it stale",
        )
    if run.aliases and not aliases:
        return HarnessFailure(
            "aliased-output",
            f"on {desc}: output {run.aliases[0]} shares storage with an input argument "
            "(the original returns fresh tensors)",
        )
    return None
