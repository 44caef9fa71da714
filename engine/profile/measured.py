"""The measured view: a case's time against the device's ceilings gives its roofline class and,
where it falls short, a KB3xx diagnostic that says by how much; a case where torch.compile of
the reference beats the kernel as the user has it, a KB304 that says by how much."""

from __future__ import annotations

import msgspec

from ..api.facts import CaseBench, Ceilings
from .roofs import bandwidth_roof

LATENCY_BOUND_US = 10.0  # below this a kernel is dominated by launch and memory latency
# Two kernels timed in one process differ by a few percent from run to run: below this ratio the
# compiler is not said to be faster.
COMPILER_MARGIN = 1.03


class RooflinePlace(msgspec.Struct):
    label: str
    bound: str  # "memory" | "compute" | "latency"
    fraction: float  # of the relevant ceiling
    summary: str


def classify(case: CaseBench, ceilings: Ceilings) -> RooflinePlace:
    us = case.median_ms * 1000
    roof = bandwidth_roof(case.bytes, case.written, ceilings.copy_gbps, ceilings.read_gbps)
    frac = case.gbps / roof.gbps
    if us < LATENCY_BOUND_US:
        return RooflinePlace(
            case.label,
            "latency",
            frac,
            f"latency-bound: {us:.1f} us per call, too short to reach bandwidth "
            f"({case.gbps:.0f} GB/s = {frac:.0%} of {roof.name})",
        )
    if case.bound == "compute" and case.tflops is not None:
        frac = case.tflops / ceilings.bf16_tflops
        return RooflinePlace(
            case.label,
            "compute",
            frac,
            f"compute-bound at {frac:.0%} of the {ceilings.bf16_tflops:.0f} TFLOP/s matmul rate "
            f"({case.tflops:.0f} TFLOP/s)",
        )
    return RooflinePlace(
        case.label,
        "memory",
        frac,
        f"memory-bound at {frac:.0%} of the {roof.gbps:.0f} GB/s {roof.name} bandwidth "
        f"({case.gbps:.0f} GB/s)",
    )


def measured_findings(places: list[RooflinePlace]) -> list[tuple[str, str, str]]:
    """(code, severity, message): KB301 memory-bound far from bandwidth, KB302 compute-bound far
    from the matmul rate, KB303 latency-bound."""
    out = []
    for p in places:
        if p.bound == "memory" and p.fraction < 0.6:
            out.append(
                (
                    "KB301",
                    "warning",
                    f"{p.label}: {p.summary}; a well-written streaming kernel reaches ~90%.",
                )
            )
        elif p.bound == "compute" and p.fraction < 0.5:
            out.append(
                (
                    "KB302",
                    "warning",
                    f"{p.label}: {p.summary}; a tuned Triton matmul reaches ~0.9x cuBLAS.",
                )
            )
        elif p.bound == "latency":
            out.append(
                (
                    "KB303",
                    "information",
                    f"{p.label}: {p.summary}; fuse it with neighbours or batch calls.",
                )
            )
    return out


def roofline(cases: list[CaseBench], ceilings: Ceilings) -> list[str]:
    """Per measured case, its place on the roofline and the KB3xx finding it earns, as a line
    of the LLM's prompt."""
    out = []
    for place in (classify(c, ceilings) for c in cases):
        finding = measured_findings([place])
        out.append(
            f"{finding[0][0]} {finding[0][2]}" if finding else f"{place.label}: {place.summary}"
        )
    return out


def places_from_result(result) -> list[RooflinePlace]:
    """Roofline places of a measured search's baseline (the kernel as the user has it)."""
    if not result.measured or not result.ceilings:
        return []
    ce = Ceilings(
        "device",
        result.ceilings.get("copy_gbps", 0.0),
        result.ceilings.get("bf16_tflops", 0.0),
        read_gbps=result.ceilings.get("read_gbps", 0.0),
    )
    if not ce.copy_gbps:
        return []
    ridge = ce.bf16_tflops * 1e3 / ce.copy_gbps  # FLOP per byte where the two roofs meet
    out = []
    for i, base in enumerate(result.baseline):
        nbytes = result.case_bytes[i] if i < len(result.case_bytes) else 0
        flops = result.case_flops[i] if i < len(result.case_flops) else None
        written = result.case_written_bytes[i] if i < len(result.case_written_bytes) else None
        if not nbytes or not base.time_us:
            continue
        gbps = nbytes / base.time_us / 1e3
        tflops = flops / base.time_us / 1e6 if flops else None
        bound = "compute" if flops and flops / nbytes > ridge / 4 else "memory"
        case = CaseBench(
            base.label,
            base.time_us / 1000,
            0.0,
            nbytes,
            flops,
            gbps,
            tflops,
            None,
            bound,
            False,
            written,
        )
        out.append(classify(case, ce))
    return out


def compiler_findings(result) -> list[tuple[str, str, str]]:
    """(code, severity, message): KB304 per case where torch.compile of the reference (the better
    mode, timed by the search beside the original) is faster than the kernel as the user has it,
    with the search's best variant when it beats the compiler there."""
    out = []
    best = next((v for v in result.variants if v.id == result.best), None)
    for base in result.baseline:
        compiled = base.compiled_best_us()
        if not compiled or not base.time_us or base.time_us <= compiled * COMPILER_MARGIN:
            continue
        mode = min(base.compile_us, key=base.compile_us.get)
        ours = next((c for c in best.per_case if c.label == base.label), None) if best else None
        offer = (
            f"; the search's best variant takes {ours.value_us:.1f} µs there"
            if ours is not None and ours.value_us and ours.value_us < compiled
            else "; no variant of the last search beats it there"
        )
        out.append(
            (
                "KB304",
                "warning",
                f"{base.label}: {base.time_us:.1f} µs, while torch.compile of the reference "
                f"({mode}) takes {compiled:.1f} µs, {base.time_us / compiled:.2f}× faster"
                f"{offer}.",
            )
        )
    return out
