"""How a search starts: the original through its whole harness, compiled, estimated and (on a
GPU) timed on every case, the baseline every candidate is scored against; and the variants an
earlier search of the same kernel source verified, resumed from the store."""

from __future__ import annotations

import threading
from typing import Callable

import msgspec

from ..api import facts
from ..evaluate.devices import is_gpu
from ..evaluate.pool import WorkerDied, WorkerPool
from ..evaluate.verify import bench
from ..evaluate.work_floor import WorkFloor
from ..profile.measured import roofline
from ..store import Store
from ..task.spec import Task
from . import selection
from .evaluation import Evaluator
from .ledger import Ledger
from .meter import Meter
from .node import ORIGINAL, Fate, Node
from .population import Population
from .rungs import Ladder


class SearchError(Exception):
    """The search cannot start: the original fails its own harness, or (`harness`) the harness
    itself is broken (its reference, inputs or small inputs raise, or the reference and the
    entry disagree on the output's structure)."""

    def __init__(self, message: str, harness: bool = False):
        super().__init__(message)
        self.harness = harness


def check_original(
    *,
    task: Task,
    original: str,
    device: str,
    pool: WorkerPool,
    evaluator: Evaluator,
    population: Population,
    ledger: Ledger,
    meter: Meter,
    ceilings: facts.Ceilings,
    emit: Callable[[str, str], None],
) -> Node:
    """The original through its whole harness, compiled and estimated, and on a GPU timed on
    every case: the reference every candidate is scored against."""
    emit("rung", "checking the original against its harness")
    ev, pop, gpu = evaluator, population, is_gpu(device)
    root = Node(ORIGINAL, original, ORIGINAL, "the original kernel", None)
    # every worker starts at once (imports, sandbox, CUDA context), in the background
    threading.Thread(target=ev.start_workers, daemon=True).start()
    ev.await_prewarm(ev.prewarm_all([root], list(facts.STAGES)), root.id)
    with ledger.timed("baseline"):
        result = ev.harness(None, list(facts.STAGES), "baseline")
    if not result.accepted and result.reason == "timeout" and meter.wall_left_s() < 1.0:
        raise _needs_more(meter, f"its {result.stage} stage")
    if not result.accepted and result.reason == "interpreter-gap":
        raise SearchError(result.message, harness=True)
    if not result.accepted and result.reason in facts.HARNESS_REASONS:
        raise SearchError(f"harness error ({result.stage} stage): {result.message}", harness=True)
    if not result.accepted:
        raise SearchError(
            f"the original kernel fails its own harness ({result.stage}: {result.reason}): "
            f"{result.message}"
        )
    ledger.notes.extend(result.notes)
    try:
        ev.specialize_and_compile(root, ev.compile_devices[0])
    except WorkerDied as died:  # its compile ran out of what the budget had left, or crashed
        if meter.wall_left_s() < 1.0:
            raise _needs_more(meter, "compiling its benchmark launches") from died
        raise SearchError(f"compiling the original failed: {died}") from died
    if not gpu and not (root.spec and root.spec.cases):
        # Without a GPU the benchmark cases exist only as this dry run: nothing to rank on.
        why = root.spec.error if root.spec and root.spec.error else "no cases"
        raise SearchError(
            f"harness error: the benchmark inputs (`{task.inputs.rsplit(':', 1)[-1]}`) "
            "could not be "
            f"drawn for a dry run: {why}",
            harness=True,
        )
    root.estimate_us = ev.estimate(root)
    pop.baseline_est = root.estimate_us or []
    root.outcome, root.harness = Fate.VERIFIED, result
    ev.floor = WorkFloor.of(result, ceilings)
    pop.nodes[root.id] = root
    if gpu:
        emit("rung", "timing the original on every case")
        with ledger.timed("baseline-timing"), meter.gpu_clock():
            b = bench(pool, task, device)
        pop.labels = [c.label for c in b.cases]
        pop.baseline_us = [c.median_ms * 1000 for c in b.cases]
        pop.roofline = roofline(b.cases, ceilings)
    else:
        pop.labels = [c.label for c in root.spec.cases] if root.spec else []
        pop.baseline_us = list(pop.baseline_est)
    return root


def _needs_more(meter: Meter, where: str) -> SearchError:
    """The original's check outlasted the budget: how much budget would do, in words."""
    spent = meter.tick().wall_s
    enough = max(2 * spent, spent + 60)
    return SearchError(
        f"checking the original needs more than this {meter.budget.wall_s:.0f} s budget: "
        f"it was still in {where} {spent:.0f} s after the command started, "
        f"with no time left for a single candidate. Give a budget of at least {enough:.0f} s "
        f"(`--budget {enough:.0f}s`), or fewer or smaller harness cases",
        harness=True,
    )


def resume(
    store: Store, key: str, device: str, population: Population, ladder: Ladder, ledger: Ledger
) -> None:
    """Verified variants of an earlier search of this kernel source, from the store."""
    pop, resumed = population, 0
    for cid, rungs in store.outcomes(key, device).items():
        cand = store.candidate(key, cid)
        if cand is None or cid in pop.nodes:
            continue
        node = Node(
            cid,
            cand["source"],
            cand["origin"],
            cand["description"],
            cand["parent"],
            bool(cand["llm"]),
        )
        final = rungs.get("full") or rungs.get("timing")
        if final and final["passed"]:
            details = final["details"]
            if details.get("timing"):
                node.timing = pop.rebased(msgspec.convert(details["timing"], facts.TimingResult))
            if "estimate_us" in details:
                node.estimate_us = details["estimate_us"]
            node.outcome = Fate.VERIFIED
            resumed += 1
        else:
            node.outcome = Fate.REJECTED
        node.expanded = True  # its children were proposed already; they are in the store too
        pop.nodes[cid] = node
    if resumed:
        ledger.notes.append(
            f"resumed {resumed} verified variant(s) from an earlier search of this kernel"
        )
        for node in pop.nodes.values():
            if node.verified and node.id != ORIGINAL:
                ladder.consider_best(node)
        for node in selection.parents(
            pop, ignore_expanded=True
        ):  # expanded again with anything new
            node.expanded = False
