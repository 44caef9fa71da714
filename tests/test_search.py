"""The search on the CPU: determinism, resuming from the store, cancellation, budgets, dispatch."""

from __future__ import annotations

import re
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernelbrain.engine.api.budget import Budget, parse_duration
from kernelbrain.engine.api.facts import ArgSpec, CaseLaunches
from kernelbrain.engine.evaluate.pool import WorkerPool
from kernelbrain.engine.evaluate.verify import verify
from kernelbrain.engine.mutate import MutationContext, load_mutators
from kernelbrain.engine.search import selection
from kernelbrain.engine.search import shape_dispatch as dispatch
from kernelbrain.engine.search.driver import Search
from kernelbrain.engine.store import Store
from kernelbrain.engine.task import find_task

from .conftest import EXAMPLES


def workspace(tmp_path: Path) -> Path:
    shutil.copytree(
        EXAMPLES, tmp_path / "ws", ignore=shutil.ignore_patterns(".kernelbrain", "__pycache__")
    )
    return tmp_path / "ws"


def run(pool, ws: Path, op: str, candidates: int, seed: int = 0, **kw):
    task = find_task(ws / "ops" / f"{op}.py", f"{op}_kernel")
    search = Search(
        task,
        device="cpu",
        budget=Budget(wall_s=600, max_candidates=candidates),
        store=Store(ws),
        pool=pool,
        seed=seed,
        compile_workers=2,
        **kw,
    )
    return search.run()


def softmax_search(ws: Path, pool: WorkerPool, device: str = "cuda:0", **kw) -> Search:
    """A 60 s search of the bundled softmax in workspace `ws`, not started: what the tests of
    the end game and the timing pieces build on."""
    return Search(
        find_task(ws / "ops" / "softmax.py", "softmax_kernel"),
        device=device,
        budget=Budget(wall_s=60),
        store=Store(ws),
        pool=pool,
        **kw,
    )


def test_parse_duration():
    assert (
        parse_duration("90s") == 90
        and parse_duration("5m") == 300
        and parse_duration("1h30m") == 5400
    )
    assert parse_duration("2m30s") == 150 and parse_duration("45") == 45
    for bad in ("", "soon", "-5m", "0s"):
        with pytest.raises(ValueError):
            parse_duration(bad)


@pytest.mark.slow
def test_same_seed_same_result_and_resume(pool, tmp_path):
    # Two searches side by side, each with its own workers: same seed, same result, whatever
    # the other one does to the machine's time.
    with WorkerPool() as other, ThreadPoolExecutor(max_workers=2) as ex:
        a, b = ex.map(
            lambda p, name: run(p, workspace(tmp_path / name), "gelu", 5), (pool, other), "ab"
        )
    assert a.variants, a.candidates
    assert [(v.id, round(v.speedup, 6)) for v in a.variants] == [
        (v.id, round(v.speedup, 6)) for v in b.variants
    ]
    assert a.best == b.best and a.measured is False and all(not v.measured for v in a.variants)
    assert a.candidates.per_stage == b.candidates.per_stage
    assert {"baseline", "compile", "smoke", "full"} <= set(a.rung_seconds)  # where the budget went
    # the trajectory's best so far counts each point's own verdict: the best's point shows it
    best_point = next(p for p in a.trajectory if p.candidate == a.best)
    assert best_point.best == pytest.approx(best_point.speedup), a.trajectory
    assert all(q.best <= best_point.best for q in a.trajectory[: a.trajectory.index(best_point)])
    # Resume: the same workspace again finds the verified variants in the store and goes on from them.
    ws = tmp_path / "a" / "ws"
    again = run(pool, ws, "gelu", 5)
    assert any("resumed" in n for n in again.notes)
    assert {v.id for v in a.variants} <= {v.id for v in again.variants}
    assert not {v.id for v in a.variants} & {
        p.candidate for p in again.trajectory
    }  # not evaluated twice
    assert again.best is not None


def test_cancel_stops_promptly_and_keeps_what_was_verified(pool, tmp_path):
    cancel = threading.Event()
    events = []

    def on_event(e):
        events.append(e)
        if e.kind == "candidate":
            cancel.set()  # stop after the first verified variant

    result = run(pool, workspace(tmp_path), "gelu", 40, on_event=on_event, cancel=cancel)
    assert result.stopped == "cancelled"
    assert len(result.variants) >= 1
    assert events[0].kind == "started" and events[-1].kind == "finished"
    store = Store(tmp_path / "ws")
    assert store.latest_result(result.file, result.kernel)["status"] == "cancelled"


def test_candidate_budget_is_respected(pool, tmp_path):
    result = run(pool, workspace(tmp_path), "softmax", 3)
    assert (
        result.budget.spent.candidates <= 3 + 1
    )  # +1: a dispatching variant may be verified at the end
    assert result.stopped.startswith("budget: candidates")


def test_dispatch_variant_is_correct_on_both_sides(pool):
    task = find_task(EXAMPLES / "ops" / "softmax.py", "softmax_kernel")
    source = open(task.file).read()
    muts = load_mutators()
    a = next(
        m
        for m in muts["config"].propose(MutationContext(task, source))
        if m.knobs.get("num_warps") == 8
    )
    b = muts["single-pass"].propose(MutationContext(task, source)).__next__()
    cases = [
        CaseLaunches(
            str(s), [], entry_args=[ArgSpec("arg0", "ptr", shape=list(s), numel=s[0] * s[1])]
        )
        for s in [(5, 33), (3, 1500)]
    ]
    choice = dispatch.best_split(cases, {"a": [1.3, 1.0], "b": [1.0, 1.4]}, ["x"])
    assert choice is not None and choice.variants == ("a", "b")
    assert choice.feature == "{0}.shape[-1]" and choice.thresholds == (33,)
    merged = dispatch.build(
        [a.source, b.source], task.kernel, task.entry, choice.feature, choice.thresholds
    )
    assert "def softmax_bucket1(" in merged and "def softmax_kernel_bucket1(" in merged
    assert "if x.shape[-1] > 33:" in merged
    report = verify(pool, task, merged, "cpu")
    assert report.accepted, report.message


