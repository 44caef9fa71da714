"""A task's callables, imported inside a worker: the original's entry, the candidate's (never in
the judge), the reference and the input functions; KernelBench tasks as their models."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from ..protocol import RunHarness
from .cases import to_device
from .failures import HarnessFailure, classify_exception
from .loader import ModuleLoader


@dataclass
class TaskModules:
    original: object  # the original module
    candidate: object | None  # the candidate's module; None in the judge, which never imports it
    reference: Callable
    entry: Callable | None  # the candidate's entry (the original's when checking the original)
    original_entry: Callable
    inputs_fn: Callable
    small_fn: Callable | None


def load_modules(req: RunHarness, device: str, loader: ModuleLoader, judging: bool) -> TaskModules:
    """Import what a harness run needs; a module that fails to import is the harness's fault
    (the original, the reference, the inputs) or the candidate's (`load-error`)."""
    t = req.task
    roots = [t.root or "", str(Path(t.file).parent)]
    original_source = Path(t.file).read_text(encoding="utf-8")
    try:
        original = loader.load(original_source, t.file, roots)
    except Exception as exc:
        raise HarnessFailure(
            "harness-error",
            f"the original module failed to import: {type(exc).__name__}: {exc}",
        ) from exc
    if req.candidate is None:
        candidate = original
    elif judging:
        candidate = None  # never imported by the judge
    else:
        try:
            candidate = loader.load(req.candidate, t.file, roots)
        except Exception as exc:
            reason, _ = classify_exception(exc)
            raise HarnessFailure(
                "load-error" if reason == "exception" else reason,
                f"candidate failed to import: {type(exc).__name__}: {exc}",
            ) from exc
    ref_module = (
        original
        if t.reference_module == t.file
        else loader.load(
            Path(t.reference_module).read_text(encoding="utf-8"), t.reference_module, roots
        )
    )

    def function(ref: str):
        path, name = ref.rsplit(":", 1)
        module = (
            original
            if path == t.file
            else loader.load(Path(path).read_text(encoding="utf-8"), path, roots)
        )
        return getattr(module, name)

    inputs_fn = function(t.inputs)
    small_fn = function(t.small_inputs) if t.small_inputs else None
    if t.kind == "kernelbench":
        return _kernelbench(original, candidate, inputs_fn, small_fn, device)
    return TaskModules(
        original,
        candidate,
        getattr(ref_module, t.reference),
        getattr(candidate, t.entry) if candidate else None,
        getattr(original, t.entry),
        inputs_fn,
        small_fn,
    )


def _kernelbench(original, candidate, inputs_fn, small_fn, device: str) -> TaskModules:
    """A KernelBench task: `Model` is the reference, `ModelNew` the entry, each built with the
    same weights; `get_inputs` gives one case."""
    init = to_device(list(original.get_init_inputs()), device)
    models = []
    for module, cls in ((original, "Model"), (original, "ModelNew"), (candidate, "ModelNew")):
        if module is None:  # the judge: the candidate's model lives in the runner
            models.append(None)
            continue
        torch.manual_seed(1234)  # identical weights, as KernelBench builds them
        models.append(getattr(module, cls)(*init).to(device).eval())
    ref, orig, cand = models
    return TaskModules(
        original,
        candidate,
        ref,
        cand,
        orig,
        lambda device="cpu": [tuple(inputs_fn())],
        small_fn,
    )
