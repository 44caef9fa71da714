"""The inputs a harness checks: drawn from the task's `inputs` and `small_inputs` with a seed of
their own for every stage (fresh inputs each stage), and the block sizes the sweep probes around."""

from __future__ import annotations

import hashlib
import inspect
from typing import Callable

import torch

from ..index import parse_module
from ..task.spec import Task
from .audit import AuditMode
from .failures import HarnessFailure, classify_exception, site

# The CPU interpreter runs ~1 s per 1,024 programs: above this many input elements a case is
# too slow for it, and the task must provide small_inputs.
INTERPRETER_MAX_ELEMENTS = 1 << 22


def accepts_device(fn: Callable) -> bool:
    try:
        return "device" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def to_device(x, device: str):
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, (list, tuple)):
        return type(x)(to_device(i, device) for i in x)
    return x


def numel(args) -> int:
    return sum(a.numel() for a in args if isinstance(a, torch.Tensor))


def stage_seed(seed: int, stage: str) -> int:
    return int(hashlib.sha256(f"{seed}:{stage}".encode()).hexdigest()[:8], 16)


class CaseSource:
    """A task's argument tuples on one device: `inputs` (the benchmark cases) and `small_inputs`
    (tiny ones for the smoke stage and the CPU interpreter), each drawn under a stage's seed."""

    def __init__(
        self,
        task: Task,
        inputs_fn: Callable,
        small_fn: Callable | None,
        device: str,
        seed: int,
        source: str,
        interpreter: bool,
    ):
        """`source`: the module whose launches say which block sizes the sweep probes around."""
        self.task, self.inputs_fn, self.small_fn = task, inputs_fn, small_fn
        self.device, self.seed, self.source, self.interpreter = device, seed, source, interpreter

    def draw(self, fn: Callable, seed: int, what: str, device: str | None = None) -> list[tuple]:
        device = device or self.device
        torch.manual_seed(seed)
        try:
            # Uninitialised buffers (an `out` from `torch.empty`) hold the audit's NaN: a write
            # into one always shows, and one never made is named as such. Left as they come,
            # they may hold an earlier run's answer in memory the allocator hands out again.
            with AuditMode():
                cases = fn(device=device) if accepts_device(fn) else fn()
        except Exception as exc:
            reason, _ = classify_exception(exc)
            raise HarnessFailure(
                "harness-incomplete" if reason == "harness-incomplete" else "harness-error",
                f"{what} raised {type(exc).__name__}: {exc}{site(exc)}",
            ) from exc
        if not isinstance(cases, (list, tuple)) or not cases:
            raise HarnessFailure(
                "harness-error",
                f"{what} must return a non-empty list of argument tuples, "
                f"got {type(cases).__name__}",
            )
        out = []
        for i, c in enumerate(cases):
            if not isinstance(c, (tuple, list)):
                raise HarnessFailure(
                    "harness-error",
                    f"{what}[{i}] is a {type(c).__name__}, not a tuple of arguments",
                )
            if not any(isinstance(a, torch.Tensor) for a in c):
                raise HarnessFailure("harness-error", f"{what}[{i}] has no tensor argument")
            out.append(tuple(to_device(list(c), device)))
        return out

    def small(self, stage: str) -> list[tuple]:
        seed = stage_seed(self.seed, stage)
        if self.small_fn is not None:
            return self.draw(self.small_fn, seed, "small_inputs")
        cases = self.draw(self.inputs_fn, seed, "inputs")
        if self.interpreter and max(numel(c) for c in cases) > INTERPRETER_MAX_ELEMENTS:
            raise HarnessFailure(
                "harness-incomplete",
                "the CPU interpreter needs `small_inputs` (tiny cases): "
                "the benchmark inputs are too large to interpret",
            )
        return cases

    def full(self, stage: str, device: str | None = None) -> list[tuple]:
        return self.draw(self.inputs_fn, stage_seed(self.seed, stage), "inputs", device)

    def block_sizes(self) -> list[int]:
        kernel = parse_module(self.source).index.kernel(self.task.kernel)
        blocks: set[int] = set()
        if kernel is not None:
            for site in kernel.launch_sites:
                for name, value in site.kwargs.items():
                    if name in kernel.constexprs and value.isdigit():
                        blocks.add(int(value))
            for cfg in kernel.autotune_configs:
                blocks |= {
                    v
                    for v in cfg.kwargs.values()
                    if isinstance(v, int) and not isinstance(v, bool) and v > 1
                }
        return sorted(blocks)