def test_dispatch_split_is_scored_on_every_case_not_on_per_case_winners():
    """Per-case speedups of an H200 softmax search: `a` wins 32768-wide rows, `b` 4096-wide ones,
    and they tie (within 0.1%) on 1024. Picking each case's winner first sent the 4096-wide rows to
    `a` (1.00x there instead of 1.21x); scoring every split on all cases does not."""
    shapes = [(16384, 4096), (4096, 1024), (1024, 32768)]
    cases = [
        CaseLaunches(
            str(s), [], entry_args=[ArgSpec("arg0", "ptr", shape=list(s), numel=s[0] * s[1])]
        )
        for s in shapes
    ]
    speedups = {"a": [1.00, 1.190, 1.58], "b": [1.21, 1.191, 1.26], "c": [1.21, 1.18, 1.26]}
    choice = dispatch.best_split(cases, speedups, ["x"])
    assert choice is not None and choice.variants == ("b", "a")
    assert (choice.feature, choice.thresholds) == ("{0}.shape[-1]", (4096,))
    assert choice.speedup == pytest.approx((1.21 * 1.191 * 1.58) ** (1 / 3))
    # no split is worth a dispatch when one variant is within the margin everywhere
    assert dispatch.best_split(cases, {"a": [1.2, 1.2, 1.2], "b": [1.205, 1.2, 1.2]}, ["x"]) is None


def test_dispatch_gives_a_middle_size_its_own_bucket(pool):
    """Run AG's col_sum tilings (H200, structure probe): one program per column strip wins the
    middle shape (16384x4096, 2.87x) and loses both others to the coarsened atomics, so no single
    threshold separates the winners; three buckets do, and the middle one is guarded on both
    sides. A third bucket that gains less than the margin over two is not taken."""
    shapes = [(16384, 4096), (65536, 1024), (1024, 65536)]
    cases = [
        CaseLaunches(
            str(s), [], entry_args=[ArgSpec("arg0", "ptr", shape=list(s), numel=s[0] * s[1])]
        )
        for s in shapes
    ]
    speedups = {"atomics": [2.69, 2.70, 2.61], "own": [2.87, 0.85, 2.30]}
    choice = dispatch.best_split(cases, speedups, ["x"])
    assert choice is not None and choice.variants == ("atomics", "own", "atomics")
    assert choice.feature == "{0}.shape[-1]" and choice.thresholds == (1024, 4096)
    assert choice.speedup == pytest.approx((2.87 * 2.70 * 2.61) ** (1 / 3))
    assert [dispatch.bucket_index(s[1], choice.thresholds) for s in shapes] == [1, 0, 2]
    assert (
        dispatch.best_split(
            cases, {"atomics": [2.69, 2.70, 2.61], "own": [2.70, 0.85, 2.30]}, ["x"]
        )
        is None
    )

    task = find_task(EXAMPLES / "ops" / "col_sum.py", "col_sum_kernel")
    source = open(task.file).read()
    muts = load_mutators()
    own = next(iter(muts["own-columns"].propose(MutationContext(task, source))))
    wide = next(
        p
        for p in muts["config"].propose(MutationContext(task, source))
        if p.knobs.get("num_warps") == 8
    )
    merged = dispatch.build(
        [source, own.source, wide.source], task.kernel, task.entry, "{0}.shape[-1]", (33, 200)
    )
    assert "if 33 < x.shape[-1] <= 200:" in merged and "if x.shape[-1] > 200:" in merged
    assert (
        "def col_sum_kernel_bucket1(" in merged and "def col_sum_kernel_bucket2(" not in merged
    )  # same kernel
    # the small cases (70x33, 5x130) take buckets 0 and 1 (own columns): both pass the harness
    report = verify(pool, task, merged, "cpu")
    assert report.accepted, report.message


def test_final_ab_covers_the_best_and_its_closest_rivals(pool, tmp_path):
    """Which variants the final A/B re-times: the best and its two closest measured rivals that
    were faster than the original, however far behind (an H200 search's best timed 1.56x, then
    1.41x in its final A/B, behind a rival at 1.51x; another's timed 2.67x, then 1.88x, and its
    rivals at 2.37x, 11% behind, were not re-timed)."""
    from kernelbrain.engine.api.facts import TimingResult
    from kernelbrain.engine.search.node import Node

    ws = workspace(tmp_path)
    search = softmax_search(ws, pool)
    for name, speedup, verdict in [
        ("best", 1.56, "faster"),
        ("a", 1.51, "faster"),
        ("b", 1.45, "faster"),
        ("c", 1.43, "faster"),
        ("d", 1.55, "same"),
        ("e", 1.30, "faster"),
    ]:
        node = Node(name, "", name, "", None, outcome="verified")
        node.timing = TimingResult([], speedup, verdict)
        search.population.nodes[name] = node
    search.population.best_id, search.population.best_speedup = "best", 1.56
    assert [n.id for n in search.endgame.final_contenders()] == ["best", "a", "b"]
    search.population.nodes["best"].timing = TimingResult(
        [], 2.67, "faster"
    )  # an outlier far ahead
    search.population.best_speedup = 2.67
    assert [n.id for n in search.endgame.final_contenders()] == ["best", "a", "b"]


