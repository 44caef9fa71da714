"""Evaluation on a real GPU: harness on full cases, A/B timing verdicts, device-fatal candidates."""

from __future__ import annotations

import pytest

from kernelbrain.engine import protocol as m
from kernelbrain.engine.api import facts
from kernelbrain.engine.evaluate.verify import bench, run_harness, verify
from kernelbrain.engine.task import find_task

from ..adversarial.attacks import AUTOTUNED, BASE, CORRECT, SOURCE
from .slowdowns import EXAMPLES, identical_copy, illegal_address, slowed_softmax

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("op", ["gelu", "softmax", "rmsnorm", "col_sum", "cross_entropy", "matmul"])
def test_example_passes_its_harness_on_gpu(pool, op):
    result = run_harness(
        pool, find_task(EXAMPLES / "ops" / f"{op}.py", f"{op}_kernel"), None, "cuda:0"
    )
    assert result.accepted, result.message
    full = [c for c in result.cases if c.stage == "sweep" and c.label.startswith("case ")]
    assert len(full) == 3  # every benchmark case at its real size


def test_every_autotune_config_is_checked_on_every_case(pool):
    """On a GPU the harness runs each case once per configuration of a tuned kernel, none of them
    timed: a configuration the tuner would never pick on this GPU can be picked on another."""
    task = find_task(BASE, "softmax_kernel")
    wrong = run_harness(pool, task, AUTOTUNED, "cuda:0")
    assert not wrong.accepted and "autotune config BLOCK=128" in wrong.message, wrong.message
    right = run_harness(pool, task, AUTOTUNED.replace('"BLOCK": 128', '"BLOCK": 8192'), "cuda:0")
    assert right.accepted, right.message
    per_case: dict[str, set[str]] = {}
    for c in right.cases:
        if "autotune config" in c.label:
            case, config = c.label.split(" with autotune config ")
            per_case.setdefault(case, set()).add(config.split(",")[0])
    assert per_case and all(
        configs == {"BLOCK=4096", "BLOCK=8192"} for configs in per_case.values()
    ), per_case
    report = verify(pool, task, AUTOTUNED.replace('"BLOCK": 128', '"BLOCK": 8192'), "cuda:0")
    assert report.timing is not None and report.timing.cases, (
        report.message
    )  # timing tunes for real


def test_identical_copy_is_not_significantly_different(pool):
    task = find_task(EXAMPLES / "ops" / "softmax.py", "softmax_kernel")
    report = verify(pool, task, identical_copy(open(task.file).read()), "cuda:0")
    assert report.accepted, report.message
    assert report.timing.verdict == "same", report.timing
    assert all(0.95 < c.speedup < 1.05 for c in report.timing.cases)


def test_slowed_copy_is_reported_slower(pool):
    task = find_task(EXAMPLES / "ops" / "softmax.py", "softmax_kernel")
    report = verify(pool, task, slowed_softmax(open(task.file).read()), "cuda:0")
    assert report.accepted, report.message
    assert report.timing.verdict == "slower", report.timing
    assert all(c.verdict == "slower" and c.p_value < 0.01 for c in report.timing.cases)
    assert 0.70 < report.timing.speedup < 0.97


def test_rivals_are_timed_in_one_interleaving(pool):
    """The final A/B times its contenders together against one baseline: each still gets its
    own verdict (an identical copy "same", the slowed copy "slower")."""
    task = find_task(EXAMPLES / "ops" / "softmax.py", "softmax_kernel")
    source = open(task.file).read()
    request = m.TimeAB(
        task, identical_copy(source), "same", rep_ms=150.0, rivals=[slowed_softmax(source)]
    )
    answer = pool.call("cuda:0", request, 600.0)
    assert isinstance(answer, facts.TimingResults), answer
    same, slowed = answer.results
    assert same.verdict == "same" and all(0.95 < c.speedup < 1.05 for c in same.cases), same
    assert slowed.verdict == "slower" and all(c.verdict == "slower" for c in slowed.cases), slowed


def test_illegal_address_kills_only_its_worker(pool):
    task = find_task(BASE, "softmax_kernel")
    report = verify(pool, task, illegal_address(SOURCE), "cuda:0", timing=False)
    assert (report.accepted, report.reason) == (False, "illegal-memory-access"), report.message
    again = verify(pool, task, CORRECT, "cuda:0", timing=False)
    assert again.accepted, again.message


def test_timing_a_host_syncing_entry_leaves_the_worker_usable(pool):
    """cross_entropy's launcher calls `.item()`: its short case cannot be replayed from a CUDA
    graph. Finding that out must not leave the worker's random generator broken: a failed capture
    made every later harness in that worker fail on `torch.randn` (H200, 2026-11-30)."""
    task = find_task(EXAMPLES / "ops" / "cross_entropy.py", "cross_entropy_kernel")
    timed = bench(pool, task, "cuda:0")
    assert not any(c.cuda_graph for c in timed.cases)  # a host sync: timed eagerly
    result = run_harness(pool, task, None, "cuda:0")
    assert result.accepted, result.message


def test_bench_places_cases_against_ceilings(pool):
    task = find_task(EXAMPLES / "ops" / "gelu.py", "gelu_kernel")
    result = bench(pool, task, "cuda:0")
    assert result.ceilings is not None and result.ceilings.copy_gbps > 1000
    for case in result.cases:
        assert case.bound == "memory" and 0 < case.fraction_of_ceiling < 1.2
        assert abs(case.gbps - case.bytes / case.median_ms / 1e6) < 1e-6 * case.gbps


def test_the_read_stream_is_measured_beside_the_copy(pool, tmp_path):
    """The reductions' roof: a read-only stream over 1 GiB, in bytes read per second. DRAM reads
    alone at about the copy's rate or faster; a figure off by the word size (elements counted
    as bytes) or a stream that never ran lands outside these bounds."""
    from kernelbrain.engine.evaluate.ceilings import CeilingCache

    ce = CeilingCache(tmp_path / "ceilings.json").get_or_measure(pool, "cuda:0")
    assert ce is not None and ce.copy_gbps > 1000
    assert 0.7 * ce.copy_gbps < ce.read_gbps < 1.6 * ce.copy_gbps, ce
