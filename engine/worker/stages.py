"""The five correctness stages: which inputs each checks, and the determinism stage's own check.

smoke (the small cases), sweep (every benchmark case on a GPU, plus odd sizes around the block
sizes, primes and one row), stability (large, small, mixed magnitudes and ±inf, at a looser
tolerance), determinism (three bitwise-equal runs, unless the original is not deterministic
either) and edge (strided, rows apart and column-major inputs and size-1 dimensions, where the
original accepts them). The sweep also draws sizes per verification, and the sweep and the
stability stage take the first small case in float32 too. Each stage draws fresh inputs from its own seed.
"""

from __future__ import annotations

from typing import Callable

from ..api.facts import CaseResult
from ..protocol import RunHarness
from ..task.spec import Task
from . import shapes
from .cases import CaseSource, stage_seed
from .compare import bitwise_equal
from .failures import HarnessFailure

STABILITY_KINDS = ("large", "small", "mixed", "neg-inf", "pos-inf")
STABILITY_SCALE = 10.0  # tolerance multiplier for the stability stage


def stage_inputs(
    cases: CaseSource,
    task: Task,
    stage: str,
    seed: int,
    full_cases: bool,
    writes: Callable[[], set[int]] = set,
    entry: Callable | None = None,
):
    """Every input a stage checks, lazily, as (label, args, check options). The stages run
    them; a dry run records what they would launch, so the search can compile their
    specialisations ahead of time on the CPU (`Specialize.stages`). `full_cases`: the sweep
    and determinism stages check the benchmark cases too (GPU workers). `writes`: the arguments
    the original is known to write by then (the edge stage zeroes them). `entry`: the
    original's, whose defaulted float parameters the sweep passes changed (`other_floats`)."""
    if stage == "smoke":
        for i, args in enumerate(cases.small("smoke")):
            yield f"small case {i}", args, {}
    elif stage == "sweep":
        if full_cases:
            full = cases.full("sweep")
            for i, (args, name) in enumerate(zip(full, shapes.case_labels(task, full))):
                yield f"case {i}", args, {"timing_label": name}
        blocks = cases.block_sizes()
        small = cases.small("sweep")
        for i, args in enumerate(small):
            yield f"small case {i}", args, {}
            swapped = shapes.other_half_precision(args)
            if swapped is not None:  # the other half precision (bf16 benchmarks, fp16 small)
                yield f"small case {i} in the other half precision", swapped, {"derived": True}
            wider = shapes.in_float32(args) if i == 0 else None
            if wider is not None:
                yield f"small case {i} in float32", wider, {"derived": True}
            floats = shapes.other_floats(args, entry) if i == 0 else None
            if floats is not None:
                yield f"small case {i} with other float arguments", floats, {"derived": True}
            others = small[:i] + small[i + 1 :]
            made = shapes.odd_sizes(args, blocks, stage_seed(seed, f"sweep{i}"), others=others)
            made = shapes.unpredictable_sizes(args, blocks, others) + made
            for label, variant in made:
                yield f"small case {i} size {label}", variant, {"derived": True}
    elif stage == "stability":
        for i, args in enumerate(cases.small("stability")[:2]):
            for kind in STABILITY_KINDS:
                yield (
                    f"small case {i} {kind}",
                    shapes.scaled(args, kind, i),
                    {"scale": STABILITY_SCALE},
                )
            wider = shapes.in_float32(args) if i == 0 else None
            if wider is not None:  # large values where float32 has the range to overflow
                yield (
                    f"small case {i} large in float32",
                    shapes.scaled(wider, "large", i),
                    {"scale": STABILITY_SCALE},
                )
    elif stage == "determinism":
        drawn = cases.full("determinism") if full_cases else cases.small("determinism")
        yield "3 runs", drawn[0], {}
    elif stage == "edge":
        small = cases.small("edge")
        for i, args in enumerate(small):
            variants = [
                ("strided", shapes.non_contiguous(args)),
                ("rows apart", shapes.padded_rows(args)),
                ("column-major", shapes.transposed(args)),
            ]
            others = small[:i] + small[i + 1 :]
            variants += shapes.size_one(args, stage_seed(seed, f"edge{i}"), others)
            written = sorted(writes())
            if written:  # fresh zeroed outputs, a new sequence's zero state
                variants.append(("written arguments zeroed", shapes.zeroed(args, written)))
            for label, variant in variants:
                if variant is not None:
                    yield f"small case {i} {label}", variant, {"only_if_original_ok": True}
    else:
        raise ValueError(f"unknown stage {stage!r}")


def check_determinism(
    runs: list, args, run_original: Callable[[tuple], object], results: Callable[[object], object]
) -> CaseResult:
    """Three runs per configuration (`runs`, in trios) must give the same bits in every
    result (`results` of a run: what it returned and the arguments it wrote), unless the
    original's three runs (`run_original`) differ too; raises HarnessFailure otherwise."""
    differ = ""
    for i in range(0, len(runs), 3):
        trio = [results(r) for r in runs[i : i + 3]]
        if not all(bitwise_equal(trio[0], r) for r in trio[1:]):
            config = runs[i].config
            differ = f" (autotune config {config})" if config else ""
            break
    else:
        return CaseResult("determinism", "3 runs", True, message="bitwise identical")
    originals = [results(run_original(args)) for _ in range(3)]
    if not all(bitwise_equal(originals[0], r) for r in originals[1:]):
        return CaseResult(
            "determinism", "3 runs", True, message="differs between runs, as the original does"
        )
    case = CaseResult(
        "determinism", "3 runs", False, "nondeterministic", "outputs differ between identical runs"
    )
    raise HarnessFailure(
        "nondeterministic",
        f"determinism stage ({shapes.describe(args)}{differ}): three runs on "
        "the same inputs gave different bits, while the original is "
        "deterministic",
        case,
    )


def unchecked(req: RunHarness) -> list[str]:
    """What a verdict on a candidate did not see: off a GPU the stages run the small inputs and
    sizes made from them, never the benchmark cases, so code that branches on larger sizes is
    unjudged there (a candidate gated on the benchmark shapes passes on the CPU)."""
    if req.full_cases or req.candidate is None or "sweep" not in req.stages:
        return []
    return [
        "the benchmark cases themselves were not run (off a GPU the stages check the small "
        "inputs and sizes made from them): code that branches on larger sizes is verified "
        "only on a GPU"
    ]