def test_speedups_from_separate_ab_runs_are_taken_against_one_reference(pool, tmp_path):
    """An original that syncs with the host times differently in each A/B (H200 cross_entropy:
    187-239 us): the candidates are ranked by their own times, against the original's reference
    timing from before the search, and each A/B's verdict stands."""
    from kernelbrain.engine.api.facts import CaseTiming, TimingResult

    ws = workspace(tmp_path)
    search = softmax_search(ws, pool)
    search.population.labels, search.population.baseline_us = ["big", "small"], [187.0, 50.0]

    def ab(base_ms, cand_ms, verdict="faster"):
        cases = [
            CaseTiming(
                label, b, c, b / c, b / c * 0.9, b / c * 1.1, 0.0, 0.01, "faster", 100, False
            )
            for label, b, c in zip(search.population.labels, base_ms, cand_ms)
        ]
        return TimingResult(
            cases, (base_ms[0] / cand_ms[0] * base_ms[1] / cand_ms[1]) ** 0.5, verdict
        )

    slower = ab([0.260, 0.050], [0.095, 0.025])  # timed beside a slow run of the original
    faster = ab([0.200, 0.050], [0.090, 0.025], "mixed")
    assert slower.speedup > faster.speedup  # the raw speedups rank them the wrong way round
    r_slower, r_faster = search.population.rebased(slower), search.population.rebased(faster)
    assert r_faster.speedup > r_slower.speedup
    assert r_faster.speedup == pytest.approx((187 / 90 * 50 / 25) ** 0.5)
    big = r_faster.cases[0]
    assert (big.baseline_ms, big.candidate_ms, big.verdict) == (
        pytest.approx(0.187),
        0.090,
        "faster",
    )
    assert (big.ci_low, big.ci_high) == (
        pytest.approx(187 / 90 * 0.9),
        pytest.approx(187 / 90 * 1.1),
    )
    assert r_faster.verdict == "mixed"
    # a case the reference does not know (a timing from another set of cases) is left as it was
    other = TimingResult(
        [CaseTiming("other", 0.2, 0.1, 2.0, 1.9, 2.1, 0.0, 0.01, "faster", 10, False)],
        2.0,
        "faster",
    )
    assert search.population.rebased(other) is other


def test_final_ab_keeps_the_simpler_of_variants_tied_within_noise(pool, tmp_path):
    """Two variants whose final speedups differ by less than their noise floor are a tie; the
    simpler diff stands (H200 rmsnorm: a dispatch at 1.1661x, an ingredient at 1.1654x). A gap
    above the floor still goes to the faster one."""
    from kernelbrain.engine.api.facts import CaseTiming, TimingResult
    from kernelbrain.engine.search.node import Node

    ws = workspace(tmp_path)
    search = softmax_search(ws, pool)
    lines = search.original.splitlines()

    def node(name, speedup, changed, dispatch=False):
        n = Node(
            name,
            "\n".join([f"# {name} {i}" for i in range(changed)] + lines),
            name,
            "",
            "original",
            dispatch=dispatch,
            outcome="verified",
        )
        n.timing = TimingResult(
            [
                CaseTiming(
                    "c",
                    1.0,
                    1 / speedup,
                    speedup,
                    speedup,
                    speedup,
                    0.0,
                    0.005,
                    "faster",
                    100,
                    True,
                )
            ],
            speedup,
            "faster",
        )
        return n

    dispatched, small, large = (
        node("dispatch", 1.1661, 40, True),
        node("small", 1.1654, 3),
        node("large", 1.166, 9),
    )
    speedup, kept = search.endgame.simplest_of_tied(
        [(1.1661, dispatched), (1.1654, small), (1.166, large)], dispatched
    )
    assert (kept.id, speedup) == ("small", 1.1654)
    assert any("within the noise floor" in n for n in search.ledger.notes)
    clearly = node("clearly", 1.20, 40, True)
    assert search.endgame.simplest_of_tied([(1.20, clearly), (1.1654, small)], small)[1] is clearly
    # the final A/B through the same rule, its interleaved timing set by hand: one note, not a
    # second one saying again that the first by precise timing was not kept
    search.ledger.notes.clear()
    search.population.nodes = {n.id: n for n in (dispatched, small, large)}
    search.population.best_id, search.population.best_speedup = "dispatch", 1.1661
    search.evaluator.time_together = lambda nodes, rep_ms: [n.timing for n in nodes]
    search.endgame.final_ab()
    assert (search.population.best_id, search.population.best_speedup) == ("small", 1.1654)
    assert [n for n in search.ledger.notes if n.startswith("final A/B")] == [
        "final A/B: small at 1.165x is within the noise floor of dispatch at 1.166x and the simpler change, so it is kept"
    ]
    # equally simple and tied: the measured order is noise; the cost model's order decides, so
    # that two runs measuring the pair in opposite orders keep the same one
    search.population.baseline_est = [10.0]
    tile_a, tile_b = node("tile-a", 4.0999, 3), node("tile-b", 4.0944, 3)
    tile_a.estimate_us, tile_b.estimate_us = [2.5], [2.4]
    assert (
        search.endgame.simplest_of_tied([(4.0999, tile_a), (4.0944, tile_b)], tile_a)[1] is tile_b
    )
    tile_a.timing, tile_b.timing = tile_b.timing, tile_a.timing
    assert (
        search.endgame.simplest_of_tied([(4.0944, tile_a), (4.0999, tile_b)], tile_b)[1] is tile_b
    )
    # the same order decides which quick-timed near-ties go on to the full harness
    from kernelbrain.engine.search.selection import FULL_AFTER_QUICK, split_stones

    quick = []
    for name, q, est in (
        ("q-a", 1.880, 2.6),
        ("q-b", 1.876, 2.4),
        ("q-c", 1.874, 2.5),
        ("q-d", 1.750, 1.0),
    ):
        n = node(name, q, 3)
        n.quick_timing, n.timing, n.estimate_us = n.timing, None, [est]
        quick.append(n)
    contenders, behind, below = split_stones(quick, 1.0, search.ladder.ties_first)
    assert FULL_AFTER_QUICK == 2
    assert (
        [n.id for n in contenders] == ["q-b", "q-c"]
        and [n.id for n in behind] == ["q-a", "q-d"]
        and below == []
    )


def gpu_search_with_original(pool, tmp_path, op: str):
    """(search, task, source): a search as on a GPU (never started) whose original is dry-run,
    for tests that set the per-case timings of its nodes by hand."""
    from kernelbrain.engine.protocol import Specialize
    from kernelbrain.engine.search.node import Node

    ws = workspace(tmp_path)
    task = find_task(ws / "ops" / f"{op}.py", f"{op}_kernel")
    source = open(task.file).read()
    search = Search(task, device="cuda:0", budget=Budget(wall_s=60), store=Store(ws), pool=pool)
    original = Node("original", source, "original", "", None, outcome="verified")
    original.spec = pool.call("compile:0", Specialize(task, None, seed=0), 120.0)
    search.population.nodes["original"] = original
    search.population.labels = [c.label for c in original.spec.cases]
    return search, task, source


