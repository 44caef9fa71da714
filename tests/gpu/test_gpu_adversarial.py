"""Attacks on the verdict, on the H200: cached outputs, zeros above a width, the input returned as
the output; an honest faster variant is still accepted with a measured speedup."""

from __future__ import annotations

import shutil

import msgspec
import pytest

from kernelbrain.engine import protocol as m
from kernelbrain.engine.api import facts
from kernelbrain.engine.evaluate.ceilings import CeilingCache
from kernelbrain.engine.evaluate.verify import run_harness, time_ab, verify
from kernelbrain.engine.evaluate.work_floor import WorkFloor
from kernelbrain.engine.task import find_task

from ..adversarial.attacks import ATTACKS, BASE, RETURN, edit
from .slowdowns import EXAMPLES, slowed_softmax

pytestmark = pytest.mark.gpu

# Caches its output by input pointer: every harness case is a fresh tensor, so the cache only hits
# where the same arguments come back, as they do in timing.
CACHED_BY_POINTER = edit(
    ("def softmax(x):\n", "_SEEN = {}\n\n\ndef softmax(x):\n"),
    (
        "    out = torch.empty_like(x)\n",
        "    key = (x.data_ptr(), tuple(x.shape))\n    if key in _SEEN:\n        return _SEEN[key]\n"
        "    out = torch.empty_like(x)\n",
    ),
    (RETURN, "    _SEEN[key] = out\n" + RETURN),
)
ZEROS_ABOVE_A_WIDTH = edit(
    (RETURN, "    if n_cols > 2048:\n        return torch.zeros_like(x)\n" + RETURN)
)


@pytest.fixture(scope="module")
def task():
    return find_task(BASE, "softmax_kernel")


def test_verdict_attacks_are_rejected_on_the_gpu(pool, task):
    for name in ("output cached in a module dict", "output cached on the input tensor"):
        report = verify(pool, task, ATTACKS[name].source, "cuda:0")
        assert (report.accepted, report.stage, report.reason) == (False, "gate", "stateful")
    # the benchmark widths (4096) are checked on the GPU: zeros are caught there
    report = verify(pool, task, ZEROS_ABOVE_A_WIDTH, "cuda:0")
    assert (report.accepted, report.stage) == (False, "sweep"), report.message
    assert report.reason == "mismatch" and "case 1" in report.message
    report = verify(pool, task, ATTACKS["result written into the input"].source, "cuda:0")
    assert (report.accepted, report.reason) == (False, "mutated-input"), report.message
    # past the gate, a forged verdict still fails in the judge
    forged = run_harness(
        pool, task, ATTACKS["forged harness verdict on the answer pipe"].source, "cuda:0"
    )
    assert (forged.accepted, forged.reason) == (False, "protocol")


def test_cached_output_is_caught_by_timing_past_the_gate(pool, task):
    """Past the gate, timing itself catches a cached result: after the timed runs the inputs
    change in place and the timed runner (graph replay or call) must follow them."""
    gate = verify(pool, task, CACHED_BY_POINTER, "cuda:0")
    assert (gate.stage, gate.reason) == ("gate", "forbidden-attribute")  # `.data_ptr()`
    answer = pool.call("cuda:0", m.TimeAB(task, CACHED_BY_POINTER, "cached", rep_ms=100.0), 600.0)
    assert isinstance(answer, facts.TimingResult), answer
    assert answer.rejection is not None and answer.rejection.reason == "stale-output", answer
    honest = pool.call(
        "cuda:0",
        m.TimeAB(task, ATTACKS["wrong values"].source.replace("* 1.01", ""), "same", rep_ms=100.0),
        600.0,
    )
    assert honest.rejection is None, honest.rejection


def test_honest_faster_variant_is_accepted_with_a_measured_speedup(pool, tmp_path):
    """A workspace whose kernel does ~10% extra work; the plain kernel is an honest faster
    variant: the judge accepts it and timing measures the gain."""
    workspace = tmp_path / "examples"
    shutil.copytree(
        EXAMPLES, workspace, ignore=shutil.ignore_patterns(".kernelbrain", "__pycache__")
    )
    path = workspace / "ops" / "softmax.py"
    fast = path.read_text()
    path.write_text(slowed_softmax(fast))
    report = verify(pool, find_task(path, "softmax_kernel"), fast, "cuda:0")
    assert report.accepted, report.message
    assert report.timing is not None and report.timing.verdict == "faster", report.timing
    assert 1.03 < report.timing.speedup < 1.5


def test_the_work_floor_is_measured_by_the_judge_and_honest_timings_clear_it(pool, tmp_path):
    """The judge knows what each benchmark case writes and the device's fill rate and L2; an
    honest timing of the bundled softmax (outputs of 128 and 64 MB, beyond the L2) clears the
    floor, and the same timing with the candidate's time cut tenfold does not."""
    task = find_task(EXAMPLES / "ops" / "softmax.py", "softmax_kernel")
    harness = run_harness(pool, task, None, "cuda:0")
    assert harness.accepted, harness.message
    ceilings = CeilingCache(tmp_path / "ceilings.json").get_or_measure(pool, "cuda:0")
    assert ceilings is not None and ceilings.write_gbps > 1000 and ceilings.l2_bytes > 10**7
    floor = WorkFloor.of(harness, ceilings)
    assert floor is not None
    assert sorted(floor.output_bytes.values()) == [
        4096 * 1024 * 2,
        1024 * 32768 * 2,
        16384 * 4096 * 2,
    ]
    source = (EXAMPLES / "ops" / "softmax.py").read_text()
    timing = time_ab(pool, "cuda:0", m.TimeAB(task, source, "same", rep_ms=100.0))
    assert isinstance(timing, facts.TimingResult) and timing.rejection is None, timing
    assert sum(floor.min_ms(c.label) > 0 for c in timing.cases) == 2  # the two beyond the L2
    assert floor.held(timing).rejection is None, [(c.label, c.candidate_ms) for c in timing.cases]
    cut = facts.TimingResult(
        [msgspec.structs.replace(c, candidate_ms=c.candidate_ms / 10) for c in timing.cases],
        timing.speedup * 10,
        "faster",
    )
    forged = floor.held(cut)
    assert forged.rejection is not None and forged.rejection.reason == "less-work"
