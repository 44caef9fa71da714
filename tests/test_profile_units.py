"""Profiling pieces that need no GPU: Amdahl ranking and mapping, the roofline class, ncu CSV."""

from __future__ import annotations

import msgspec

from kernelbrain.engine.api.facts import CaseBench, Ceilings
from kernelbrain.engine.profile.measured import classify, compiler_findings, measured_findings
from kernelbrain.engine.profile.ncu import parse_csv
from kernelbrain.engine.profile.whole_program import rank, workspace_kernels

from .conftest import REPO


def test_rank_shares_amdahl_and_mapping():
    rows = [
        {"name": "ampere_bf16_gemm", "device_us": 600.0, "calls": 20},
        {"name": "bias_gelu_kernel", "device_us": 300.0, "calls": 10},
        {"name": "row_softmax_kernel", "device_us": 100.0, "calls": 10},
    ]
    kernels = workspace_kernels(REPO / "tests" / "fixtures" / "profile")
    assert set(kernels) == {"bias_gelu_kernel", "row_softmax_kernel"}
    result = rank("model.py", rows, kernels)
    assert [k.name for k in result.kernels] == [
        "ampere_bf16_gemm",
        "bias_gelu_kernel",
        "row_softmax_kernel",
    ]
    gelu = result.kernels[1]
    assert (
        gelu.share == 0.3 and abs(gelu.amdahl - 1 / 0.7) < 1e-12 and gelu.triton and gelu.line == 9
    )
    assert not result.kernels[0].triton and result.kernels[0].file is None


def test_roofline_classes_and_findings():
    ce = Ceilings("H200", 4000.0, 700.0)
    mem = CaseBench("big", 0.5, 0.01, 1_000_000_000, None, 2000.0, None, 0.5, "memory", False)
    mm = CaseBench(
        "mm", 0.4, 0.01, 100_000_000, 137_438_953_472, 250.0, 343.6, 0.49, "compute", False
    )
    tiny = CaseBench("tiny", 0.004, 0.05, 1_000_000, None, 250.0, None, 0.06, "memory", True)
    places = [classify(c, ce) for c in (mem, mm, tiny)]
    assert [(p.bound, round(p.fraction, 2)) for p in places] == [
        ("memory", 0.5),
        ("compute", 0.49),
        ("latency", 0.06),
    ]
    assert [f[0] for f in measured_findings(places)] == ["KB301", "KB302", "KB303"]


def test_a_case_the_compiler_does_better_is_a_kb304_naming_both_times():
    """Only cases where the better torch.compile mode beats the user's kernel beyond timing noise;
    the search's best variant is named where it beats the compiler there."""
    from kernelbrain.engine.api.budget import Budget, Spent
    from kernelbrain.engine.api.results import (
        BaselineCase,
        BudgetReport,
        CandidateCounts,
        CaseValue,
        SearchResult,
        Variant,
    )

    modes = lambda d, m: {"default": d, "max-autotune-no-cudagraphs": m}  # noqa: E731
    baseline = [
        BaselineCase("slow", 100.0, True, compile_us=modes(80.0, 60.0)),
        BaselineCase("noise", 100.0, True, compile_us=modes(98.0, 99.0)),
        BaselineCase("ahead", 50.0, True, compile_us=modes(70.0, 80.0)),
        BaselineCase("untimed", 50.0, True),
    ]
    cases = [CaseValue(b.label, b.time_us, b.time_us / 2, 2.0) for b in baseline]
    variant = Variant("v1", "config", "", 2.0, cases, [], True, "", "")

    def result(variants, best):
        return SearchResult(kernel="k", file="f.py", device="cuda:0", measured=True,
                            baseline=baseline, variants=variants, best=best, time_to_best_s=None,
                            budget=BudgetReport(Budget(), Spent()), candidates=CandidateCounts(),
                            stopped="budget")  # fmt: skip

    (found,) = compiler_findings(result([variant], "v1"))
    assert found[0] == "KB304" and found[1] == "warning"
    assert "slow: 100.0 µs" in found[2] and "(max-autotune-no-cudagraphs) takes 60.0 µs" in found[2]
    assert "1.67× faster" in found[2] and "best variant takes 50.0 µs" in found[2]
    (alone,) = compiler_findings(result([], None))
    assert alone[2].endswith("no variant of the last search beats it there.")


def test_a_reduction_is_held_to_the_read_stream_and_everything_else_to_the_copy():
    """A case that writes at most an eighth of what it reads is placed against the measured read
    stream; one that writes as much as it reads, one whose writes are not known, and any case on
    a device whose read stream was never measured, against the copy."""
    from kernelbrain.engine.profile.roofs import bandwidth_roof

    ce = Ceilings("H200", 4000.0, 700.0, read_gbps=5000.0)
    reduce = CaseBench("ce", 0.1, 0.01, 450_000_000, None, 4500.0, None, None, "memory", False,
                       written=50_000_000)  # fmt: skip
    place = classify(reduce, ce)
    assert round(place.fraction, 2) == 0.9 and "read stream" in place.summary
    assert round(classify(msgspec.structs.replace(reduce, written=None), ce).fraction, 3) == 1.125
    assert classify(reduce, Ceilings("H200", 4000.0, 700.0)).summary.endswith(
        "copy bandwidth (4500 GB/s)"
    )
    assert bandwidth_roof(900, 100, 4000.0, 5000.0).name == "read stream"  # 800 read, 100 written
    assert bandwidth_roof(900, 101, 4000.0, 5000.0).name == "copy"
    assert bandwidth_roof(2, 1, 4000.0, 5000.0) == ("copy", 4000.0)


def test_ncu_csv():
    header = [
        '"ID"',
        '"Kernel Name"',
        '"gpu__time_duration.sum"',
        '"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"',
        '"sm__throughput.avg.pct_of_peak_sustained_elapsed"',
        '"launch__registers_per_thread"',
        '"smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"',
        '"smsp__average_warps_issue_stalled_wait_per_issue_active.ratio"',
        '"smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"',
        '"smsp__average_warps_issue_stalled_selected_per_issue_active.ratio"',
    ]
    units = ['""', '""', '"nsecond"', '"%"', '"%"', '"register/thread"', '""', '""', '""', '""']
    row = [
        '"0"',
        '"softmax_kernel"',
        '"85,600"',
        '"88.5"',
        '"31.2"',
        '"32"',
        '"12.5"',
        '"1.2"',
        '"0.4"',
        '"1"',
    ]
    text = "==PROF== done\n" + "\n".join(",".join(r) for r in (header, units, row)) + "\n"
    (k,) = parse_csv(text)
    assert (
        k.name == "softmax_kernel"
        and k.duration_us == 85.6
        and k.memory_sol_pct == 88.5
        and k.registers == 32
    )
    assert [s[0] for s in k.top_stalls] == ["long_scoreboard", "wait", "barrier"]
