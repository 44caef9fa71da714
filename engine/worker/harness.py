"""The correctness harness, run inside an evaluation worker (imports torch).

Five stages, all must pass: smoke (tiny cases, stop at the first failure), shape
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

import os
import time
from pathlib import Path
from typing import Callable

import torch

from ..api.facts import CaseResult, HarnessResult, StageResult, WorkerError
from ..protocol import CandidateRun, CandidateRuns, NeedRuns, RunCandidate, RunHarness
from . import ghost, shapes
from . import values as wire
from .autotune_choice import AutotuneChoice
from .case_judge import CaseJudge, PreparedCase
from .cases import CaseSource
from .failures import FatalDeviceError, HarnessFailure
from .jit_clock import CLOCK
from .left_out import ORIGINAL, REFERENCE, LeftOut
from .loader import ModuleLoader
from .oracle import AccuracyOracle
from .original import OriginalBehaviour
from .results import ResultNames
from .runs import Caller, LocalRunner, RemoteRunner, Run, compact_runs, written_bytes
from .stages import check_determinism, stage_inputs, unchecked
from .task_modules import TaskModules, load_modules

# Arguments sent to the runner per round trip: the CPU stages' small cases travel in one batch
# each, a GPU sweep's benchmark cases one or two at a time (host memory stays bounded).
BATCH_BYTES = 64 << 20


def compared_nothing(stages, cases: list[CaseResult]) -> HarnessFailure | None:
    """A run of the value stages whose comparisons held no element: a verification that
    compares nothing is a harness error, never a pass."""
    if not {"smoke", "sweep"} & set(stages) or any(c.elements for c in cases):
        return None
    return HarnessFailure(
        "harness-error",
        "no element of any result was compared: the entry returns nothing and writes no "
        "argument the reference accounts for (or the reference returns nothing). Have the "
        "reference return or write what the launcher produces; results in arguments are "
        "named with the task's `outputs` (docs/harness.md)",
    )


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
        self.task = req.task
        self.device = device
        self.loader = loader
        self.progress = progress
        self.interpreter = os.environ.get("TRITON_INTERPRET") == "1"
        self.call = Caller(device, self.interpreter)
        self.cases: list[CaseResult] = []
        self.stage_results: list[StageResult] = []
        self.skipped = LeftOut()
        self.output_bytes: dict[str, int] = {}  # the reference's, per benchmark case's timing label
        self.oracle = AccuracyOracle(self.task.rtol, self.task.atol)
        self.original = OriginalBehaviour(self._run_original)
        self.choice = AutotuneChoice()  # entered while the stages run
        self._next_config = 0  # the interpreter's turn through a tuned kernel's configurations
        self.modules: TaskModules | None = None
        self.inputs: CaseSource | None = None
        self.runner: LocalRunner | RemoteRunner | None = None
        self.verdict: CaseJudge | None = None  # made when the task is loaded

    def load(self) -> None:
        """Import the task (never the candidate in the judge) and get its runner ready."""
        self.modules = m = load_modules(self.req, self.device, self.loader, self.judging)
        self.verdict = CaseJudge(
            self.task,
            self.req.candidate is not None,
            self.original,
            self.oracle,
            ResultNames(m.original_entry, self.task.outputs),
            self.cases,
        )
        source = self.req.candidate or Path(self.task.file).read_text(encoding="utf-8")
        self.inputs = CaseSource(
            self.task, m.inputs_fn, m.small_fn, self.device, self.req.seed, source, self.interpreter
        )
        if self.judging:
            self.runner = RemoteRunner(self.req, self.device, self.exchange)
            self.runner.prepare()
        else:
            who = "candidate" if self.req.candidate is not None else "the original kernel"
            self.runner = LocalRunner(self.call, self.choice, m.entry, who)

    @property
    def entry(self) -> Callable | None:
        """The entry under test, where it is imported (not in the judge)."""
        return self.modules.entry if self.modules else None

    def _run_original(self, args) -> Run:
        runner = LocalRunner(
            self.call, self.choice, self.modules.original_entry, "original", under_test=False
        )
        return runner.once(args)

    def stage_inputs(self, stage: str):
        """Every input of a stage, as (label, args, check options) (`stages.stage_inputs`)."""
        return stage_inputs(
            self.inputs,
            self.task,
            stage,
            self.req.seed,
            self.req.full_cases,
            lambda: self.original.writes,
            self.modules.original_entry,
        )

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
        """The judge's half of a case before the candidate runs: the reference's answer; None
        when the case is left out (the reference or the original refuses it; `left_out.py`).
        A `derived` case (a size the sweep made up) is left out when the reference refuses it:
        the reference defines the op's domain, and sizes tied across arguments in ways the
        sweep cannot see (RoPE's `cos` at half the head size) fall outside it.
        A benchmark case (`timing_label`) also records the bytes the reference's outputs take:
        what any timed run of the case must write (`work_floor.py`)."""
        desc = shapes.describe(args)
        if self.req.candidate is not None:
            self.original.baseline(args)  # what the original writes, before the reference's answer
        ref_args = shapes.clone_args(args)
        try:
            ref_out = self.call(self.modules.reference, ref_args, "reference", clone=False)
        except HarnessFailure as f:
            if (derived or stage in ("stability", "edge")) and f.reason == "harness-error":
                self.skipped.add(REFERENCE, f"{stage} stage, {label} ({desc})", f.message)
                return None
            raise
        derived = derived or stage in ("stability", "edge")
        case = PreparedCase(label, args, desc, ref_out, tuple(ref_args), scale, derived)
        expected = self.verdict.expected(case)
        if timing_label is not None:
            baseline = self.original.baseline(args)
            self.output_bytes[timing_label] = written_bytes(
                expected, self.verdict.names.of_call(baseline.output, baseline.args_after, expected)
            )
        if only_if_original_ok:
            why = self.verdict.original_failure(case)
            if why is not None:
                self.skipped.add(ORIGINAL, f"{stage} stage, {label} ({desc})", why)
                return None
        return case

    def judge(self, stage: str, cases: list[PreparedCase]) -> None:
        """Run the candidate on the cases (one batch) and judge each run; raise HarnessFailure
        at the first wrong one, unless that case is made up and the original fails it too: it
        is then left out (`left_out.py`) and the rest of the batch goes on."""
        while cases:
            turns = [self.turn() for _ in cases]
            done = 0
            try:
                for case, runs in zip(
                    cases, self.runner.run_many([c.args for c in cases], 1, turns)
                ):
                    for run in runs:
                        self.verdict.check_run(stage, case, run)
                    done += 1
                return
            except FatalDeviceError:
                raise
            except HarnessFailure:
                failed = cases[done]
                why = self.verdict.original_failure(failed) if failed.derived else None
                if why is None:
                    raise
                self.skipped.add(ORIGINAL, f"{stage} stage, {failed.label} ({failed.desc})", why)
                cases = cases[done + 1 :]

    def turn(self) -> int | None:
        """The interpreter's configuration for the next case (None on a GPU: all of them)."""
        if not self.interpreter:
            return None
        self._next_config += 1
        return self._next_config - 1

    def check_all(self, stage: str) -> int:
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

    def check_determinism(self) -> int:
        [(_, args, _)] = self.stage_inputs("determinism")
        runs = self.runner.run(args, 3, self.turn())
        if self.req.candidate is None:
            for run in runs:
                self.original.learn(args, run)

        def results(run: Run):
            written = [run.args_after[i] for i in sorted(self.original.writes)]
            return (run.output, written)

        try:
            self.cases.append(check_determinism(runs, args, self._run_original, results))
        except HarnessFailure as f:
            self.cases.append(f.case)
            raise
        return 1

    def check_kernels_compute(self) -> None:
        """Ghost replay (`ghost.py`) on the first smoke case."""
        drawn = next(iter(self.stage_inputs("smoke")), None)
        case = self.prepare("smoke", "ghost replay", drawn[1]) if drawn else None
        if case is None:
            return
        expected = self.verdict.expected(case)
        original = LocalRunner(
            self.call, self.choice, self.modules.original_entry, "original", under_test=False
        )
        turn = self.turn()

        def results(run: Run):
            return self.verdict.names.of_call(run.output, run.args_after, expected)

        ghost.check(
            lambda skipped: results(original.once(case.args, skipped)),
            lambda skipped: results(self.runner.run(case.args, 1, turn, ghost=skipped)[0]),
        )

    def run(self) -> tuple[HarnessResult, bool]:
        """(result, fatal): fatal means the device context is broken and the worker must exit.
        A candidate that changed its runner's process is `tampered`, whatever its cases said."""
        result, fatal = self._stages()
        if fatal or not isinstance(self.runner, RemoteRunner):
            return result, fatal
        changed = self.runner.process_changed()
        if changed is None:
            return result, fatal
        if not result.accepted:
            self.stage_results.pop()  # the change is the failure the verdict ends with
        return self._failed(result.stage or self.stage_results[-1].name, changed), False

    def _stages(self) -> tuple[HarnessResult, bool]:
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
                before, t0, jit0 = self.skipped.count, time.perf_counter(), CLOCK.seconds
                try:
                    n = (
                        self.check_determinism()
                        if stage == "determinism"
                        else self.check_all(stage)
                    )
                    if stage == "smoke" and self.req.candidate is not None:
                        self.check_kernels_compute()
                except FatalDeviceError as f:
                    return self._failed(stage, f), True
                except HarnessFailure as f:
                    return self._failed(stage, f), False
                self.stage_results.append(
                    StageResult(
                        stage,
                        True,
                        n,
                        self.skipped.count - before,
                        seconds=time.perf_counter() - t0,
                        jit_seconds=CLOCK.seconds - jit0,
                    )
                )
        empty = compared_nothing(self.req.stages, self.cases)
        if empty is not None:
            return self._failed(self.stage_results[-1].name, empty), False
        passed = ", ".join(f"{s.name} ({s.cases})" for s in self.stage_results)
        return HarnessResult(
            True,
            None,
            None,
            f"passed all {len(self.stage_results)} stages: {passed}",
            self.stage_results,
            self.cases,
            output_bytes=self.output_bytes,
            notes=list(self.oracle.notes) + self.skipped.notes() + unchecked(self.req),
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
            sorted(self.original.extra_ops),
        )


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
                runs = h.runner.run(args, req.repeats, turn, req.ghost)
                done.append(compact_runs(args, runs))
    except FatalDeviceError as f:
        return failed(f.reason, f.message), True
    except HarnessFailure as f:
        return failed(f.reason, f.message), False
    except wire.WireError as exc:
        return failed("type", f"the candidate returned {exc}"), False
    return CandidateRuns(done), False
