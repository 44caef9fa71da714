"""The runs a judge decides from: one call of an entry on one case (`Run`), made here
(`LocalRunner`: the original, or the candidate in its runner process) or in the runner process
(`RemoteRunner`: the judge's side, plain values over the engine's pipes)."""

from __future__ import annotations

import contextlib
import gc
from typing import Callable

import torch

from ..api.facts import FATAL_REASONS
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
from . import audit, bounds, shapes
from . import values as wire
from .audit import FILLS, AuditMode
from .autotune_choice import AutotuneChoice
from .compare import flatten, identical
from .failures import (
    CANDIDATE_REASONS,
    FatalDeviceError,
    HarnessFailure,
    classify_exception,
    short_traceback,
    site,
)
from .ghost import kernels_skipped
from .interpreter_compat import code_error as own_error
from .interpreter_compat import diagnose as diagnose_interpreter


class Run:
    """One call of an entry on one case: what the judge decides from."""

    __slots__ = (
        "config",
        "output",
        "args_after",
        "ops",
        "launches",
        "aliases",
        "rebound",
        "kept",
    )

    def __init__(self, config, output, args_after, ops, launches, aliases, rebound=(), kept=()):
        self.config: str = config
        self.output = output
        self.args_after = args_after
        self.ops: set[str] = set(ops)
        self.launches: int = launches
        self.aliases: list[int] = list(aliases)
        self.rebound: list[int] = list(rebound)
        self.kept: list[int] = list(kept)  # outputs in memory kept from before the call


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


def memory_of(value) -> tuple | None:
    """Where a tensor argument's elements live (storage, offset, shape, strides): a call that
    changes it rebound the argument object, and the caller's memory holds no result."""
    if not isinstance(value, torch.Tensor) or value.device.type == "meta":
        return None
    return (
        value.untyped_storage().data_ptr(),
        value.storage_offset(),
        tuple(value.shape),
        value.stride(),
    )


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
    process serving `RunCandidate` for the candidate it imported. `call` runs the entry on a
    case and says whose fault a failure is (`Harness.call`); `choice` walks the autotune
    configurations."""

    def __init__(
        self,
        call: Callable,
        choice: AutotuneChoice,
        entry: Callable,
        who: str = "candidate",
        under_test: bool = True,
    ):
        """`who` names the entry in messages; `under_test`: its failures are its own (the
        candidate, or the original checking itself), not the harness's."""
        self.call, self.choice, self.entry, self.who = call, choice, entry, who
        self.under_test = under_test

    def prepare(self) -> None:
        """Nothing to load: the entry is here."""

    def run(
        self, args, repeats: int = 1, turn: int | None = None, ghost: bool = False
    ) -> list[Run]:
        choice = self.choice
        runs: list[Run] = []
        # repeated runs (the determinism stage) take the allocation fills in turn (`FILLS`)
        fills = [FILLS[min(i, len(FILLS) - 1)] for i in range(repeats)]
        if turn is not None:  # the interpreter: one configuration per case, in turn
            choice.select(turn)
            return [self.once(args, ghost, fill) for fill in fills]
        want = 0
        while True:  # a GPU: every configuration the tuning keeps
            choice.select(want)
            runs += [self.once(args, ghost, fill) for fill in fills]
            want += 1
            if want >= choice.widest:
                return runs

    def run_many(self, cases, repeats: int = 1, turns=None):
        """`run` on each case in turn (a generator: a failure surfaces at its own case)."""
        for i, args in enumerate(cases):
            yield self.run(args, repeats, turns[i] if turns else None)

    def once(self, args, ghost: bool = False, fill: str = "poison") -> Run:
        """One call on a clone of `args`; `ghost`: with every Triton kernel skipped; `fill`:
        what it allocates holds (`audit.FILLS`). An entry under test that writes outside what
        it was given fails `out-of-bounds` (`bounds.py`); one that returns memory it keeps
        between calls is told by `Run.kept`."""
        clones = shapes.clone_args(args)
        places = [memory_of(c) for c in clones]
        outside = bounds.Outside(clones)
        mode = AuditMode(guard_elements=audit.guard_span(clones), fill=fill)
        before = audit.launch_count()
        with kernels_skipped() if ghost else contextlib.nullcontext():
            out = self.call(
                self.entry, clones, self.who, mode, clone=False, under_test=self.under_test
            )
        if self.under_test:
            self._in_bounds(outside.changed(), mode.guards_written())
        mode.guards.clear()  # the judge's own views of the outputs' memory
        kept = mode.kept(out, clones)
        holder = [out]  # the output held once, for `held_elsewhere`'s count
        del out
        held = audit.held_elsewhere(holder, clones)
        for generation in (0, 1, 2):  # garbage in a cycle holds it until collected (Triton's
            if not held:  # interpreter leaves its copies of the arguments so): the young first
                break
            gc.collect(generation)
            held = audit.held_elsewhere(holder, clones)
        kept += [i for i in held if i not in kept]
        out = holder.pop()
        return Run(
            self.choice.describe(),
            out,
            clones,
            mode.compute_ops,
            audit.launch_count() - before,
            aliased_outputs(out, clones),
            [i for i, (c, p) in enumerate(zip(clones, places)) if memory_of(c) != p],
            kept,
        )

    def _in_bounds(self, arguments: list[int], guards: int) -> None:
        if arguments:
            raise HarnessFailure(
                "out-of-bounds",
                f"the {self.who} wrote outside the elements of argument {arguments[0]} (into the "
                "rest of the buffer it is a view of: the gaps between its rows, or past it)",
            )
        if guards:
            raise HarnessFailure(
                "out-of-bounds",
                f"the {self.who} wrote past the end of {guards} tensor(s) it created (the room "
                "the judge leaves after them when the inputs' rows sit apart)",
            )


