"""The correctness harness, run inside an evaluation worker (imports torch).

Five stages, all must pass (brief §4): smoke (tiny cases, stop at the first failure), shape
sweep (every case plus odd sizes around block boundaries), numerical stability (large, small,
mixed magnitudes, -inf; looser tolerance), determinism (three bitwise-equal runs unless the
original is not deterministic either) and edge cases (strided inputs and size-1 dimensions where
the original accepts them). Each stage draws fresh inputs from its own seed.

The harness is the judge: it runs in a process that never imports the candidate. It draws the
inputs, computes the reference's and the original's outputs, hands each case's arguments to a
`CandidateRunner` and decides from what comes back. In a search or `verify` the runner is
`RemoteRunner`: the case goes, through the engine, to the runner process (the only one that
imports the candidate), which runs it under `AuditMode` (NaN-poisoned allocations, PyTorch
compute recorded) and sends back the outputs, the arguments as the call left them and what it
saw. Writing a verdict to a pipe, patching torch or exiting early can only make that fail. The
original checks itself with `LocalRunner`. Besides matching the reference (or, where the
reference and the original disagree, the original), a candidate must leave its inputs as the
original does, return outputs that alias its inputs only where the original's do, and launch a
Triton kernel where the original does.
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
from typing import Callable, NamedTuple

import torch

from ..api.facts import CaseResult, HarnessResult, StageResult, WorkerError
from ..index import parse_module
from ..protocol import (
    CandidateRun,
    CandidateRuns,
    NeedRuns,
    RunCandidate,
    RunHarness,
    RunnerFailed,
    SameOutput,
    Unchanged,
)
from ..task.scaffold import STUB_MARK
from ..task.spec import Task
from . import audit, shapes
from . import values as wire
from .audit import AuditMode
from .autotune_choice import AutotuneChoice
from .compare import bitwise_equal, compare, flatten, identical, mean_magnitude
from .interpreter_compat import diagnose as diagnose_interpreter
from .jit_clock import CLOCK

# The CPU interpreter runs ~1 s per 1,024 programs: above this many input elements a case is
# too slow for it, and the task must provide small_inputs.
INTERPRETER_MAX_ELEMENTS = 1 << 22
STABILITY_KINDS = ("large", "small", "mixed", "neg-inf")
STABILITY_SCALE = 10.0  # tolerance multiplier for the stability stage
# Arguments sent to the runner per round trip: the CPU stages' small cases travel in one batch
# each, a GPU sweep's benchmark cases one or two at a time (host memory stays bounded).
BATCH_BYTES = 64 << 20
# The original is the accuracy oracle: it stands when it matches the reference within one of
# these multiples of the tolerance, or, last, within bf16's tolerance (ORACLE_FLOOR: only wider
# than 10x for fp32 and fp16 outputs); candidates are then held to no worse than it, with
# CANDIDATE_SLACK (their rounding differs from the original's). TF32 in `tl.dot` on fp32 inputs
# (a 10-bit mantissa, three bits more than bf16) lands off an fp32 reference by an absolute error
# that grows with the operands, not with each output value: on the H200 a 33x96 @ 96x70 case was
# 0.029 off where outputs average 7.8 in magnitude, and the elements near zero failed any
# per-element relative bound. The floor's atol is therefore bf16's rtol times the reference's mean
# magnitude (when that is wider than bf16's atol): a dot's rounding error, relative to the
# output's scale.
ORACLE_SCALES = (2.0, 5.0, 10.0)
ORACLE_FLOOR = (1e-2, 1e-2)  # rtol, atol: bf16's
CANDIDATE_SLACK = 2.0


class Widening(NamedTuple):
    """A tolerance the original may be held to instead of the task's: compare with `rtol`,
    `atol` (None: the dtype's) at `factor` times the stage's scale."""

    rtol: float | None
    atol: float | None
    factor: float
    rank: int
    label: str


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

    def __init__(self, on_disk_only: bool = False) -> None:
        given = os.environ.get("KERNELBRAIN_WORKDIR")
        self.folder = Path(given) if given else Path(tempfile.mkdtemp(prefix="kb-worker-"))
        self._cache: dict[str, object] = {}
        self.on_disk_only = on_disk_only  # the judge: only files as they are on disk

    def load(self, source: str, filename: str, roots: list[str]):
        if self.on_disk_only:
            path = Path(filename)
            if not path.is_file() or path.read_text(encoding="utf-8") != source:
                raise ImportError(
                    f"the judge imports files as they are on disk only, not a variant of {filename}"
                )
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


# Reasons a runner may report for the candidate's own call. Anything else it claims (a broken
# harness, say) is the candidate's exception: a candidate cannot shift the blame to the task.
CANDIDATE_REASONS = frozenset(
    {
        "exception",
        "load-error",
        "compile-error",
        "out-of-memory",
        "illegal-memory-access",
        "cuda-error",
        "type",
    }
)


class PreparedCase(NamedTuple):
    """A case as the judge holds it while the candidate runs it."""

    label: str
    args: tuple
    desc: str
    expected: object
    original_out: object
    scale: float


class Run:
    """One call of an entry on one case: what the judge decides from."""

    __slots__ = ("config", "output", "args_after", "ops", "launches", "aliases")

    def __init__(self, config, output, args_after, ops, launches, aliases):
        self.config: str = config
        self.output = output
        self.args_after = args_after
        self.ops: set[str] = set(ops)
        self.launches: int = launches
        self.aliases: list[int] = list(aliases)


def written_bytes(expected, original_out) -> int:
    """The least number of bytes any correct output of a case takes: the reference's elements
    (a candidate's outputs have its shapes) at the original's dtypes (which a candidate keeps;
    the reference may compute wider)."""
    dtypes = {
        path: leaf.dtype for path, leaf in flatten(original_out) if isinstance(leaf, torch.Tensor)
    }
    total = 0
    for path, leaf in flatten(expected):
        if isinstance(leaf, torch.Tensor):
            dtype = dtypes.get(path, leaf.dtype)
            total += leaf.numel() * dtype.itemsize
    return total


def aliased_outputs(out, args) -> list[int]:
    """Indices of the output tensors that share storage with an argument."""
    inputs = {
        a.untyped_storage().data_ptr()
        for a in args
        if isinstance(a, torch.Tensor) and a.numel() and a.device.type != "meta"
    }
    return [
        i
        for i, (_, x) in enumerate(flatten(out))
        if isinstance(x, torch.Tensor) and x.numel() and x.untyped_storage().data_ptr() in inputs
    ]


class LocalRunner:
    """Runs an entry in this process: the original checking itself in the judge, and the runner
    process serving `RunCandidate` for the candidate it imported."""

    def __init__(
        self, harness: "Harness", entry: Callable, who: str = "candidate", under_test: bool = True
    ):
        """`who` names the entry in messages; `under_test`: its failures are its own (the
        candidate, or the original checking itself), not the harness's."""
        self.harness, self.entry, self.who, self.under_test = harness, entry, who, under_test

    def prepare(self) -> None:
        """Nothing to load: the entry is here."""

    def run(self, args, repeats: int = 1, turn: int | None = None) -> list[Run]:
        choice = self.harness.choice
        runs: list[Run] = []
        if turn is not None:  # the interpreter: one configuration per case, in turn
            choice.select(turn)
            return [self.once(args) for _ in range(repeats)]
        want = 0
        while True:  # a GPU: every configuration the tuning keeps
            choice.select(want)
            runs += [self.once(args) for _ in range(repeats)]
            want += 1
            if want >= choice.widest:
                return runs

    def run_many(self, cases, repeats: int = 1, turns=None):
        """`run` on each case in turn (a generator: a failure surfaces at its own case)."""
        for i, args in enumerate(cases):
            yield self.run(args, repeats, turns[i] if turns else None)

    def once(self, args) -> Run:
        clones = shapes.clone_args(args)
        mode = AuditMode()
        before = audit.launch_count()
        out = self.harness._call(
            self.entry, clones, self.who, mode, clone=False, under_test=self.under_test
        )
        return Run(
            self.harness.choice.describe(),
            out,
            clones,
            mode.compute_ops,
            audit.launch_count() - before,
            aliased_outputs(out, clones),
        )


class RemoteRunner:
    """The judge's side of a candidate: cases go to the runner process through the engine
    (`NeedRuns`), in batches, and only plain values come back (`wire.py`)."""

    def __init__(self, req: RunHarness, device: str, exchange: Callable[[NeedRuns], object]):
        self.req, self.device, self.exchange = req, device, exchange

    def _ask(self, cases, repeats: int = 1, turns=()) -> CandidateRuns:
        request = RunCandidate(self.req.task, self.req.candidate, cases, repeats, list(turns))
        answer = self.exchange(NeedRuns(request))
        if isinstance(answer, RunnerFailed):
            raise HarnessFailure(answer.kind, answer.message)
        if not isinstance(answer, CandidateRuns):
            raise HarnessFailure("bad-answer", f"the runner answered {type(answer).__name__}")
        return answer

    @staticmethod
    def _failure(answer: CandidateRuns) -> HarnessFailure:
        reason = answer.failed.reason
        return HarnessFailure(
            reason if reason in CANDIDATE_REASONS else "exception", answer.failed.message
        )

    def prepare(self) -> None:
        """Have the runner import the candidate (a failure belongs to the load stage)."""
        answer = self._ask(None)
        if answer.failed is not None:
            raise self._failure(answer)

    def run(self, args, repeats: int = 1, turn: int | None = None) -> list[Run]:
        return next(iter(self.run_many([args], repeats, [turn])))

    def run_many(self, cases, repeats: int = 1, turns=None):
        """The runs of each case, in order; the candidate's failure surfaces at its own case,
        after the cases before it (so the judge reports the first wrong case, as in order)."""
        cases = [tuple(args) for args in cases]
        try:
            sent = [wire.encode(args) for args in cases]
        except wire.WireError as exc:
            raise HarnessFailure("harness-error", f"a case holds {exc}") from exc
        answer = self._ask(sent, repeats, turns or [None] * len(sent))
        got = len(answer.runs)
        if answer.failed is None and got != len(sent):
            raise HarnessFailure("bad-answer", f"the runner answered {got} of {len(sent)} cases")
        done = answer.runs[: answer.failed_case if answer.failed is not None else got]
        for args, runs in zip(cases, done):
            try:
                yield self._expand(args, runs)
            except wire.WireError as exc:
                raise HarnessFailure("bad-answer", f"the runner sent {exc}") from exc
        if answer.failed is not None:
            raise self._failure(answer)

    def _expand(self, args: tuple, runs: list[CandidateRun]) -> list[Run]:
        """A case's runs as the runner sent them, markers (`compact_runs`) replaced by what they
        stand for: the judge's own argument, an earlier run's output."""
        decoded: list[Run] = []
        for r in runs:
            if len(r.args_after) != len(args):
                raise wire.WireError(f"{len(r.args_after)} arguments for a case of {len(args)}")
            if isinstance(r.output, SameOutput):
                if not 0 <= r.output.run < len(decoded):
                    raise wire.WireError(f"the output of run {r.output.run}, not one before it")
                output = decoded[r.output.run].output
            else:
                output = wire.decode(r.output, self.device)
            after = tuple(
                sent if isinstance(v, Unchanged) else wire.decode(v, self.device)
                for sent, v in zip(args, r.args_after)
            )
            decoded.append(Run(r.config, output, after, r.ops, r.launches, r.aliases))
        return decoded


def compact_runs(args, runs: list[Run]) -> list[CandidateRun]:
    """A case's runs as the runner answers them: an argument the call left `identical` to what
    was sent is `Unchanged`, an output identical to an earlier run's is `SameOutput`; the rest
    travels whole. Repeats and autotune configurations of a large case otherwise sent the same
    hundreds of MB again for each call."""
    compact: list[CandidateRun] = []
    for j, r in enumerate(runs):
        same = next((k for k in range(j) if identical(runs[k].output, r.output)), None)
        compact.append(
            CandidateRun(
                r.config,
                SameOutput(same) if same is not None else wire.encode(r.output),
                [
                    Unchanged() if identical(sent, after) else wire.encode(after)
                    for sent, after in zip(args, r.args_after)
                ],
                sorted(r.ops),
                r.launches,
                r.aliases,
            )
        )
    return compact


def serve_run_candidate(
    req: RunCandidate, device: str, loader: "ModuleLoader", progress
) -> tuple[CandidateRuns, bool]:
    """The runner's half (in the process that imports the candidate): (answer, fatal)."""
    h = Harness(RunHarness(req.task, req.candidate), device, loader, progress)
    done: list[list[CandidateRun]] = []

    def failed(reason: str, message: str) -> CandidateRuns:
        return CandidateRuns(done, WorkerError(reason, message), len(done))

    try:
        h.load()
        with h.choice:
            for i, case in enumerate(req.cases or []):
                turn = req.turns[i] if i < len(req.turns) else None
                args = wire.decode(case, device)
                done.append(compact_runs(args, h.runner.run(args, req.repeats, turn)))
    except FatalDeviceError as f:
        return failed(f.reason, f.message), True
    except HarnessFailure as f:
        return failed(f.reason, f.message), False
    except wire.WireError as exc:
        return failed("type", f"the candidate returned {exc}"), False
    return CandidateRuns(done), False


class Harness:
    """One candidate (or the original) against its task, on one device.

    With `exchange` (the judge), the candidate is never imported here: its calls go to the
    runner process through `exchange`. Without it the candidate is imported in this process:
    the runner itself, dry runs, timing and profiling, none of which decides a verdict."""

    def __init__(
        self,
        req: RunHarness,
        device: str,
        loader: ModuleLoader,
        progress: Callable[[str, str], None],
        exchange: Callable[[NeedRuns], object] | None = None,
    ):
        self.req = req
        self.exchange = exchange
        self.judging = exchange is not None and req.candidate is not None
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
        self._original_launches = 0  # most Triton launches of one original call
        self._original_mutates = False  # the original changed an argument on some case
        self._original_aliases = False  # the original returned an argument's storage
        self.extra_ops: set[str] = set()
        self.output_bytes: dict[str, int] = {}  # the reference's, per benchmark case's timing label
        self.notes: list[str] = []  # what a user should know about the verdict
        self._widest = 0  # how far the original deviates from the reference: 1 + widening rank
        self.choice = AutotuneChoice()  # entered while the stages run
        self._next_config = 0  # the interpreter's turn through a tuned kernel's configurations
        self.runner: LocalRunner | RemoteRunner | None = None

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
        elif self.judging:
            self.candidate = None  # never imported by the judge
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
            self.entry = getattr(self.candidate, t.entry) if self.candidate else None
            self.original_entry = getattr(self.original, t.entry)
        if self.judging:
            self.runner = RemoteRunner(self.req, self.device, self.exchange)
            self.runner.prepare()
        else:
            who = "candidate" if self.req.candidate is not None else "the original kernel"
            self.runner = LocalRunner(self, self.entry, who)

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
            if module is None:  # the judge: the candidate's model lives in the runner
                models.append(None)
                continue
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

    def _call(
        self,
        fn: Callable,
        args,
        who: str,
        audit: AuditMode | None = None,
        clone: bool = True,
        under_test: bool = False,
    ):
        """`fn` on (a clone of) `args`. Whatever raises in the entry under test is its failure;
        in the reference, the inputs or the original run for comparison it is the harness's."""
        try:
            call_args = shapes.clone_args(args) if clone else args
            with torch.no_grad():
                if audit is not None:
                    with audit:
                        out = fn(*call_args)
                else:
                    out = fn(*call_args)
            self._sync()
            return out
        except Exception as exc:
            reason, fatal = classify_exception(exc)
            message = f"{who} raised {type(exc).__name__}: {exc}"
            gap = diagnose_interpreter(exc, who) if self.interpreter and not fatal else None
            if gap is not None:
                raise HarnessFailure("interpreter-gap", gap) from exc
            if under_test:
                cls = FatalDeviceError if fatal else HarnessFailure
                raise cls(reason, message + "\n" + _short_traceback(exc)) from exc
            if fatal:
                raise FatalDeviceError(reason, message) from exc
            raise HarnessFailure(
                "harness-incomplete" if reason == "harness-incomplete" else "harness-error", message
            ) from exc

    def original_baseline(self, args):
        """The original's output for inputs of these dtypes (a candidate must return the same
        dtypes; small and full cases may differ, e.g. fp16 vs bf16), and what the original does
        that a candidate may do too: its PyTorch ops, its launches, whether it changes an
        argument or returns one."""
        key = tuple(str(a.dtype) for a in args if isinstance(a, torch.Tensor))
        if key not in self._original_outputs:
            run = LocalRunner(self, self.original_entry, "original", under_test=False).once(args)
            self._original_outputs[key] = run.output
            self._original_ops = (self._original_ops or set()) | run.ops
            self._original_launches = max(self._original_launches, run.launches)
            self._original_mutates |= not bitwise_equal(args, run.args_after)
            self._original_aliases |= bool(run.aliases)
        return self._original_outputs[key]

    def try_original(self, args):
        try:
            return self._call(self.original_entry, args, "original"), None
        except FatalDeviceError:
            raise
        except HarnessFailure as f:
            return None, f

    def prepare(
        self,
        stage: str,
        label: str,
        args,
        scale: float = 1.0,
        *,
        only_if_original_ok: bool = False,
        timing_label: str | None = None,
        derived: bool = False,
    ) -> PreparedCase | None:
        """The judge's half of a case before the candidate runs: the reference's output and the
        original's; None when the case is skipped (the reference or the original refuses it).
        A `derived` case (a size the sweep made up) is skipped when the reference refuses it:
        the reference defines the op's domain, and sizes tied across arguments in ways the
        sweep cannot see (RoPE's `cos` at half the head size) fall outside it.
        A benchmark case (`timing_label`) also records the bytes the reference's outputs take:
        what any timed run of the case must write (`work_floor.py`)."""
        desc = shapes.describe(args)
        original_out = self.original_baseline(args) if self.req.candidate is not None else None
        try:
            expected = self._call(self.reference, args, "reference")
        except HarnessFailure as f:
            if (derived or stage in ("stability", "edge")) and f.reason == "harness-error":
                self.skipped += 1  # the reference itself does not take this variant
                return None
            raise
        if timing_label is not None:
            self.output_bytes[timing_label] = written_bytes(expected, self.original_baseline(args))
        if only_if_original_ok:
            orig_out, orig_err = self.try_original(args)
            if (
                orig_err is not None
                or not compare(orig_out, expected, self.task.rtol, self.task.atol, scale).ok
            ):
                self.skipped += 1  # the original does not accept this variant either
                return None
        return PreparedCase(label, args, desc, expected, original_out, scale)

    def judge(self, stage: str, cases: list[PreparedCase]) -> None:
        """Run the candidate on the cases (one batch) and judge each run; raise HarnessFailure
        at the first wrong one."""
        turns = [self._turn() for _ in cases]
        for case, runs in zip(cases, self.runner.run_many([c.args for c in cases], 1, turns)):
            for run in runs:
                self._check_run(
                    stage,
                    case.label,
                    case.args,
                    case.desc,
                    case.expected,
                    case.original_out,
                    case.scale,
                    run,
                )

    def _turn(self) -> int | None:
        """The interpreter's configuration for the next case (None on a GPU: all of them)."""
        if not self.interpreter:
            return None
        self._next_config += 1
        return self._next_config - 1

    def _behaves_like_the_original(self, desc: str, args, run: Run) -> None:
        """What a candidate may not do unless the original does it too. What the original does
        can depend on the case (a branch on the size, an early return), so before a candidate
        is blamed, the original runs on that very case and its behaviour there counts too."""
        seen = (
            self._original_ops or set(),
            self._original_launches > 0,
            self._original_mutates,
            self._original_aliases,
        )
        if self._misbehaviour(desc, args, run, *seen) is None:
            return
        here = LocalRunner(self, self.original_entry, "original", under_test=False).once(args)
        problem = self._misbehaviour(
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

    @staticmethod
    def _misbehaviour(
        desc: str, args, run: Run, ops: set[str], launches: bool, mutates: bool, aliases: bool
    ) -> HarnessFailure | None:
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

    def _deviation(self, original_out, expected, scale: float) -> Widening | None:
        """The least widening of the tolerance (ORACLE_SCALES, then ORACLE_FLOOR) under which
        the original's output matches the reference's; None when the original matches at
        `scale` already or is further off than all of them (a grossly wrong original)."""
        if compare(original_out, expected, self.task.rtol, self.task.atol, scale).ok:
            return None
        for w in self._widenings(expected):
            if compare(original_out, expected, w.rtol, w.atol, scale * w.factor).ok:
                return w
        return None

    def _widenings(self, expected) -> list[Widening]:
        """The widenings tried in order on one case: multiples of the task's tolerance, then the
        floor, whose atol follows the case's reference magnitude (ORACLE_FLOOR)."""
        r, a = self.task.rtol, self.task.atol
        out = [Widening(r, a, f, i, f"{f:g}x the tolerance") for i, f in enumerate(ORACLE_SCALES)]
        floor_r, floor_a = ORACLE_FLOOR
        floor_a = max(floor_a, floor_r * mean_magnitude(expected))
        out.append(
            Widening(
                floor_r if r is None else max(r * ORACLE_SCALES[-1], floor_r),
                floor_a if a is None else max(a * ORACLE_SCALES[-1], floor_a),
                1.0,
                len(out),
                f"bf16's tolerance (rtol {floor_r:g}, atol {floor_a:.3g}: {floor_r:g} of the "
                "output's mean magnitude where that is wider), as TF32 dots do",
            )
        )
        return out

    def _note_deviation(self, stage: str, label: str, widened: Widening) -> None:
        """Say once per harness run how far the original is from its reference, and where."""
        if widened.rank >= self._widest:
            self._widest = widened.rank + 1
            self.notes[:] = [
                f"the original deviates from the reference by up to {widened.label} "
                f"({stage} stage, {label}); candidates are held to no worse than the original "
                "there"
            ]

    def _original_disagrees(self, args, expected, scale: float) -> bool:
        """Whether the original's output differs from the reference's in structure (count of
        values, types or shapes) on these inputs."""
        if self.req.candidate is None:
            return True  # the output checked is the original's
        out, err = self.try_original(args)
        if err is not None:
            return False
        verdict = compare(out, expected, self.task.rtol, self.task.atol, scale)
        return not verdict.ok and verdict.reason in ("shape", "type")

    def _check_run(
        self, stage: str, label: str, args, desc: str, expected, original_out, scale: float, run
    ) -> None:
        out = run.output
        if run.config:
            desc += f" with autotune config {run.config}"
        if self.req.candidate is not None:
            self._behaves_like_the_original(desc, args, run)
        result = compare(
            out, expected, self.task.rtol, self.task.atol, scale, check_dtype_of=original_out
        )
        note = ""
        if not result.ok and result.reason == "mismatch" and self.req.candidate is None:
            # The original is the accuracy oracle: within the oracle's bound of the reference
            # (TF32 in `tl.dot` on fp32 inputs, another summation order) it stands, and
            # candidates are held to no worse than it.
            widened = self._deviation(out, expected, scale)
            if widened is not None:
                result = compare(out, expected, widened.rtol, widened.atol, scale * widened.factor)
                self._note_deviation(stage, label, widened)
        elif not result.ok and result.reason == "mismatch":
            # The bar is "no worse than the original": where the original deviates from the
            # reference too, the candidate must agree with the original, or deviate from the
            # reference by no more than CANDIDATE_SLACK times what the original does.
            orig_out, orig_err = self.try_original(args)
            widened = None if orig_err is not None else self._deviation(orig_out, expected, scale)
            if widened is not None:
                vs_orig = compare(out, orig_out, self.task.rtol, self.task.atol, scale)
                vs_ref = compare(
                    out,
                    expected,
                    widened.rtol,
                    widened.atol,
                    scale * widened.factor * CANDIDATE_SLACK,
                )
                if vs_orig.ok:
                    result, note = (
                        vs_orig,
                        " (matches the original, which deviates from the reference here too)",
                    )
                elif vs_ref.ok:
                    result, note = (
                        vs_ref,
                        f" (no worse than the original, which deviates from the reference by up "
                        f"to {widened.label} here)",
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
        if (
            not result.ok
            and result.reason in ("shape", "type")
            and self._original_disagrees(args, expected, scale)
        ):
            # The original and the reference return different structures: values may be wrong
            # in either, but a structure they disagree on is the harness's to fix.
            raise HarnessFailure(
                "harness-error",
                f"{stage} stage, {label} ({desc}): the kernel's entry and the harness's "
                f"reference return different outputs ({result.message}): check that the "
                "reference computes what the entry returns",
                case,
            )
        if not result.ok:
            bound = (
                f" (further off the reference than the accuracy oracle allows: "
                f"{ORACLE_SCALES[-1]:g}x the tolerance, or bf16's where that is wider)"
                if self.req.candidate is None and result.reason == "mismatch"
                else ""
            )
            raise HarnessFailure(
                result.reason or "mismatch",
                f"{stage} stage, {label} ({desc}): {result.message}{bound}",
                case,
            )

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
                full = self.full_cases("sweep")
                for i, (args, name) in enumerate(zip(full, shapes.case_labels(self.task, full))):
                    yield f"case {i}", args, {"timing_label": name}
            blocks = self.block_sizes()
            for i, args in enumerate(self.small_cases("sweep")):
                yield f"small case {i}", args, {}
                for label, variant in shapes.odd_sizes(
                    args, blocks, stage_seed(self.req.seed, f"sweep{i}")
                ):
                    yield f"small case {i} size {label}", variant, {"derived": True}
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
        """Every input of a stage, the candidate's runs sent in batches of about BATCH_BYTES
        of arguments (each batch is one round trip to the runner)."""
        n, batch, size = 0, [], 0
        for label, args, options in self.stage_inputs(stage):
            self.progress(stage, label)
            n += 1
            case = self.prepare(stage, label, args, **options)
            if case is None:
                continue
            batch.append(case)
            size += sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))
            if size >= BATCH_BYTES:
                self.judge(stage, batch)
                batch, size = [], 0
        if batch:
            self.judge(stage, batch)
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
        runs = self.runner.run(args, 3, self._turn())
        for i in range(0, len(runs), 3):
            trio = runs[i : i + 3]
            if not all(bitwise_equal(trio[0].output, r.output) for r in trio[1:]):
                differ = f" (autotune config {trio[0].config})" if trio[0].config else ""
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
            output_bytes=self.output_bytes,
            notes=list(self.notes),
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