def per_case_timing(labels: list[str], per_case: list[float]):
    """A timing with these per-case speedups (and their geomean overall)."""
    from kernelbrain.engine.api.facts import CaseTiming, TimingResult
    from kernelbrain.engine.api.stats import geomean

    return TimingResult(
        [
            CaseTiming(lbl, 1.0, 1.0 / x, x, x, x, 0.0, 0.01, "faster", 10, False)
            for lbl, x in zip(labels, per_case)
        ],
        geomean(per_case),
        "faster",
    )


def test_dispatch_ingredients_include_quick_timed_candidates_on_a_gpu(pool, tmp_path, monkeypatch):
    """On a GPU the ladder fully verifies few candidates; per-shape winners among those only
    quick-timed still make a dispatching variant (itself then verified in full). H200 rmsnorm,
    12 candidates: full fidelity built a 1.166x dispatch, the ladder stopped at 1.135x."""
    from kernelbrain.engine.search.node import Node

    search, task, source = gpu_search_with_original(pool, tmp_path, "softmax")
    muts = load_mutators()
    wide = next(
        p
        for p in muts["config"].propose(MutationContext(task, source))
        if p.knobs.get("num_warps") == 8
    )
    single = next(iter(muts["single-pass"].propose(MutationContext(task, source))))

    def timing(per_case):
        return per_case_timing(search.population.labels, per_case)

    lead = Node("lead", wide.source, "config", "", "original", outcome="verified")
    lead.timing = timing([1.20, 1.20, 1.00])
    stone = Node("stone", single.source, "single-pass", "", "original", outcome="stone")
    stone.quick_timing = timing([1.00, 1.00, 1.60])
    search.population.nodes.update(lead=lead, stone=stone)
    built = []
    monkeypatch.setattr(search.ladder, "generation", lambda nodes, force=False: built.extend(nodes))
    search.endgame.dispatch()
    assert [n.dispatch for n in built] == [True] and built[0].parent == "lead"
    assert "dispatch(config | single-pass)" == built[0].origin
    assert "`single-pass` where x.shape[-1] > " in built[0].description
    # a candidate the cost model ranked out was never timed: not an ingredient
    built.clear()
    stone.quick_timing, stone.outcome = None, "pruned"
    search.endgame.dispatch()
    assert built == []


def test_a_shape_every_variant_slows_runs_the_original(pool, tmp_path, monkeypatch):
    """One structure wins the search but loses one shape to the draft (H200 suite: the bf16
    matmul's best 5% slower than its draft on 128x128x128, attention's 8% on 1x4x128x64): the
    end game dispatches that shape to the original, and the dispatching variant is correct on
    both sides. Where the variant loses nowhere, no dispatch is built."""
    from kernelbrain.engine.search.node import Node

    search, task, source = gpu_search_with_original(pool, tmp_path, "softmax")
    wide = next(
        p
        for p in load_mutators()["config"].propose(MutationContext(task, source))
        if p.knobs.get("num_warps") == 8
    )
    lead = Node("lead", wide.source, "config", "", "original", outcome="verified")
    lead.timing = per_case_timing(search.population.labels, [1.30, 0.80, 1.30])
    search.population.nodes.update(lead=lead)
    built = []
    monkeypatch.setattr(search.ladder, "generation", lambda nodes, force=False: built.extend(nodes))
    search.endgame.dispatch()
    assert [n.dispatch for n in built] == [True]
    assert built[0].origin == "dispatch(original | config)", built[0].origin
    assert "`original` where x.shape[-1] <= 1024" in built[0].description
    report = verify(pool, task, built[0].source, "cpu")
    assert report.accepted, report.message
    built.clear()
    lead.timing = per_case_timing(search.population.labels, [1.30, 1.00, 1.30])
    search.endgame.dispatch()
    assert built == []


