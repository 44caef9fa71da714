"""Facts the engine learns about a kernel: launches, compiled facts, harness verdicts, timings,
the device's ceilings.

Plain msgspec structs, shared by the worker that finds them, the engine that decides with them and
the front ends that show them. They carry no framing: `engine/protocol.py` is the wire format that
carries them between processes, and nothing here imports it.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

STAGES = ("smoke", "sweep", "stability", "determinism", "edge")


# Reasons after which the worker's device context is unusable, or its process changed by a
# candidate (`tampered`): it exits after answering.
FATAL_REASONS = frozenset({"illegal-memory-access", "cuda-error", "tampered"})


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


class KernelConfig(msgspec.Struct):
    """One launch configuration of a compiler-written kernel: its block sizes and warps."""

    kwargs: dict[str, int]
    num_warps: int
    num_stages: int


class LoweredCase(msgspec.Struct):
    """What torch.compile wrote for the reference on one case's arguments.

    `guard`: per positional argument, `["tensor", shape, stride, dtype]` or `["value", repr]`
    (the compiled code holds for exactly these). `inputs`: the argument position each input of
    the compiled code comes from. `output_code`: Inductor's Python module for the graph.
    `configs`: per kernel, the configuration Inductor chose (on a GPU after its own autotuning;
    on the CPU its first heuristic). `outputs`: `"tensor"` or `"tuple:N"`, how the reference
    returns what the compiled code returns. `mode`: the torch.compile mode."""

    text_limits: ClassVar[dict] = {"output_code": 400_000}  # a program, scrubbed but whole

    guard: list[list]
    inputs: list[int]
    output_code: str
    configs: dict[str, KernelConfig]
    outputs: str
    mode: str = "default"
    case: int = 0  # which of the cases asked for


class LoweringResult(msgspec.Struct, tag="lowering_result"):
    """The reference lowered by torch.compile on each case it could be (`declined`: why not,
    per case, in the user's words)."""

    cases: list[LoweredCase]
    declined: list[str] = []
    # torch.compile of the reference, µs per case (in the order asked), per mode; on a GPU only,
    # and where it compiled (None elsewhere): what a user's compiler gives them for free
    compile_us: dict[str, list[float | None]] = {}
