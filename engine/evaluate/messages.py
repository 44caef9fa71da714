"""Messages between the engine and its evaluation workers (msgspec msgpack, length-prefixed).

The engine sends one request; the worker answers with any number of `Progress` messages and
then exactly one result (or `WorkerError`). Framing: 4-byte big-endian length, then the payload.
"""

from __future__ import annotations

import fcntl
import os
import struct
from typing import Union

import msgspec

from ..task.spec import Task

STAGES = ("smoke", "sweep", "stability", "determinism", "edge")
# Reasons after which the worker's device context is unusable: it exits after answering.
FATAL_REASONS = frozenset({"illegal-memory-access", "cuda-error"})
# Reasons that put the fault in the harness (its reference, inputs or small inputs raise, or the
# reference and the entry disagree on the output's structure), not in the kernel checked.
# Reasons that are not the kernel's fault (exit 2): the harness itself, or the CPU interpreter
# unable to run code that a GPU would (`interpreter_compat.diagnose`).
HARNESS_REASONS = frozenset({"harness-error", "harness-incomplete", "interpreter-gap"})


class Ceilings(msgspec.Struct, tag="ceilings_result"):
    device_name: str
    copy_gbps: float  # device-to-device copy, bytes read + written
    bf16_tflops: float  # cuBLAS bf16 matmul 8192^3
    measured_at: str = ""
    write_gbps: float = 0.0  # a fill of fresh memory, bytes written (0: not measured)
    l2_bytes: int = 0  # the device's L2 cache (0: not known)
    read_gbps: float = 0.0  # a read-only stream, bytes read: a reduction's roof (0: not measured)


# -- requests --------------------------------------------------------------------------------
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


class ArgSpec(msgspec.Struct):
    name: str
    kind: str  # "ptr" | "int" | "float" | "constexpr" | "other"
    dtype: str | None = None  # "bf16", "i32", ... (pointee type for pointers)
    value: int | float | bool | str | None = None
    numel: int = 0
    nbytes: int = 0
    shape: list[int] = []
    aligned: bool = True  # pointers: 16-byte aligned (a view may start mid-line)
    # pointers: which memory, within one case (the storage and the byte offset into it): a
    # tensor passed under two names, as a launcher that reuses its input as an unused output
    # buffer, is the same bytes ('' when unknown)
    memory: str = ""


class LaunchRecord(msgspec.Struct):
    kernel: str
    grid: tuple[int, ...]
    args: list[ArgSpec]
    num_warps: int
    num_stages: int
    config: dict = {}  # the autotune config this record stands for, if any


def compile_key(rec: LaunchRecord) -> str:
    """What the generated code depends on: types, constexprs, warps, stages and each integer's
    divisibility class (1, multiple of 16, other), not its value or any tensor's size."""

    def arg(a: ArgSpec):
        if a.kind == "int" and isinstance(a.value, int):
            return (
                a.name,
                a.dtype,
                "one" if a.value == 1 else "d16" if a.value % 16 == 0 else "any",
            )
        if a.kind == "ptr":
            return (a.name, a.dtype, a.aligned)
        return (a.name, a.kind, a.dtype, a.value if a.kind == "constexpr" else None)

    return repr(
        (
            rec.kernel,
            [arg(a) for a in rec.args],
            rec.num_warps,
            rec.num_stages,
            sorted(rec.config.items()),
        )
    )


class Compile(msgspec.Struct, tag="compile"):
    """Ahead-of-time compile of recorded launches for a target architecture (no GPU needed)."""

    source: str
    file: str
    launches: list[LaunchRecord]
    arch: int = 90
    sass: bool = True
    maxnreg: int | None = None  # cap registers per thread (to see what spilling would cost)


# -- values between the judge and a candidate's runner (see wire.py) --------------------------
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


class CandidateRuns(msgspec.Struct, tag="candidate_runs"):
    runs: list[list[CandidateRun]]  # per case, up to the one that failed
    failed: "WorkerError | None" = None  # the candidate raised: what
    failed_case: int = 0  # ... and on which case of the batch


class NeedRuns(msgspec.Struct, tag="need_runs"):
    """From the judge to the engine: forward this request to the runner, answer with its result."""

    request: RunCandidate


class RunnerFailed(msgspec.Struct, tag="runner_failed"):
    """From the engine to the judge: the runner died or hung (kind as `WorkerDied.kind`)."""

    kind: str
    message: str
    stage: str | None = None


Request = Union[
    Ping,
    RunHarness,
    TimeAB,
    Bench,
    MeasureCeilings,
    Specialize,
    Compile,
    RunCandidate,
    CandidateRuns,
    RunnerFailed,
]