def test_shape_winners_and_other_structures_are_expanded_and_a_climb_is_progress(pool, tmp_path):
    """Results are dispatched per shape, so a variant that wins one shape is kept by the halving
    and expanded however it does on the geomean; tuning steps do not make a structure of their
    own; and a structure still climbing is not stagnation. H200 col_sum: one program per column
    strip quick-timed 0.46x overall (0.10x on 65536x1024, 2.69x on 1024x65536, ahead of every
    coarsened variant there), was pruned, and the search stopped after 136 of its 300 s on the
    best variant alone (run AH); with shape winners kept it climbed to 1.33x on 16384x4096, then
    tuned chains of the coarsened atomics took every parent slot (run AI)."""
    from kernelbrain.engine.search.node import Node
    from kernelbrain.engine.search.selection import halve

    search, task, source = gpu_search_with_original(pool, tmp_path, "col_sum")
    original = search.population.nodes["original"]

    def timing(per_case):
        return per_case_timing(search.population.labels, per_case)

    def node(name, origin, per_case, outcome="verified"):
        n = Node(name, source + f"# {name}\n", origin, "", "original", outcome=outcome)
        if outcome == "verified":
            n.timing = timing(per_case)
        else:
            n.quick_timing = timing(per_case)
        search.population.nodes[name] = n
        return n

    original.expanded = True  # as after the first generation
    for i, origin in enumerate(
        [
            "coarsen-atomics+config",
            "coarsen-atomics+hints",
            "coarsen-atomics+config+hints",
            "hints+coarsen-atomics",
            "coarsen-atomics+int64-offsets",
        ]
    ):
        node(f"c{i}", origin, [2.7 - i * 0.01, 2.7 - i * 0.01, 2.6 - i * 0.01])
    own = node("own", "own-columns+launcher-cleanup+loop-stages", [0.4, 0.1, 2.5], outcome="stone")
    wide = node(
        "wide", "coarsen-atomics+config", [1.0, 2.8, 1.0], outcome="stone"
    )  # the best on 65536x1024
    parents = selection.parents(search.population)
    # three by the geomean; tuned chains of the coarsened atomics are one structure, own columns
    # another; and the second case's best
    assert parents == [search.population.nodes[k] for k in ("c0", "c1", "c2")] + [own, wide]
    # an autotuned variant is no structure's walk: `config` cannot retune it
    tuned = node("tuned", "own-columns+loop-stages+autotune", [1.0, 0.5, 2.5], outcome="stone")
    assert own in selection.parents(search.population) and tuned not in selection.parents(
        search.population
    )
    hand = node("hand", "own-columns+loop-stages+config", [0.9, 0.5, 2.4], outcome="stone")
    kept, _ = halve(
        [search.population.nodes["c0"], tuned, hand], 1
    )  # its structure's best hand-tuned variant
    assert hand in kept
    del search.population.nodes["hand"]
    del search.population.nodes["tuned"]
    ranked = [search.population.nodes[k] for k in ("c0", "c1", "c2")] + [own, wide]
    kept, dropped = halve(ranked, 2, search.population.case_speedups)
    assert (
        wide in kept and own in kept and search.population.nodes["c2"] in dropped
    )  # wide: a shape's best; own: a structure's
    # a structure's best on one case is kept though another structure leads there: the tiling of
    # the column strips that wins the first case loses the geomean to the one that wins the third
    eight = node(
        "eight",
        "own-columns+launcher-cleanup+loop-stages+config",
        [1.5, 0.05, 2.0],
        outcome="stone",
    )
    kept, dropped = halve(ranked + [eight], 2, search.population.case_speedups)
    assert eight in kept and search.population.nodes["c2"] in dropped
    del search.population.nodes["eight"]
    before = selection.Standing.of(search.population)
    assert not selection.progressed(search.population, before)
    own.quick_timing = timing(
        [0.8, 0.1, 2.5]
    )  # retuned: twice as fast on the first case, still no shape's best
    assert search.population.per_shape_best() == pytest.approx(
        before.per_shape
    ) and selection.progressed(search.population, before)


def test_a_step_that_paid_on_some_case_is_repeated_first(pool, tmp_path):
    """The search hands `config` the parent's own parent where the step between them made it
    faster on some case, so the walk repeats that step (32 -> 64 -> 128 rows of a column strip);
    a step that paid nowhere is not repeated."""
    from kernelbrain.engine.search.node import Node

    search, task, source = gpu_search_with_original(pool, tmp_path, "col_sum")
    muts = load_mutators()
    own = next(iter(muts["own-columns"].propose(MutationContext(task, source))))
    square = next(
        p
        for p in muts["config"].propose(MutationContext(task, own.source))
        if p.knobs == {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "loop_stages": 3}
    )
    nodes = {}
    for name, p, parent, per_case in [
        ("own", own, "original", [0.4, 0.1, 2.5]),
        ("square", square, "own", [0.8, 0.1, 2.4]),
    ]:
        nodes[name] = Node(
            name,
            p.source,
            p.origin if parent == "original" else f"own-columns+{p.origin}",
            p.description,
            parent,
            outcome="stone",
        )
        nodes[name].quick_timing = per_case_timing(search.population.labels, per_case)
        search.population.nodes[name] = nodes[name]

    def first_config(node):
        node.expanded = False
        return next(n for n in search.propose([node]) if n.origin.endswith("+config")).source

    tall = "BLOCK_M=128, BLOCK_N=64, num_warps=4"
    assert tall in first_config(nodes["square"])
    nodes["square"].quick_timing = per_case_timing(
        search.population.labels, [0.4, 0.1, 2.4]
    )  # paid on no case
    assert tall not in first_config(nodes["square"])


def test_dry_runs_draw_a_launchers_cpu_inputs_once_per_worker(pool, tmp_path):
    """A launcher that reads values (`.item()`, like the cross_entropy first draft) cannot dry-run
    on meta tensors; the CPU inputs it falls back to are drawn once per compile worker, not once
    per candidate (they were, and cost an H200 search 177 of its 300 s)."""
    from kernelbrain.engine import protocol as m

    ws = workspace(tmp_path)
    path = ws / "ops" / "cross_entropy.py"
    # the worker's filesystem is read-only (sandbox): each draw is counted on its stderr instead
    source = path.read_text().replace(
        'def cross_entropy_inputs(device="cuda"):\n',
        'def cross_entropy_inputs(device="cuda"):\n    print("kb-draw", device)\n'
        "    return [(torch.randn(8, 300, device=device, dtype=torch.bfloat16), "
        "torch.randint(0, 300, (8,), device=device))]\n",
    )
    path.write_text(source)
    task = find_task(path, "cross_entropy_kernel")
    first = pool.call("compile:0", m.Specialize(task, None, seed=0), 120.0)
    again = [
        pool.call(
            "compile:0",
            m.Specialize(task, source.replace("BLOCK_SIZE=1024", f"BLOCK_SIZE={b}"), seed=0),
            120.0,
        )
        for b in (256, 512)
    ]
    assert first.device == "cpu" and [r.device for r in again] == ["cpu", "cpu"]
    assert [r.cases[0].launches[0].args[-1].value for r in again] == [256, 512]
    draws = [
        line.split()[1]
        for line in pool.worker("compile:0").stderr_tail(300).splitlines()
        if line.startswith("kb-draw")
    ]
    assert draws == ["meta", "cpu"]  # meta failed at `.item()`, CPU drawn once


