"""Verify a candidate end to end: static gate, then the harness in a worker, then (GPU) timing.

This is the engine-side orchestration used by `kernelbrain verify`, the search and the server;
it never imports torch itself.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

import msgspec

from .. import protocol as m
from ..api import facts
from ..task.spec import Task
from .candidate import candidate_id
from .ceilings import CeilingCache
from .devices import is_gpu
from .policy import Rejection, static_gate
from .pool import WorkerDied, WorkerPool
from .work_floor import WorkFloor, held_to_floor

# Per-call limits. The interpreter runs everything on the CPU (~1 s per 1,024 programs).
HARNESS_TIMEOUT_S = {"cpu": 600.0, "gpu": 300.0}
# A candidate's harness call may take this many times the original's own stages, plus a floor for
# what the stages do not count (importing the candidate, on a GPU compiling it): a candidate that
# hangs then ends in seconds. The softmax example's five stages take about 3 s on the CPU
# interpreter, so its candidates get 15 + 3 x 3 = 24 s.
CANDIDATE_TIME_FACTOR = 3.0
CANDIDATE_TIMEOUT_FLOOR_S = {"cpu": 15.0, "gpu": 60.0}
# The original's stage seconds (None: it failed its check) per task, original source and device.
_STAGE_SECONDS: dict[tuple, float | None] = {}
TIMING_TIMEOUT_S = 600.0


class VerifyReport(msgspec.Struct):
    kernel: str
    file: str
    candidate_id: str
    device: str
    accepted: bool
    stage: str | None  # where it was rejected: "gate", "load", a harness stage, or "timing"
    reason: str | None
    message: str
    cases: list[facts.CaseResult] = []
    stages: list[facts.StageResult] = []
    timing: facts.TimingResult | None = None
    torch_ops: list[str] = []
    line: int | None = None  # candidate line of a gate rejection
    notes: list[str] = []  # what the harness wants the user to know about the verdict


def harness_timeout(device: str) -> float:
    return HARNESS_TIMEOUT_S["gpu" if is_gpu(device) else "cpu"]


def candidate_timeout(original_seconds: float, device: str) -> float:
    """A candidate's per-call timeout for stages the original ran in `original_seconds`."""
    kind = "gpu" if is_gpu(device) else "cpu"
    return CANDIDATE_TIMEOUT_FLOOR_S[kind] + CANDIDATE_TIME_FACTOR * original_seconds


def default_timeout(
    pool: WorkerPool, task: Task, device: str, seed: int, on_progress
) -> tuple[float | None, str]:
    """A candidate's per-call timeout from the original's own check (a floor plus a multiple of its stages' seconds),
    and the words that explain it in a timeout's message; (None, "") when the original fails.
    The check runs once per task, original and device in a process (`_STAGE_SECONDS`)."""
    key = (msgspec.json.encode(task), Path(task.file).read_bytes(), device)
    if key not in _STAGE_SECONDS:
        check = run_harness(pool, task, None, device, seed, on_progress)
        seconds = sum(s.seconds for s in check.stages) if check.accepted else None
        _STAGE_SECONDS[key] = seconds
    stages = _STAGE_SECONDS[key]
    if stages is None:
        return None, ""
    timeout_s = candidate_timeout(stages, device)
    return timeout_s, (
        f" (the original's own check took {stages:.1f} s of stages, so a candidate gets "
        f"{timeout_s:.0f} s; --timeout sets it)"
    )


def benchmark_inputs_error(pool: WorkerPool, task: Task, seed: int = 0) -> str | None:
    """Why the task's benchmark inputs cannot be drawn and run through the entry (the dry run a
    search starts from, on a compile worker), or None. Off a GPU the stages check only the small
    inputs, so `bench` and `verify` ask this too: a harness that `optimize` would refuse is
    refused by all three alike."""
    try:
        spec = pool.call("compile:0", m.Specialize(task, None, seed=seed), 180.0)
    except WorkerDied as d:
        return d.message
    if not isinstance(spec, facts.SpecializeResult):
        return getattr(spec, "message", f"the dry run answered {type(spec).__name__}")
    if spec.error:
        return spec.error
    return None if spec.cases else "no cases"


def run_harness(
    pool: WorkerPool,
    task: Task,
    source: str | None,
    device: str,
    seed: int = 0,
    on_progress: Callable[[m.Progress], None] | None = None,
    timeout_s: float | None = None,
    stages: list[str] | None = None,
    from_call: bool = False,
) -> facts.HarnessResult:
    """The correctness stages (all five by default) in a worker; a dead or hung worker becomes a
    rejected result. `from_call`: the limit counts from this call (`WorkerPool.call`)."""
    req = m.RunHarness(
        task,
        source,
        candidate_id(source) if source else "original",
        seed,
        list(stages or facts.STAGES),
        full_cases=is_gpu(device),
    )
    try:
        answer = pool.call(
            device, req, timeout_s or harness_timeout(device), on_progress, from_call=from_call
        )
    except WorkerDied as d:
        return facts.HarnessResult(
            False,
            d.stage or "load",
            d.kind,
            d.message + (f"\n{d.stderr[-1500:]}" if d.stderr else ""),
        )
    if isinstance(answer, facts.WorkerError):
        return facts.HarnessResult(False, "load", answer.reason, answer.message)
    return answer


