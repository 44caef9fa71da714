"""The result of a search: the stable shape of `kernelbrain optimize --json` (README: CLI)."""

from __future__ import annotations

import math

import msgspec

from .budget import Budget, Spent


class CaseValue(msgspec.Struct):
    label: str
    baseline_us: float
    value_us: float
    speedup: float
    verdict: str | None = None  # measured: "faster" | "slower" | "same"; estimates: None
    p_value: float | None = None


class Variant(msgspec.Struct):
    id: str
    origin: str  # the mutator(s) that made it, e.g. "single-pass+config"
    description: str
    speedup: float  # geometric mean over cases
    per_case: list[CaseValue]
    verified: list[str]  # the harness stages it passed
    measured: bool  # False: the speedup is a cost-model estimate
    diff: str
    explanation: str
    parent: str | None = None
    llm: bool = False
    dispatch: bool = False  # chooses between variants per shape bucket
    source: str = ""
    estimated_speedup: float | None = None  # the static cost model's figure (also on a GPU)
    cases_verified: int = 0  # harness cases it passed (every stage, every size)


class BaselineCase(msgspec.Struct):
    label: str
    time_us: float
    measured: bool
    # torch.compile of the task's reference on this case, µs per mode (`default`,
    # `max-autotune-no-cudagraphs`): measured on a GPU where the search lowered the reference
    compile_us: dict[str, float] = {}

    def compiled_best_us(self) -> float | None:
        """The faster torch.compile mode's time, where one was measured."""
        return min(self.compile_us.values()) if self.compile_us else None


class TrajectoryPoint(msgspec.Struct):
    t: float  # seconds since the search started
    candidate: str
    origin: str
    outcome: str  # "verified" or the rung and reason it stopped at
    speedup: float | None
    best: float  # best verified speedup so far (1.0 = the original)
    gpu_s: float = 0.0  # GPU seconds spent so far
    compiled: int = 0  # candidates compiled so far: the search's work, whatever the machine's load


class CandidateCounts(msgspec.Struct):
    total: int = 0
    per_stage: dict[str, int] = {}  # how many reached each rung
    per_outcome: dict[str, int] = {}  # how each ended


class BudgetReport(msgspec.Struct):
    limits: Budget
    spent: Spent


class SearchResult(msgspec.Struct):
    kernel: str
    file: str
    device: str
    measured: bool  # False on a machine without a GPU: every speedup is an estimate
    baseline: list[BaselineCase]
    variants: list[Variant]
    best: str | None
    time_to_best_s: float | None
    budget: BudgetReport
    candidates: CandidateCounts
    stopped: str
    trajectory: list[TrajectoryPoint] = []
    notes: list[str] = []
    seed: int = 0
    source_hash: str = ""
    case_bytes: list[
        int
    ] = []  # compulsory bytes per case (each tensor once): the roofline's x-axis
    case_flops: list[int | None] = []  # matmul FLOPs per case, where the kernel multiplies matrices
    # of case_bytes, what the kernel writes (None: its stores are not in the source): a case that
    # writes little is held to the read stream, not the copy (profile.roofs)
    case_written_bytes: list[int | None] = []
    # the device model's copy and read bandwidths (GB/s) and bf16 rate (TFLOP/s)
    ceilings: dict[str, float] = {}
    rung_seconds: dict[str, float] = {}  # wall time spent in each rung of the ladder
    # per "rung/harness stage": the worker's seconds in it, of those the seconds in Triton's JIT, and
    # how many harness runs they add up
    stage_seconds: dict[str, list[float]] = {}
    original: str = ""  # the source searched (variants are rebased from it onto later edits)
    entry: str = (
        ""  # the launcher the harness calls (with the kernel, what a variant was verified on)
    )
    # GPU seconds spent when the best was verified: what the coarse-to-fine ladder saves shows
    # here, not in totals that also hold the baseline and the final A/B
    gpu_s_to_best: float | None = None


class SearchEvent(msgspec.Struct):
    """Progress of a running search, for the CLI's progress bar and the editor's progress."""

    kind: str  # "started" | "rung" | "candidate" | "best" | "note" | "finished"
    fraction: float
    message: str
    best_speedup: float | None = None
    best_id: str | None = None
    measured: bool = False


# An estimate this close to 1.0 is within the cost model's own error: no win to show.
ESTIMATE_WIN_MARGIN = 0.01


def is_win(v: Variant) -> bool:
    """A variant worth showing as faster: measured, faster than the original beyond the noise on
    some case and on the geomean; estimated, ahead by more than the model's margin."""
    if v.measured:
        return v.speedup > 1.0 and any(c.verdict == "faster" for c in v.per_case)
    return v.speedup > 1.0 + ESTIMATE_WIN_MARGIN


def against_compiler(result: SearchResult, variant: Variant) -> float | None:
    """How many times faster than torch.compile of the reference (its faster mode) `variant`
    is, geometric mean over the cases; None where torch.compile was not measured on every case."""
    compiled = {c.label: c.compiled_best_us() for c in result.baseline}
    ratios = []
    for c in variant.per_case:
        if compiled.get(c.label) is None or not c.value_us:
            return None
        ratios.append(compiled[c.label] / c.value_us)
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else None