def test_rewrites_that_helped_are_proposed_first(pool, tmp_path):
    """A rewrite that made one variant faster is tried on the others before the rest, and a
    mutator's many proposals take turns with the others': an H200 matmul search never combined its
    best tiling with the zero-fill removal (1.06x on its own) before the budget ran out."""
    from kernelbrain.engine.api.facts import TimingResult
    from kernelbrain.engine.search.node import Node

    ws = workspace(tmp_path)
    task = find_task(ws / "ops" / "matmul.py", "matmul_kernel")
    search = Search(task, device="cuda:0", budget=Budget(wall_s=60), store=Store(ws), pool=pool)
    original = open(task.file).read()
    search.population.nodes["original"] = Node(
        "original", original, "original", "", None, outcome="verified"
    )
    ctx = MutationContext(task, original)
    mutators = load_mutators()
    tiled = next(iter(mutators["config"].propose(ctx)))
    cleaned = next(iter(mutators["launcher-cleanup"].propose(ctx)))
    for name, p, speedup in [("tiled", tiled, 1.85), ("cleaned", cleaned, 1.06)]:
        node = Node(name, p.source, p.origin, p.description, "original", outcome="verified")
        node.timing = TimingResult([], speedup, "faster")
        search.population.nodes[name] = node
    assert search.population.proven_steps() == {"config", "launcher-cleanup"}
    fresh = search.propose([search.population.nodes["tiled"]])
    origins = [n.origin for n in fresh]
    first_turn = origins[:2]
    assert sorted(first_turn) == ["config+config", "config+launcher-cleanup"], origins
    # unproven rewrites follow the proven ones; the tiling's 2nd..12th re-proposals come after
    # every proven mutator had its turn
    assert origins.index("config+launcher-cleanup") < origins.index("config+grouped-order")
    assert origins.count("config+config") > 1 and origins[2] == "config+config"


def test_candidates_far_below_the_lead_become_stepping_stones():
    """Only quick-timed candidates near the lead pay for the full harness; the others are kept
    as parents (their rewrite may pay combined) but are never results."""
    from kernelbrain.engine.api.facts import TimingResult
    from kernelbrain.engine.search.node import Node
    from kernelbrain.engine.search.selection import split_stones

    def quick(name, q):
        node = Node(name, "", name, "", "original")
        node.quick_timing = TimingResult([], q, "faster")
        return node

    kept = [
        quick("tile-a", 1.87),
        quick("tile-b", 1.80),
        quick("tile-c", 1.63),
        quick("cleanup", 1.06),
    ]
    contenders, behind, below = split_stones(kept, best=1.0)
    assert [n.id for n in contenders] == ["tile-a", "tile-b"] and behind == []
    assert [n.id for n in below] == ["tile-c", "cleanup"]
    # near-ties beyond the FULL_AFTER_QUICK fastest wait as stones too
    near = [
        quick("tile-a", 1.88),
        quick("tile-b", 1.86),
        quick("tile-c", 1.85),
        quick("tile-d", 1.83),
    ]
    contenders, behind, below = split_stones(near, best=1.0)
    assert [n.id for n in contenders] == ["tile-a", "tile-b"] and [n.id for n in behind] == [
        "tile-c",
        "tile-d",
    ]
    assert below == []
    # the lead can be an earlier generation's best: then nothing new may be near it
    contenders, behind, stones = split_stones(kept, best=2.5)
    assert contenders == [] and behind == [] and len(stones) == 4
    for node in stones:
        node.outcome = "stone"
    assert all(n.expandable and not n.verified for n in stones)


def test_gpu_seconds_to_best_are_those_spent_when_the_best_was_verified(pool, tmp_path):
    """The ladder's saving shows in the GPU time until the best was verified, not in totals that
    also hold the baseline and the final A/B."""
    from kernelbrain.engine.api.results import TrajectoryPoint

    ws = workspace(tmp_path)
    search = softmax_search(ws, pool)
    search.ledger.trajectory = [
        TrajectoryPoint(1.0, "a", "config", "verified", 1.2, 1.2, 10.0),
        TrajectoryPoint(2.0, "b", "config", "quick:below-lead", 1.0, 1.2, 14.0),
        TrajectoryPoint(3.0, "c", "single-pass", "verified", 1.5, 1.5, 31.5),
    ]
    search.population.best_id = "c"
    assert search.gpu_s_to_best() == 31.5
    search.population.best_id = "resumed-from-the-store"
    assert search.gpu_s_to_best() is None


def test_the_best_gets_the_stackable_steps_that_paid_elsewhere(pool, tmp_path, monkeypatch):
    """Before the search ends, the best is tried with each stackable step it lacks that made some
    other variant faster: an H200 cross_entropy search's `exp2` made an early variant 4% faster,
    and the best, found 237 s into 300, never got it (run AX)."""
    from kernelbrain.engine.api.facts import TimingResult
    from kernelbrain.engine.search.node import Node

    ws = workspace(tmp_path)
    task = find_task(ws / "ops" / "cross_entropy.py", "cross_entropy_kernel")
    search = Search(task, device="cpu", budget=Budget(wall_s=60), store=Store(ws), pool=pool)
    original = open(task.file).read()
    mutators = load_mutators()
    online = next(iter(mutators["online-softmax"].propose(MutationContext(task, original))))
    fast_exp = next(iter(mutators["exp2"].propose(MutationContext(task, online.source))))
    hinted = next(iter(mutators["hints"].propose(MutationContext(task, online.source))))
    tuned = next(iter(mutators["config"].propose(MutationContext(task, online.source))))
    search.population.nodes["original"] = Node(
        "original", original, "original", "", None, outcome="verified"
    )
    for name, source, origin, parent, speedup in [
        ("online", online.source, "online-softmax", "original", 2.61),
        ("fast", fast_exp.source, "online-softmax+exp2", "online", 2.71),  # exp2 paid
        ("hinted", hinted.source, "online-softmax+hints", "online", 2.60),  # hints did not
        ("best", tuned.source, "online-softmax+config", "online", 3.39),
    ]:
        search.population.nodes[name] = Node(
            name, source, origin, origin, parent, outcome="verified"
        )
        search.population.nodes[name].timing = TimingResult([], speedup, "faster")
    search.population.best_id, search.population.best_speedup = "best", 3.39
    generated = []
    monkeypatch.setattr(
        search.ladder, "generation", lambda nodes, force=False: generated.append((nodes, force))
    )
    search.endgame.polish()
    [([polished], force)] = generated
    assert force and polished.parent == "best" and polished.origin == "online-softmax+config+exp2"
    assert (
        "tl.exp2(" in polished.source
        and "tl.exp(" not in polished.source.split("def cross_entropy(")[0]
    )
    # the best's tiling is kept: only the exponentials changed
    assert (
        polished.source.split("def cross_entropy(")[1]
        == tuned.source.split("def cross_entropy(")[1]
    )
    assert verify(pool, task, polished.source, "cpu").accepted
    # tried once: a polished variant already known is not generated again
    search.population.nodes[polished.id] = polished
    generated.clear()
    search.endgame.polish()
    assert generated == []