class RemoteRunner:
    """The judge's side of a candidate: cases go to the runner process through the engine
    (`NeedRuns`), in batches, and only plain values come back (`wire.py`)."""

    def __init__(self, req: RunHarness, device: str, exchange: Callable[[NeedRuns], object]):
        self.req, self.device, self.exchange = req, device, exchange
        self.process_ended = False  # the runner died or exited: nothing of it left to check
        self.imported = False  # the runner imported the candidate (and checked its process)

    def _ask(self, cases, repeats: int = 1, turns=(), ghost: bool = False) -> CandidateRuns:
        request = RunCandidate(
            self.req.task, self.req.candidate, cases, repeats, list(turns), ghost
        )
        answer = self.exchange(NeedRuns(request))
        if isinstance(answer, RunnerFailed):
            self.process_ended = self.process_ended or answer.ended
            raise HarnessFailure(answer.kind, answer.message)
        if not isinstance(answer, CandidateRuns):
            raise HarnessFailure("bad-answer", f"the runner answered {type(answer).__name__}")
        if answer.failed is not None and answer.failed.reason in FATAL_REASONS:
            self.process_ended = True  # the runner exits after answering
        return answer

    @staticmethod
    def _failure(answer: CandidateRuns) -> HarnessFailure:
        reason = answer.failed.reason
        return HarnessFailure(
            reason if reason in CANDIDATE_REASONS else "exception", answer.failed.message
        )

    def prepare(self) -> None:
        """Have the runner import the candidate (a failure belongs to the load stage); the
        runner checks its process after it (`process._checks_process`)."""
        answer = self._ask(None)
        if answer.failed is not None:
            raise self._failure(answer)
        self.imported = True

    def process_changed(self) -> HarnessFailure | None:
        """The runner's check of its process once the candidate's calls are done (`tampered`),
        before the judge decides; None when the process is as it was, or gone (a runner that
        died or exited holds nothing a later candidate or timing could meet; a candidate that
        failed its import was checked then, and is not imported twice)."""
        if self.process_ended or not self.imported:
            return None
        try:
            answer = self._ask(None)
        except HarnessFailure as f:
            return f
        return self._failure(answer) if answer.failed is not None else None

    def run(
        self, args, repeats: int = 1, turn: int | None = None, ghost: bool = False
    ) -> list[Run]:
        return next(iter(self.run_many([args], repeats, [turn], ghost)))

    def run_many(self, cases, repeats: int = 1, turns=None, ghost: bool = False):
        """The runs of each case, in order; the candidate's failure surfaces at its own case,
        after the cases before it (so the judge reports the first wrong case, as in order)."""
        cases = [tuple(args) for args in cases]
        try:
            sent = [wire.encode(args) for args in cases]
        except wire.WireError as exc:
            raise HarnessFailure("harness-error", f"a case holds {exc}") from exc
        answer = self._ask(sent, repeats, turns or [None] * len(sent), ghost)
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
            decoded.append(
                Run(r.config, output, after, r.ops, r.launches, r.aliases, r.rebound, r.kept)
            )
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
                r.rebound,
                r.kept,
            )
        )
    return compact


class Caller:
    """Calls an entry, the reference or the inputs on a case, and says whose fault a failure
    is: whatever raises in the entry under test is its failure; in the reference, the inputs or
    the original run for comparison it is the harness's."""

    def __init__(self, device: str, interpreter: bool):
        self.device, self.interpreter = device, interpreter

    def __call__(
        self,
        fn: Callable,
        args,
        who: str,
        audit: AuditMode | None = None,
        clone: bool = True,
        under_test: bool = False,
    ):
        """`fn` on (a clone of) `args`, synchronised with the device."""
        try:
            call_args = shapes.clone_args(args) if clone else args
            # the entry under test runs in the modes a caller's program has (grad on), so it
            # cannot tell the judge's calls by them; the harness's own calls need no graph
            with contextlib.nullcontext() if under_test else torch.no_grad():
                if audit is not None:
                    with audit:
                        out = fn(*call_args)
                else:
                    out = fn(*call_args)
            if self.device.startswith("cuda"):
                torch.cuda.synchronize()
            return out
        except Exception as exc:
            reason, fatal = classify_exception(exc)
            message = f"{who} raised {type(exc).__name__}: {exc}"
            if self.interpreter and not fatal:
                message = own_error(exc, who) or message
            gap = diagnose_interpreter(exc, who) if self.interpreter and not fatal else None
            if gap is not None:
                raise HarnessFailure("interpreter-gap", gap) from exc
            if under_test:
                cls = FatalDeviceError if fatal else HarnessFailure
                raise cls(reason, message + "\n" + short_traceback(exc)) from exc
            if fatal:
                raise FatalDeviceError(reason, message) from exc
            raise HarnessFailure(
                "harness-incomplete" if reason == "harness-incomplete" else "harness-error",
                message + site(exc),
            ) from exc
