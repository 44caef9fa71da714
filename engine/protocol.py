"""The wire protocol between the engine and its sandboxed workers (msgspec msgpack,
length-prefixed).

The engine sends one request; the worker answers with any number of `Progress` messages and then
exactly one result (or `WorkerError`). Framing: 4-byte big-endian length, then the payload. The
results themselves are domain facts (`engine/api/facts.py`); this module only adds the requests,
the values that travel between a judge and a candidate's runner, and the framing.
"""

from __future__ import annotations

import fcntl
import os
import struct
from typing import Union

import msgspec

from .api.facts import (
    STAGES,
    BenchResult,
    Ceilings,
    CompileResult,
    HarnessResult,
    LaunchRecord,
    LoweringResult,
    SpecializeResult,
    TimingResult,
    TimingResults,
    WorkerError,
)
from .task.spec import Task


class Ping(msgspec.Struct, tag="ping"):
    pass


class RunHarness(msgspec.Struct, tag="harness"):
    """Run the correctness stages on a candidate (or on the original when `candidate` is None)."""

    task: Task
    candidate: str | None
    candidate_id: str = "original"
    seed: int = 0
    stages: list[str] = msgspec.field(default_factory=lambda: list(STAGES))
    full_cases: bool = False  # also sweep the full benchmark cases (GPU workers)


class TimeAB(msgspec.Struct, tag="time_ab"):
    """Interleaved A/B timing of the original (A) against a candidate (B) on every benchmark case."""

    task: Task
    candidate: str
    candidate_id: str
    rep_ms: float = 300.0  # timing budget per side and case
    noise_check: bool = True  # also time A against A to measure the noise floor
    seed: int = 0
    cases: list[int] | None = None  # indices of the benchmark cases to time (None: all)
    # more candidates timed in the same interleaving (the final A/B's rivals); then the answer is
    # TimingResults, the candidate's first
    rivals: list[str] = []


class Bench(msgspec.Struct, tag="bench"):
    """Time the original (or a candidate) alone on every benchmark case, against the ceilings."""

    task: Task
    candidate: str | None = None
    rep_ms: float = 300.0
    seed: int = 0
    ceilings: Ceilings | None = None  # to place each case against the device's ceilings


class MeasureCeilings(msgspec.Struct, tag="ceilings"):
    pass


class Specialize(msgspec.Struct, tag="specialize"):
    """Dry-run the entry on every benchmark case and record what it would launch; with `stages`,
    on the small inputs those harness stages check instead (to compile them ahead)."""

    task: Task
    candidate: str | None = None
    seed: int = 0
    stages: list[str] = []


class LowerReference(msgspec.Struct, tag="lower"):
    """torch.compile the task's reference on each case (the benchmark cases on a GPU, the small
    inputs on the CPU) and send back what Inductor wrote. The judge serves it: the reference is
    workspace code, and the judge is where it already runs."""

    task: Task
    seed: int = 0
    modes: list[str] = msgspec.field(default_factory=lambda: ["default"])


class Compile(msgspec.Struct, tag="compile"):
    """Ahead-of-time compile of recorded launches for a target architecture (no GPU needed)."""

    source: str
    file: str
    launches: list[LaunchRecord]
    arch: int = 90
    sass: bool = True
    maxnreg: int | None = None  # cap registers per thread (to see what spilling would cost)


class TensorValue(msgspec.Struct, tag="tensor"):
    dtype: str
    shape: list[int]
    stride: list[int]
    # The storage span the strides cover, little-endian as the device holds it. Decoded as a view
    # into the message's buffer, not a copy: a large case's bytes are copied only onto the device.
    data: memoryview
    device: str = "cpu"
    requires_grad: bool = False


class SeqValue(msgspec.Struct, tag="seq"):
    items: list["Value"]
    tuple: bool = True


class NumValue(msgspec.Struct, tag="num"):
    value: bool | int | float | str | None = None


Value = Union[TensorValue, SeqValue, NumValue]


class RunCandidate(msgspec.Struct, tag="run_candidate"):
    """Run the candidate's entry on a batch of cases, in the runner (the only process that
    imports it), in order, stopping at the first that raises.

    On a GPU every `@triton.autotune` configuration the tuning keeps runs in turn; on the
    interpreter only configuration `turns[i]` for case i (the harness walks them across cases).
    Each configuration runs `repeats` times (3 for the determinism stage)."""

    task: Task
    candidate: str
    cases: list[Value] | None  # each a case's arguments; None: only import the candidate
    repeats: int = 1
    turns: list[int | None] = []
    ghost: bool = False  # every Triton kernel skipped, the rest run as written (`ghost.py`)


class Unchanged(msgspec.Struct, tag="unchanged"):
    """For an argument in a runner's answer: the call left it as the judge sent it (same layout,
    same bits), so its bytes do not travel back."""


class SameOutput(msgspec.Struct, tag="same_output"):
    """For an output in a runner's answer: identical (layout and bits) to the output of an
    earlier run of the same case, `run` (its index in that case's runs): every repeat of the
    determinism stage, and every autotune configuration that computes the same bits."""

    run: int