def claimed_seconds(result: facts.TimingResult) -> float:
    """The least GPU time the runs a timing reports add up to: every repetition of the original
    and of the candidate, at their medians (flushes, holds, the A/A runs and further captures
    come on top)."""
    return sum(c.reps * (c.baseline_ms + c.candidate_ms) for c in result.cases) / 1000


def held_to_clock(result: facts.TimingResult, elapsed_s: float) -> facts.TimingResult:
    """`result`, rejected when its runs could not have fitted in the time the engine's own clock
    saw pass: a forged answer that inflates the original's time to fake a speedup."""
    claimed = claimed_seconds(result)
    if claimed <= elapsed_s or result.rejection is not None:
        return result
    return msgspec.structs.replace(
        result,
        rejection=facts.WorkerError(
            "forged-timing",
            f"the timing reports {claimed:.2f} s of timed runs, but only {elapsed_s:.2f} s "
            "passed while it ran",
        ),
    )


def time_ab(pool: WorkerPool, device: str, request: m.TimeAB, on_progress=None):
    """A TimeAB on the device's runner, held to the engine's clock (`held_to_clock`)."""
    started = time.monotonic()
    answer = pool.call(device, request, TIMING_TIMEOUT_S, on_progress)
    elapsed = time.monotonic() - started
    if isinstance(answer, facts.TimingResult):
        return held_to_clock(answer, elapsed)
    if isinstance(answer, facts.TimingResults):
        return facts.TimingResults([held_to_clock(r, elapsed) for r in answer.results])
    return answer


def verify(
    pool: WorkerPool,
    task: Task,
    source: str,
    device: str,
    *,
    seed: int = 0,
    timing: bool = True,
    rep_ms: float = 300.0,
    on_progress: Callable[[m.Progress], None] | None = None,
    timeout_s: float | None = None,
    ceilings: facts.Ceilings | None = None,
) -> VerifyReport:
    """The candidate through the gate, the harness and (GPU) a timing held to the engine's clock
    and to the task's work floor (`ceilings`: the device's; measured or loaded when not given)."""
    original = Path(task.file).read_text(encoding="utf-8")
    cid = candidate_id(source)
    base = dict(kernel=task.kernel, file=task.file, candidate_id=cid, device=device)
    rejection: Rejection | None = static_gate(task, original, source)
    if rejection is not None:
        return VerifyReport(
            **base,
            accepted=False,
            stage="gate",
            reason=rejection.reason,
            message=rejection.message,
            line=rejection.line,
        )
    why_timeout = ""
    if timeout_s is None:
        timeout_s, why_timeout = default_timeout(pool, task, device, seed, on_progress)
    result = run_harness(pool, task, source, device, seed, on_progress, timeout_s)
    if result.reason == "timeout":
        result.message += why_timeout
    report = VerifyReport(
        **base,
        accepted=result.accepted,
        stage=result.stage,
        reason=result.reason,
        message=result.message,
        cases=result.cases,
        stages=result.stages,
        torch_ops=result.torch_ops,
        notes=result.notes,
    )
    if result.accepted and timing and is_gpu(device):
        if ceilings is None:
            ceilings = CeilingCache().get_or_measure(pool, device)
        request = m.TimeAB(task, source, cid, rep_ms=rep_ms, seed=seed)
        time_verified(pool, device, request, WorkFloor.of(result, ceilings), report, on_progress)
    return report


def time_verified(
    pool: WorkerPool, device: str, request: m.TimeAB, floor, report: VerifyReport, on_progress
) -> None:
    """Time a verified candidate against the original into `report`: a worker that dies, an
    error or a timing held to the engine's clock or the work floor rejects it at "timing"."""
    try:
        answer = held_to_floor(time_ab(pool, device, request, on_progress), floor)
    except WorkerDied as d:
        report.accepted, report.stage, report.reason, report.message = (
            False, "timing", d.kind, d.message,
        )  # fmt: skip
        return
    if isinstance(answer, facts.WorkerError):
        report.accepted, report.stage, report.reason, report.message = (
            False, "timing", answer.reason, answer.message,
        )  # fmt: skip
        return
    report.timing = answer
    if answer.rejection is not None:
        report.accepted, report.stage, report.reason, report.message = (
            False, "timing", answer.rejection.reason, answer.rejection.message,
        )  # fmt: skip


def bench(
    pool: WorkerPool,
    task: Task,
    device: str,
    source: str | None = None,
    rep_ms: float = 300.0,
    on_progress=None,
) -> facts.BenchResult:
    ceilings = CeilingCache().get_or_measure(pool, device)
    answer = pool.call(
        device, m.Bench(task, source, rep_ms, ceilings=ceilings), TIMING_TIMEOUT_S, on_progress
    )
    if isinstance(answer, facts.WorkerError):
        raise RuntimeError(f"{answer.reason}: {answer.message}")
    return answer