def test_the_end_game_verifies_only_what_fits_in_the_budget(pool, tmp_path):
    """The end game's forced candidates and final A/B are costed from what candidates cost in
    this search: the generations hold that much back (at most half the budget), and a forced
    candidate that would not fit is left out with a note (H200 softmax searches ran 10% past a
    90 s budget when a fixed share was held back)."""
    ws = workspace(tmp_path)
    search = softmax_search(ws, pool)
    assert search.end_reserve_s() == 9.0  # nothing measured yet: 15% of the budget
    ledger = search.ledger
    # a full verification is costed on the original's own harness and timing until a candidate
    # has had one; one that does not fit in what the generations have left is not started
    ledger.rung_seconds.update({"baseline": 12.0, "baseline-timing": 2.0})
    assert search.ladder.verify_s() == 14.0 and search.ladder.full_fits()
    # an autotuned candidate is checked on every configuration: 8 of them cost 8 harnesses
    from kernelbrain.engine.api import facts as msgs

    def launches(configs: int) -> msgs.SpecializeResult:
        rec = [
            msgs.LaunchRecord(
                "softmax_kernel", (1,), [], 4, 2, {"BLOCK": 64 * i} if configs else {}
            )
            for i in range(max(1, configs))
        ]
        return msgs.SpecializeResult([msgs.CaseLaunches("c", rec)], "meta")

    from kernelbrain.engine.search.node import Node

    search.population.nodes["original"] = Node("original", "", "original", "", None)
    search.population.nodes["original"].spec = launches(0)
    tuned = Node("tuned", "", "autotune", "", "original")
    tuned.spec = launches(8)
    assert search.ladder.verify_s(tuned) == 8 * 14.0 and not search.ladder.full_fits(tuned)
    ledger.rung_seconds["baseline"] = 55.0
    assert not search.ladder.full_fits()  # 57 s, with 51 s left at most
    from kernelbrain.engine.search.node import Node

    on_cpu = Search(search.task, device="cpu", budget=Budget(wall_s=60), store=Store(ws), pool=pool)
    on_cpu.ledger.rung_seconds["baseline"] = 58.0
    node = Node("late", "", "config", "", "original")
    on_cpu.ladder.full([node], force=False)
    assert node.outcome == "not-run" and "full" not in on_cpu.ledger.counts.per_stage
    # one fact with the numbers that matter: what a verification takes against what was left
    assert re.search(
        r"left unverified.*takes about 58\.0 s here and the search had \d+\.\d s left",
        on_cpu.ledger.notes[-1],
    ), on_cpu.ledger.notes[-1]
    search.population.nodes.pop("original")
    for rung, seconds in [("compile", 4), ("smoke", 1), ("quick", 1), ("full", 40), ("timing", 3)]:
        ledger.counts.per_stage[rung] = 2
        ledger.rung_seconds[rung] = 2.0 * seconds
    assert search.endgame.candidate_s() == pytest.approx(49)
    assert search.endgame.final_s() == pytest.approx(3 * 5 / 3 * 400 / 150)
    # a candidate and the final A/B need more than half the budget: only the final is held back
    assert search.end_reserve_s() == pytest.approx(1.25 * search.endgame.final_s())
    assert not search.endgame.fits("a dispatching variant")
    assert "no time left to verify a dispatching variant" in ledger.notes[-1]
    for rung in ("compile", "smoke", "quick", "full", "timing"):
        ledger.rung_seconds[rung] = 0.2  # 0.1 s a rung
    assert search.endgame.fits("a dispatching variant")
    assert search.end_reserve_s() == 9.0
    ledger.rung_seconds["full"] = 2.0 * 15  # a 15 s harness: a candidate and the final fit in 30
    expected = 1.25 * (search.endgame.final_s() + search.endgame.candidate_s())
    assert 9.0 < expected < 30.0 and search.end_reserve_s() == pytest.approx(expected)
    # a variant made of an autotuned one is checked on each of its 8 configurations
    plain = Node("plain", "", "config", "", "original")
    plain.spec = launches(0)
    assert search.endgame.candidate_s([plain, tuned]) == pytest.approx(
        8 * search.endgame.candidate_s([plain])
    )
    assert search.endgame.fits("a dispatching variant", [plain])
    assert not search.endgame.fits("a dispatching variant", [plain, tuned])