class CandidateRun(msgspec.Struct):
    """One call of the candidate on one case. Only what the judge does not already hold travels
    in full: a runner is as able to forge a full copy as a marker (the candidate runs in its
    process), and full copies of unchanged inputs and repeated outputs made a large case's full
    verification cost tens of seconds of pipe."""

    config: str  # the autotune configuration ('' when the kernel is not tuned)
    output: Value | SameOutput
    # the arguments as the call left them, one per argument (the judge checks for mutation)
    args_after: list[Value | Unchanged]
    ops: list[str] = []  # PyTorch compute ops outside kernel launches (AuditMode)
    launches: int = 0  # Triton kernel launches the call made
    aliases: list[int] = []  # indices of outputs that share storage with an argument
    # arguments the call pointed at other memory or reshaped in place (`set_`, `resize_`): the
    # caller's tensor was then never written, whatever the argument object reads
    rebound: list[int] = []
    # indices of outputs whose memory the call neither created nor was given: memory the
    # candidate keeps between calls (a memo, a pool of output buffers)
    kept: list[int] = []


class CandidateRuns(msgspec.Struct, tag="candidate_runs"):
    runs: list[list[CandidateRun]]  # per case, up to the one that failed
    failed: "WorkerError | None" = None  # the candidate raised: what
    failed_case: int = 0  # ... and on which case of the batch


class NeedRuns(msgspec.Struct, tag="need_runs"):
    """From the judge to the engine: forward this request to the runner, answer with its result."""

    request: RunCandidate


class RunnerFailed(msgspec.Struct, tag="runner_failed"):
    """From the engine to the judge: the runner died or hung (kind as `WorkerDied.kind`), or
    answered with an error of its own (`ended` False: it still runs)."""

    kind: str
    message: str
    stage: str | None = None
    ended: bool = True


Request = Union[
    Ping,
    RunHarness,
    TimeAB,
    Bench,
    MeasureCeilings,
    Specialize,
    LowerReference,
    Compile,
    RunCandidate,
    CandidateRuns,
    RunnerFailed,
]


class Ready(msgspec.Struct, tag="ready"):
    pid: int
    device: str
    device_name: str
    torch: str
    triton: str
    interpreter: bool


class Progress(msgspec.Struct, tag="progress"):
    stage: str
    detail: str = ""


Answer = Union[
    Ready,
    Progress,
    NeedRuns,
    CandidateRuns,
    HarnessResult,
    TimingResult,
    TimingResults,
    BenchResult,
    Ceilings,
    SpecializeResult,
    LoweringResult,
    CompileResult,
    WorkerError,
]


# What each request may be answered with (a `WorkerError` always may): anything else means the
# worker's code wrote to its answer pipe, and the engine stops trusting that worker.
ANSWERS = {
    Ping: (Ready,),
    RunHarness: (HarnessResult,),
    RunCandidate: (CandidateRuns,),
    TimeAB: (TimingResult, TimingResults),
    Bench: (BenchResult,),
    MeasureCeilings: (Ceilings,),
    Specialize: (SpecializeResult,),
    LowerReference: (LoweringResult,),
    Compile: (CompileResult,),
}


def answers(request, answer) -> bool:
    """Whether `answer` is a possible answer to `request`."""
    return isinstance(answer, WorkerError) or isinstance(answer, ANSWERS.get(type(request), ()))


_encoder = msgspec.msgpack.Encoder()


_request_decoder = msgspec.msgpack.Decoder(Request)


_answer_decoder = msgspec.msgpack.Decoder(Answer)


_HEADER = struct.Struct(">I")


# A judge's cases and a runner's outputs are whole tensors (hundreds of MB on large cases): the
# pipe's default 64 KiB buffer made every megabyte sixteen round trips between the processes.
PIPE_BYTES = 1 << 20


def widen_pipe(fd: int) -> None:
    """Ask for a PIPE_BYTES buffer on the pipe `fd` belongs to (best effort: the system's
    `pipe-max-size` may refuse, and a narrower pipe is only slower)."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (OSError, AttributeError):
        pass


def _read_exact(fd: int, n: int) -> bytearray:
    """`n` bytes into one buffer read in place: collecting chunks and joining them copied every
    byte twice, and `os.read(fd, n)` allocates `n` bytes per call whatever the pipe holds."""
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = os.readv(fd, [view[got:]])
        if not k:
            raise EOFError("pipe closed")
        got += k
    return buf


def write_message(fd: int, message: msgspec.Struct) -> None:
    buf = bytearray(_HEADER.size)
    _encoder.encode_into(message, buf, _HEADER.size)  # the payload after room for its length
    _HEADER.pack_into(buf, 0, len(buf) - _HEADER.size)
    view = memoryview(buf)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def read_request(fd: int) -> Request:
    (n,) = _HEADER.unpack(_read_exact(fd, 4))
    return _request_decoder.decode(_read_exact(fd, n))


def read_answer(fd: int) -> Answer:
    (n,) = _HEADER.unpack(_read_exact(fd, 4))
    return _answer_decoder.decode(_read_exact(fd, n))