# -- answers ---------------------------------------------------------------------------------
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


class CaseResult(msgspec.Struct):
    stage: str
    label: str
    ok: bool
    reason: str | None = None
    message: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    mismatched: int = 0
    elements: int = 0


class StageResult(msgspec.Struct):
    name: str
    passed: bool
    cases: int = 0
    skipped: int = 0
    message: str = ""
    seconds: float = 0.0  # wall time of the stage in the worker
    jit_seconds: float = 0.0  # ... of which in Triton's JIT (loading or compiling specialisations)


class HarnessResult(msgspec.Struct, tag="harness_result"):
    accepted: bool
    stage: str | None  # the failing stage, or None when accepted
    reason: str | None  # machine-readable reason of the failure
    message: str
    stages: list[StageResult] = []
    cases: list[CaseResult] = []
    torch_ops: list[str] = []  # PyTorch compute ops the candidate ran outside its kernels
    # Bytes of the reference's outputs per benchmark case, by timing label (GPU harnesses): what
    # every timed run must write, known from the judge, never from the candidate's runner.
    output_bytes: dict[str, int] = {}
    notes: list[str] = []  # e.g. how far the original deviates from the reference, and where


class CaseTiming(msgspec.Struct):
    label: str
    baseline_ms: float
    candidate_ms: float
    speedup: float  # baseline / candidate, medians
    ci_low: float  # bootstrap 95% interval of the speedup
    ci_high: float
    p_value: float  # two-sided sign test over paired runs
    noise_floor: float  # relative, from the A/A comparison
    verdict: str  # "faster" | "slower" | "same"
    reps: int
    cuda_graph: bool
    baseline_spread: float = 0.0  # interquartile range / median
    candidate_spread: float = 0.0


class TimingResult(msgspec.Struct, tag="timing_result"):
    cases: list[CaseTiming]
    speedup: float  # geometric mean over cases
    verdict: str
    # set when the timed candidate does not do the task's work: outputs that do not follow its
    # inputs (cached, or captured once and replayed without the work)
    rejection: "WorkerError | None" = None


class TimingResults(msgspec.Struct, tag="timing_results"):
    """A TimeAB with rivals: one result per candidate, in the request's order."""

    results: list[TimingResult]


class CaseBench(msgspec.Struct):
    label: str
    median_ms: float
    spread: float
    bytes: int
    flops: int | None
    gbps: float
    tflops: float | None
    fraction_of_ceiling: float | None
    bound: str  # "memory" | "compute"
    cuda_graph: bool
    written: int | None = None  # of `bytes`, those written (None: not known; profile.roofs)


class BenchResult(msgspec.Struct, tag="bench_result"):
    cases: list[CaseBench]
    ceilings: Ceilings | None


class CaseLaunches(msgspec.Struct):
    label: str
    launches: list[LaunchRecord]
    host_ops: dict[str, int] = {}  # PyTorch ops the launcher ran (allocation, fills, copies, syncs)
    host_bytes: int = 0  # bytes those host-side ops wrote on the device
    entry_args: list[ArgSpec] = []  # the entry's own arguments for this case


class SpecializeResult(msgspec.Struct, tag="specialize_result"):
    cases: list[CaseLaunches]
    device: str  # "meta" (shapes only), "cpu" (real tensors were needed) or "none"
    error: str | None = None


class CompiledFacts(msgspec.Struct):
    """What the compiler says about one specialisation of a kernel."""

    kernel: str
    ok: bool
    error: str | None = None
    n_regs: int | None = None
    n_spills: int | None = None  # bytes of spill stores (ptxas)
    shared_bytes: int | None = None
    local_bytes: int | None = None  # stack frame per thread
    num_warps: int = 4
    num_stages: int = 3
    global_load_bits: dict[str, int] = {}  # width in bits -> count of LDG instructions
    global_store_bits: dict[str, int] = {}
    tensor_core_ops: int = 0  # HGMMA/HMMA/IMMA instructions
    local_memory_ops: int = 0  # LDL/STL instructions (spill traffic)
    instructions: int = (
        0  # SASS instructions (NOPs left out): a loop-free kernel's per-thread stream
    )
    loop_instructions: int = 0  # ... of those, the ones inside loops (the hover shows both)
    occupancy: float | None = None  # theoretical: resident warps / 64 per SM
    compile_s: float = 0.0


class CompileResult(msgspec.Struct, tag="compile_result"):
    facts: list[CompiledFacts]


class WorkerError(msgspec.Struct, tag="error"):
    reason: str
    message: str
    traceback: str = ""


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