def test_the_bandit_gives_a_mutator_that_keeps_failing_here_fewer_proposals(pool, tmp_path):
    """After a generation, quotas follow what paid in this search: the tiling's configurations
    all ran slower while the zero-fill removal paid, so the next parent gets fewer of them (still
    a few), and the LLM arm is asked for fewer rewrites when its own did not pay."""
    from kernelbrain.engine.api.facts import TimingResult
    from kernelbrain.engine.search.allocation import LLM_ARM, MIN_QUOTA, PROPOSALS_PER_MUTATOR
    from kernelbrain.engine.search.node import Node

    ws = workspace(tmp_path)
    task = find_task(ws / "ops" / "matmul.py", "matmul_kernel")
    search = Search(task, device="cuda:0", budget=Budget(wall_s=60), store=Store(ws), pool=pool)
    original = open(task.file).read()
    pop = search.population
    pop.nodes["original"] = Node("original", original, "original", "", None, outcome="verified")
    ctx = MutationContext(task, original)
    mutators = load_mutators()
    cleaned = next(iter(mutators["launcher-cleanup"].propose(ctx)))
    configs = list(mutators["config"].propose(ctx))[:8]
    made = [(f"c{i}", p, 0.9) for i, p in enumerate(configs)]
    made += [(name, cleaned, 1.06) for name in ("cleaned", "cleaned-2", "cleaned-3")]
    made += [(f"llm{i}", configs[0], 0.95) for i in range(4)]
    for name, p, speedup in made:
        origin = "llm" if name.startswith("llm") else p.origin
        node = Node(name, p.source, origin, p.description, "original", outcome="verified")
        node.timing = TimingResult([], speedup, "faster" if speedup > 1 else "slower")
        pop.nodes[name] = node

    def config_proposals() -> int:
        parent = pop.nodes["cleaned"]
        parent.expanded = False
        fresh = search.propose([parent])
        for n in fresh:  # proposed, not run: leave the population as it was
            pop.nodes.pop(n.id, None)
        return sum(1 for n in fresh if n.chain.last == "config")

    assert search.experience.allocation.quota("config") == PROPOSALS_PER_MUTATOR
    before = config_proposals()
    search.experience.allocation.observe(search.experience.tallies())
    after = config_proposals()
    assert before == PROPOSALS_PER_MUTATOR and MIN_QUOTA <= after < before, (before, after)
    assert search.experience.allocation.quota("launcher-cleanup") == PROPOSALS_PER_MUTATOR
    assert search.experience.allocation.quota(LLM_ARM, 4) < 4


def test_the_end_game_verifies_the_fastest_candidate_the_generations_had_no_time_for(
    pool, tmp_path
):
    """A candidate timed (here: estimated) faster than the best but left unverified when the
    generations ran out of time is verified in the time held back; one too slow to matter, or
    one whose verification would not fit, is left with a note."""
    ws = workspace(tmp_path)
    task = find_task(ws / "ops" / "gelu.py", "gelu_kernel")
    search = Search(task, device="cpu", budget=Budget(wall_s=120), store=Store(ws), pool=pool)
    search.baseline()
    original = open(task.file).read()
    proposal = next(iter(load_mutators()["config"].propose(MutationContext(task, original))))
    node = search.prepare_variant(proposal.source)
    node.chain, node.parent, node.outcome = "config", "original", "not-run"
    node.estimate_us = search.evaluator.estimate(node)
    search.population.nodes[node.id] = node
    assert search.population.estimated_speedup(node) > 1.01 and search.population.best_id is None
    search.meter.release_reserve()
    search.ledger.rung_seconds["baseline"] = 1e6  # verifying would not fit: a note, no verdict
    search.endgame.promote()
    assert (
        node.outcome == "not-run"
        and "no time left to verify the fastest" in search.ledger.notes[-1]
    )
    search.ledger.rung_seconds["baseline"] = 1.0
    search.endgame.promote()
    assert node.outcome == "verified" and search.population.best_id == node.id


def test_a_compile_batch_starts_no_candidate_past_its_deadline():
    """The compile rung sizes its batch by how long compiles took so far; when these take longer
    (unrolled rewrites, a loaded machine) the candidates not yet started are left out instead of
    running the search past its budget (a 60 s CPU search once took 90 s)."""
    import time

    from kernelbrain.engine.search.evaluation import Evaluator
    from kernelbrain.engine.search.node import Node

    class Recording(Evaluator):
        def __init__(self):  # only what compile_all uses
            self.compile_devices, self.started = ["compile:0"], []

        def specialize_and_compile(self, node, device):
            self.started.append(node.id)

    nodes = [Node(f"n{i}", "", "config", "", "original") for i in range(5)]
    late = Recording()
    late.compile_all(nodes, deadline=time.monotonic() - 1.0, first=2)
    assert late.started == ["n0", "n1"]  # the first ones always, so a generation is never empty
    assert [n.outcome for n in nodes] == ["pending", "pending"] + ["not-run"] * 3
    fresh = [Node(f"m{i}", "", "config", "", "original") for i in range(5)]
    on_time = Recording()
    on_time.compile_all(fresh, deadline=time.monotonic() + 600.0, first=2)
    assert on_time.started == [n.id for n in fresh]


def test_a_search_starts_its_compile_workers_together_before_it_needs_them(tmp_path):
    """Every compile worker is started at once, in the background, when the search begins: a
    compile worker takes seconds to start, and the ahead-of-time compiles started only the
    first of them with their dry run, the others when the compiles spread out."""
    ws = workspace(tmp_path)
    with WorkerPool() as fresh:
        search = softmax_search(ws, fresh, device="cpu", compile_workers=2)
        search.evaluator.start_workers()
        assert search.evaluator.compile_devices == ["compile:0", "compile:1"]
        assert all(fresh.worker(d).alive for d in search.evaluator.compile_devices)
        assert fresh.restarts == 0


def test_a_dispatch_guard_reads_sizes_that_hold_for_any_rank():
    """The guard's features are the innermost size, the rows and the element count: on a 1-D
    input none raises, and a 3-D input dispatches on its innermost size (the hidden size), not
    on the sequence length a `shape[1]` would read."""
    import torch

    case = CaseLaunches(
        "2d", [], entry_args=[ArgSpec("arg0", "ptr", shape=[6, 4096], numel=6 * 4096)]
    )
    features = dispatch._features(case, ["x"])
    assert set(features) == {
        "{0}.shape[-1]", "({0}.numel() // max({0}.shape[-1], 1))", "{0}.numel()"
    }  # fmt: skip
    for x in (torch.empty(4096), torch.empty(6, 4096), torch.empty(2, 3, 4096), torch.empty(0, 0)):
        for feature in features:
            value = eval(feature.replace("{0}", "x"), {"x": x})  # the guard's own expression
            assert isinstance(value, int)
    seq = {"x": torch.empty(2, 3, 4096)}  # batch 2, sequence 3, hidden 4096
    assert eval("{0}.shape[-1]".replace("{0}", "x"), seq) == 4096
    assert eval("({0}.numel() // max({0}.shape[-1], 1))".replace("{0}", "x"), seq) == 6
