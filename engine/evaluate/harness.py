"""The correctness harness, run inside an evaluation worker (imports torch).

Five stages, all must pass (brief §4): smoke (tiny cases, stop at the first failure), shape
sweep (every case plus odd sizes around block boundaries), numerical stability (large, small,
mixed magnitudes, -inf; looser tolerance), determinism (three bitwise-equal runs unless the
original is not deterministic either) and edge cases (strided inputs and size-1 dimensions where
the original accepts them). Each stage draws fresh inputs from its own seed. The candidate runs
under `AuditMode` (NaN-poisoned allocations, PyTorch compute recorded) and is compared with the
reference and, where the reference and the original disagree, with the original kernel.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Callable

import torch

from ..index import parse_module
from ..task.scaffold import STUB_MARK
from ..task.spec import Task
from . import shapes
from .audit import AuditMode
from .autotune_choice import AutotuneChoice
from .compare import bitwise_equal, compare
from .jit_clock import CLOCK
from .messages import CaseResult, HarnessResult, RunHarness, StageResult

# The CPU interpreter runs ~1 s per 1,024 programs: above this many input elements a case is
# too slow for it, and the task must provide small_inputs.
INTERPRETER_MAX_ELEMENTS = 1 << 22
STABILITY_KINDS = ("large", "small", "mixed", "neg-inf")
STABILITY_SCALE = 10.0  # tolerance multiplier for the stability stage


class HarnessFailure(Exception):
    def __init__(self, reason: str, message: str, case: CaseResult | None = None):
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.case = case


class FatalDeviceError(HarnessFailure):
    """The device context is unusable (e.g. illegal memory access): the worker must restart."""


def classify_exception(exc: BaseException) -> tuple[str, bool]:
    """(reason, fatal) for an exception raised by user or candidate code."""
    text = f"{type(exc).__name__}: {exc}"
    if STUB_MARK in text:
        return "harness-incomplete", False
    if (
        isinstance(exc, torch.cuda.OutOfMemoryError)
        or "out of memory" in text.lower()
        or "can't allocate memory" in text
    ):
        return "out-of-memory", False
    if isinstance(exc, MemoryError):
        return "out-of-memory", False
    if "illegal memory access" in text or "illegal address" in text or "misaligned address" in text:
        return "illegal-memory-access", True
    if "CUDA error" in text or "unspecified launch failure" in text:
        return "cuda-error", True
    if type(exc).__name__ in ("CompilationError", "CompileTimeAssertionFailure"):
        return "compile-error", False
    return "exception", False


def _short_traceback(exc: BaseException, limit: int = 6) -> str:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return "".join(lines[-limit:]).strip()


class ModuleLoader:
    """Loads user and candidate modules in private namespaces.

    Candidates are written to a private folder first: Triton reads a kernel's source with
    `inspect`, which needs a file. Modules are cached by content hash.
    """

    def __init__(self) -> None:
        given = os.environ.get("KERNELBRAIN_WORKDIR")
        self.folder = Path(given) if given else Path(tempfile.mkdtemp(prefix="kb-worker-"))
        self._cache: dict[str, object] = {}

    def load(self, source: str, filename: str, roots: list[str]):
        key = hashlib.sha256((filename + "\0" + source).encode()).hexdigest()[:16]
        if key in self._cache:
            return self._cache[key]
        for root in roots:
            if root and root not in sys.path:
                sys.path.insert(0, root)
        name = f"kb_{Path(filename).stem}_{key}"
        path = Path(filename)
        if not path.is_file() or path.read_text(encoding="utf-8") != source:
            path = self.folder / f"{name}.py"
            path.write_text(source, encoding="utf-8")
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        self._cache[key] = module
        return module


def _accepts_device(fn: Callable) -> bool:
    try:
        return "device" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _to_device(x, device: str):
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, (list, tuple)):
        return type(x)(_to_device(i, device) for i in x)
    return x


def _numel(args) -> int:
    return sum(a.numel() for a in args if isinstance(a, torch.Tensor))


def stage_seed(seed: int, stage: str) -> int:
    return int(hashlib.sha256(f"{seed}:{stage}".encode()).hexdigest()[:8], 16)


class Harness:
    """One candidate (or the original) against its task, on one device."""

    def __init__(
        self,
        req: RunHarness,
        device: str,
        loader: ModuleLoader,
        progress: Callable[[str, str], None],
    ):
        self.req = req
        self.task: Task = req.task
        self.device = device
        self.loader = loader
        self.progress = progress
        self.interpreter = os.environ.get("TRITON_INTERPRET") == "1"
        self.cases: list[CaseResult] = []
        self.stage_results: list[StageResult] = []
        self.skipped = 0
        self._original_ops: set[str] | None = None
        self._original_outputs: dict[tuple, object] = {}  # input dtypes -> the original's output
        self.extra_ops: set[str] = set()
        self.choice = AutotuneChoice()  # entered while the stages run
        self._next_config = 0  # the interpreter's turn through a tuned kernel's configurations

    # -- loading ---------------------------------------------------------------------------
    def load(self) -> None:
        t = self.task
        roots = [t.root or "", str(Path(t.file).parent)]
        original_source = Path(t.file).read_text(encoding="utf-8")
        try:
            self.original = self.loader.load(original_source, t.file, roots)
        except Exception as exc:
            raise HarnessFailure(
                "harness-error",
                f"the original module failed to import: {type(exc).__name__}: {exc}",
            ) from exc
        if self.req.candidate is None:
            self.candidate = self.original
        else:
            try:
                self.candidate = self.loader.load(self.req.candidate, t.file, roots)
            except Exception as exc:
                reason, _ = classify_exception(exc)
                raise HarnessFailure(
                    "load-error" if reason == "exception" else reason,
                    f"candidate failed to import: {type(exc).__name__}: {exc}",
                ) from exc
        self.ref_module = (
            self.original
            if t.reference_module == t.file
            else self.loader.load(
                Path(t.reference_module).read_text(encoding="utf-8"), t.reference_module, roots
            )
        )
        self.inputs_fn = self._function(t.inputs, roots)
        self.small_fn = self._function(t.small_inputs, roots) if t.small_inputs else None
        if t.kind == "kernelbench":
            self._load_kernelbench()
        else:
            self.reference = getattr(self.ref_module, t.reference)
            self.entry = getattr(self.candidate, t.entry)
            self.original_entry = getattr(self.original, t.entry)

    def _function(self, ref: str, roots: list[str]):
        path, name = ref.rsplit(":", 1)
        module = (
            self.original
            if path == self.task.file
            else self.loader.load(Path(path).read_text(encoding="utf-8"), path, roots)
        )
        return getattr(module, name)

    def _load_kernelbench(self) -> None:
        init = _to_device(list(self.original.get_init_inputs()), self.device)
        models = []
        for module, cls in (
            (self.original, "Model"),
            (self.original, "ModelNew"),
            (self.candidate, "ModelNew"),
        ):
            torch.manual_seed(1234)  # identical weights, as KernelBench builds them
            models.append(getattr(module, cls)(*init).to(self.device).eval())
        ref, orig, cand = models
        self.reference, self.original_entry, self.entry = ref, orig, cand
        get_inputs = self.inputs_fn
        self.inputs_fn = lambda device="cpu": [tuple(get_inputs())]

    # -- inputs ----------------------------------------------------------------------------
    def _draw(self, fn: Callable, seed: int, what: str, device: str | None = None) -> list[tuple]:
        device = device or self.device
        torch.manual_seed(seed)
        try:
            cases = fn(device=device) if _accepts_device(fn) else fn()
        except Exception as exc:
            reason, _ = classify_exception(exc)
            raise HarnessFailure(
                "harness-incomplete" if reason == "harness-incomplete" else "harness-error",
                f"{what} raised {type(exc).__name__}: {exc}",
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
            out.append(tuple(_to_device(list(c), device)))
        return out

    def small_cases(self, stage: str) -> list[tuple]:
        seed = stage_seed(self.req.seed, stage)
        if self.small_fn is not None:
            return self._draw(self.small_fn, seed, "small_inputs")
        cases = self._draw(self.inputs_fn, seed, "inputs")
        if self.interpreter and max(_numel(c) for c in cases) > INTERPRETER_MAX_ELEMENTS:
            raise HarnessFailure(
                "harness-incomplete",
                "the CPU interpreter needs `small_inputs` (tiny cases): "
                "the benchmark inputs are too large to interpret",
            )
        return cases

    def full_cases(self, stage: str, device: str | None = None) -> list[tuple]:
        return self._draw(self.inputs_fn, stage_seed(self.req.seed, stage), "inputs", device)

    def block_sizes(self) -> list[int]:
        index = parse_module(
            self.req.candidate or Path(self.task.file).read_text(encoding="utf-8")
        ).index
        kernel = index.kernel(self.task.kernel)
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

    # -- running ---------------------------------------------------------------------------
    def _sync(self) -> None:
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()

    def _call(self, fn: Callable, args, who: str, audit: AuditMode | None = None):
        try:
            with torch.no_grad():
                if audit is not None:
                    with audit:
                        out = fn(*shapes.clone_args(args))
                else:
                    out = fn(*shapes.clone_args(args))
            self._sync()
            return out
        except Exception as exc:
            reason, fatal = classify_exception(exc)
            message = f"{who} raised {type(exc).__name__}: {exc}"
            if who == "candidate":
                cls = FatalDeviceError if fatal else HarnessFailure
                raise cls(reason, message + "\n" + _short_traceback(exc)) from exc
            if fatal:
                raise FatalDeviceError(reason, message) from exc
            raise HarnessFailure(
                "harness-incomplete" if reason == "harness-incomplete" else "harness-error", message
            ) from exc

    def run_candidate(self, args):
        audit = AuditMode()
        out = self._call(self.entry, args, "candidate", audit)
        return out, audit.compute_ops

    def original_baseline(self, args):
        """The original's PyTorch ops and its output for inputs of these dtypes (a candidate must
        return the same dtypes; small and full cases may differ, e.g. fp16 vs bf16)."""
        key = tuple(str(a.dtype) for a in args if isinstance(a, torch.Tensor))
        if key not in self._original_outputs:
            audit = AuditMode()
            self._original_outputs[key] = self._call(self.original_entry, args, "original", audit)
            self._original_ops = (self._original_ops or set()) | audit.compute_ops
        return self._original_outputs[key]

    def try_original(self, args):
        try:
            return self._call(self.original_entry, args, "original"), None
        except FatalDeviceError:
            raise
        except HarnessFailure as f:
            return None, f

    def check(
        self, stage: str, label: str, args, scale: float = 1.0, *, only_if_original_ok: bool = False
    ) -> None:
        """Run the candidate on one case; raise HarnessFailure when it is wrong."""
        desc = shapes.describe(args)
        original_out = self.original_baseline(args) if self.req.candidate is not None else None
        try:
            expected = self._call(self.reference, args, "reference")
        except HarnessFailure as f:
            if stage in ("stability", "edge") and f.reason == "harness-error":
                self.skipped += 1  # the reference itself does not take this variant
                return
            raise
        if only_if_original_ok:
            orig_out, orig_err = self.try_original(args)
            if (
                orig_err is not None
                or not compare(orig_out, expected, self.task.rtol, self.task.atol, scale).ok
            ):
                self.skipped += 1  # the original does not accept this variant either
                return
        for _ in self.configurations():
            self._check_one(stage, label, args, desc, expected, original_out, scale)

    def _check_one(
        self, stage: str, label: str, args, desc: str, expected, original_out, scale: float
    ) -> None:
        out, ops = self.run_candidate(args)
        config = self.choice.describe()
        if config:
            desc += f" with autotune config {config}"
        extra = ops - (self._original_ops or set()) if self.req.candidate is not None else set()
        if extra:
            self.extra_ops |= extra
            raise HarnessFailure(
                "torch-fallback",
                f"on {desc}: the candidate computes with PyTorch "
                f"({', '.join(sorted('aten.' + o for o in extra))}) instead of its "
                "Triton kernels",
            )
        result = compare(
            out, expected, self.task.rtol, self.task.atol, scale, check_dtype_of=original_out
        )
        note = ""
        if not result.ok and result.reason == "mismatch" and self.req.candidate is not None:
            # The bar is "no worse than the original": where the original deviates from the
            # reference too, the candidate must agree with the original instead.
            orig_out, orig_err = self.try_original(args)
            if (
                orig_err is None
                and not compare(orig_out, expected, self.task.rtol, self.task.atol, scale).ok
            ):
                vs_orig = compare(out, orig_out, self.task.rtol, self.task.atol, scale)
                if vs_orig.ok:
                    result, note = (
                        vs_orig,
                        " (matches the original, which deviates from the reference here too)",
                    )
        case = CaseResult(
            stage,
            f"{label}: {desc}",
            result.ok,
            result.reason,
            result.message + note,
            result.max_abs_err,
            result.max_rel_err,
            result.mismatched,
            result.elements,
        )
        self.cases.append(case)
        if not result.ok:
            raise HarnessFailure(
                result.reason or "mismatch",
                f"{stage} stage, {label} ({desc}): {result.message}",
                case,
            )

    def configurations(self):
        """One pass per `@triton.autotune` configuration to check on a case (`AutotuneChoice`): on
        a GPU every configuration the tuning keeps, one after another (cheap there); on the
        interpreter, which runs a kernel ~1 s per 1,024 programs, one per case, in turn, so that a
        stage's cases cover them. A kernel without tuning gets one pass."""
        if self.interpreter:
            self.choice.select(self._next_config)
            self._next_config += 1
            yield 0
            return
        want = 0
        while True:
            self.choice.select(want)
            yield want
            want += 1
            if want >= self.choice.widest:
                return

    # -- stages ----------------------------------------------------------------------------
    def stage_inputs(self, stage: str):
        """Every input a stage checks, lazily, as (label, args, check options). The stages run
        them; a dry run records what they would launch, so the search can compile their
        specialisations ahead of time on the CPU (`Specialize.stages`)."""
        if stage == "smoke":
            for i, args in enumerate(self.small_cases("smoke")):
                yield f"small case {i}", args, {}
        elif stage == "sweep":
            if self.req.full_cases:
                for i, args in enumerate(self.full_cases("sweep")):
                    yield f"case {i}", args, {}
            blocks = self.block_sizes()
            for i, args in enumerate(self.small_cases("sweep")):
                yield f"small case {i}", args, {}
                for label, variant in shapes.odd_sizes(
                    args, blocks, stage_seed(self.req.seed, f"sweep{i}")
                ):
                    yield f"small case {i} size {label}", variant, {}
        elif stage == "stability":
            for i, args in enumerate(self.small_cases("stability")[:2]):
                for kind in STABILITY_KINDS:
                    yield (
                        f"small case {i} {kind}",
                        shapes.scaled(args, kind, i),
                        {"scale": STABILITY_SCALE},
                    )
        elif stage == "determinism":
            yield (
                "3 runs",
                (
                    self.full_cases("determinism")
                    if self.req.full_cases
                    else self.small_cases("determinism")
                )[0],
                {},
            )
        elif stage == "edge":
            for i, args in enumerate(self.small_cases("edge")):
                variants = [
                    ("strided", shapes.non_contiguous(args)),
                    ("column-major", shapes.transposed(args)),
                ]
                variants += shapes.size_one(args, stage_seed(self.req.seed, f"edge{i}"))
                for label, variant in variants:
                    if variant is not None:
                        yield f"small case {i} {label}", variant, {"only_if_original_ok": True}
        else:
            raise ValueError(f"unknown stage {stage!r}")

    def _check_all(self, stage: str) -> int:
        n = 0
        for label, args, options in self.stage_inputs(stage):
            self.progress(stage, label)
            self.check(stage, label, args, **options)
            n += 1
        return n

    def stage_smoke(self) -> int:
        return self._check_all("smoke")

    def stage_sweep(self) -> int:
        return self._check_all("sweep")

    def stage_stability(self) -> int:
        return self._check_all("stability")

    def stage_determinism(self) -> int:
        [(_, args, _)] = self.stage_inputs("determinism")
        differ = ""
        for _ in self.configurations():
            runs = [self.run_candidate(args)[0] for _ in range(3)]
            if not all(bitwise_equal(runs[0], r) for r in runs[1:]):
                config = self.choice.describe()
                differ = f" (autotune config {config})" if config else ""
                break
        else:
            self.cases.append(
                CaseResult("determinism", "3 runs", True, message="bitwise identical")
            )
            return 1
        originals = [self._call(self.original_entry, args, "original") for _ in range(3)]
        if not all(bitwise_equal(originals[0], r) for r in originals[1:]):
            self.cases.append(
                CaseResult(
                    "determinism",
                    "3 runs",
                    True,
                    message="differs between runs, as the original does",
                )
            )
            return 1
        case = CaseResult(
            "determinism",
            "3 runs",
            False,
            "nondeterministic",
            "outputs differ between identical runs",
        )
        self.cases.append(case)
        raise HarnessFailure(
            "nondeterministic",
            f"determinism stage ({shapes.describe(args)}{differ}): three runs on "
            "the same inputs gave different bits, while the original is "
            "deterministic",
            case,
        )

    def stage_edge(self) -> int:
        return self._check_all("edge")

    def run(self) -> tuple[HarnessResult, bool]:
        """(result, fatal): fatal means the device context is broken and the worker must exit."""
        try:
            self.progress("load", self.task.kernel)
            self.load()
        except FatalDeviceError as f:
            return self._failed("load", f), True
        except HarnessFailure as f:
            return self._failed("load", f), False
        with self.choice:
            for stage in self.req.stages:
                self.progress(stage, "")
                before, t0, jit0 = self.skipped, time.perf_counter(), CLOCK.seconds
                try:
                    n = getattr(self, f"stage_{stage}")()
                except FatalDeviceError as f:
                    return self._failed(stage, f), True
                except HarnessFailure as f:
                    return self._failed(stage, f), False
                self.stage_results.append(
                    StageResult(
                        stage,
                        True,
                        n,
                        self.skipped - before,
                        seconds=time.perf_counter() - t0,
                        jit_seconds=CLOCK.seconds - jit0,
                    )
                )
        passed = ", ".join(f"{s.name} ({s.cases})" for s in self.stage_results)
        return HarnessResult(
            True,
            None,
            None,
            f"passed all {len(self.stage_results)} stages: {passed}",
            self.stage_results,
            self.cases,
        ), False

    def _failed(self, stage: str, f: HarnessFailure) -> HarnessResult:
        self.stage_results.append(StageResult(stage, False, message=f.message))
        return HarnessResult(
            False,
            stage,
            f.reason,
            f.message,
            self.stage_results,
            self.cases,
            sorted(self.extra_ops),
        )
