"""The fidelity ladder, one method a rung, walked by each generation:

    gate (static) -> dry run + AOT compile (parallel, CPU) -> cost-model rank [halving]
    -> smoke correctness -> quick timing on every case [halving, GPU]
    -> full correctness (5 stages) -> precise interleaved timing on every case (GPU)

On a GPU only the candidates that quick timing puts near the lead climb to the last two rungs;
the others kept by the halving become stepping stones. Without a GPU the timings are replaced
by the estimator and every speedup is an estimate.
"""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import Future
from typing import Callable

from ..api import facts as m
from ..evaluate.policy import static_gate
from . import selection
from .evaluation import Evaluator
from .meter import CANCELLED, Stop
from .node import ORIGINAL, Fate, Node

QUICK_REP_MS = 10.0  # per case
PRECISE_REP_MS = 150.0
# Planning figures (2-core development machine, CPU interpreter): a dry run plus AOT compile of
# one candidate takes ~2 s per compile worker; smoke + full harness ~4 s on the interpreter.
DEFAULT_COMPILE_S = 2.5
VERIFY_S_CPU = 4.0
VERIFY_S_GPU = 3.0


class Ladder:
    def __init__(
        self,
        ev: Evaluator,
        original: str,
        cancel: threading.Event,
        emit: Callable[[str, str], None],
        exhaustive: bool = False,
    ):
        """`exhaustive`: every admitted candidate at full fidelity (no halving, no quick timing),
        to measure what the coarse-to-fine ladder saves."""
        self.ev, self.pop, self.ledger, self.meter = ev, ev.pop, ev.ledger, ev.meter
        self.original = original
        self.cancel = cancel
        self.emit = emit
        self.exhaustive = exhaustive
        self.compile_s_per_candidate: float | None = None
        self.simplicity = selection.simplicity_key(self.pop, original, ev.task)

    def stopped(self) -> Stop | None:
        return CANCELLED if self.cancel.is_set() else self.meter.exhausted()

    def verify_s(self, node: Node | None = None) -> float:
        """Wall seconds one candidate's full harness (and on a GPU its precise timing) takes in
        this search: measured on its candidates, else on the original (its own harness and
        timing, which ran first), else the planning figure; for `node`, times its autotune
        configurations, since the harness runs every one of them on every case."""
        rungs = ("full", "timing") if self.ev.gpu else ("full",)
        measured = self.ledger.seconds_per_candidate(rungs)
        if measured is None:
            original = sum(
                self.ledger.rung_seconds.get(r, 0.0) for r in ("baseline", "baseline-timing")
            )
            measured = original or (VERIFY_S_GPU if self.ev.gpu else VERIFY_S_CPU)
        if node is None:
            return measured
        return measured * autotune_configs(node, self.ev.task.kernel) / self.original_configs

    @property
    def original_configs(self) -> int:
        root = self.pop.nodes.get(ORIGINAL)
        return autotune_configs(root, self.ev.task.kernel) if root is not None else 1

    def full_fits(self, node: Node | None = None) -> bool:
        """Whether one more full verification (of `node`) fits in what the generations have left
        (the end game's reserve stays untouched): a harness started just before the limit ran a
        60 s H200 search 5% past its budget, and an autotuned candidate costed as one
        configuration ran a 60 s H200 search 54% past it (58 s for its harness)."""
        return self.verify_s(node) <= self.meter.left_s()

    def out_of_time(self, force: bool = False) -> bool:
        """Admitted candidates finish their ladder unless time runs out (or the search is cancelled)."""
        stop = self.stopped()
        return stop is not None and (stop.cancelled or (not force and stop.halts_admitted))

    def generation(self, fresh: list[Node], force: bool = False) -> None:
        """Walk new candidates up the ladder. `force`: run them even past the candidate budget."""
        runnable = self.gate(fresh, force)
        ranked = self.compile(runnable, force)
        survivors = self.rank(ranked)
        smoked = self.smoke(survivors, force)
        if self.ev.gpu and smoked and not self.exhaustive:
            smoked = self.quick(smoked, force)
        self.full(smoked, force)

    def gate(self, fresh: list[Node], force: bool) -> list[Node]:
        """The static policy gate; admitted candidates count against the candidate budget."""
        runnable = []
        for node in fresh:
            self.pop.nodes[node.id] = node
            self.ledger.stage("gate")
            rej = static_gate(self.ev.task, self.original, node.source)
            if rej is not None:
                self.ev.end(node, Fate.REJECTED, "gate", rej.reason, rej.message)
                continue
            if not self.meter.admit(force):
                node.outcome = Fate.NOT_RUN
                continue
            self.ledger.admit(node)
            runnable.append(node)
        return runnable

    def compile(self, runnable: list[Node], force: bool) -> list[Node]:
        """Dry run + AOT compile in parallel on the CPU cores, as many as the time left allows
        (judged by how long compiles took so far); the compiled ones, estimated."""
        if not runnable:
            return []
        deadline = None
        if not force:
            per = self.compile_s_per_candidate or DEFAULT_COMPILE_S
            if self.meter.left_s() < per + self.verify_s():
                # not even one candidate can be compiled and verified in what is left: compiling
                # some anyway only ran the search past its budget (a corpus matmul, 36 s of 30)
                for node in runnable:
                    node.outcome = Fate.NOT_RUN
                return []
            room = self.meter.left_s() - selection.MIN_KEEP * self.verify_s()
            fit = max(selection.MIN_KEEP, int(room * len(self.ev.compile_devices) / per))
            for node in runnable[fit:]:
                node.outcome = Fate.NOT_RUN
            runnable = runnable[:fit]
            deadline = time.monotonic() + max(0.0, room)  # the batch's size is a forecast
        self.emit("rung", f"compiling {len(runnable)} candidates for sm_90")
        t0 = time.monotonic()
        with self.ledger.timed("compile"):
            self.ev.compile_all(runnable, deadline, first=selection.MIN_KEEP)
        runnable = [n for n in runnable if n.outcome != Fate.NOT_RUN]
        self.compile_s_per_candidate = (
            (time.monotonic() - t0) * len(self.ev.compile_devices) / len(runnable)
        )
        ranked = []
        for node in runnable:
            self.ledger.stage("compile")
            failed = [f for facts in node.facts.values() for f in facts.values() if not f.ok]
            if node.outcome == Fate.COMPILE_DIED:
                self.ev.end(node, Fate.REJECTED, "compile", node.died, "compiler worker died")
            elif failed:
                self.ev.end(node, Fate.REJECTED, "compile", "compile-error", failed[0].error or "")
            else:
                node.estimate_us = self.ev.estimate(node)
                ranked.append(node)
        return ranked

    def rank(self, ranked: list[Node]) -> list[Node]:
        """Successive halving by the estimator's rank."""
        ranked.sort(key=lambda n: (-(self.pop.estimated_speedup(n) or 0.0), n.id))
        keep = (
            len(ranked)
            if self.exhaustive
            else max(selection.MIN_KEEP, math.ceil(len(ranked) * selection.KEEP_AFTER_ESTIMATE))
        )
        survivors, dropped = selection.halve(ranked, keep, self.pop.case_speedups)
        for node in dropped:
            self.ev.end(
                node,
                Fate.PRUNED,
                "estimate",
                "ranked-out",
                "the cost model ranked it below the kept half",
                details={"estimate_us": node.estimate_us},
            )
        return survivors

    def correctness(
        self,
        node: Node,
        rung: str,
        stages: list[str],
        force: bool,
        warm: dict[str, Future] | None = None,
    ) -> m.HarnessResult | None:
        """One correctness rung for one candidate: its result when accepted; None when time ran
        out (the candidate is `not-run`) or it was rejected (recorded). `warm`: the node's
        ahead-of-time compiles, awaited first."""
        if self.out_of_time(force):
            node.outcome = Fate.NOT_RUN
            return None
        self.ev.await_prewarm(warm, node.id)
        self.ledger.stage(rung)
        with self.ledger.timed(rung):
            res = self.ev.harness(node.source, stages, rung)
        if not res.accepted:
            self.ev.end(node, Fate.REJECTED, rung, res.reason, res.message)
            return None
        return res

    def smoke(self, survivors: list[Node], force: bool) -> list[Node]:
        warm = self.ev.prewarm_all(survivors, ["smoke"])
        return [
            n for n in survivors if self.correctness(n, "smoke", ["smoke"], force, warm) is not None
        ]

    def quick(self, smoked: list[Node], force: bool) -> list[Node]:
        """Quick timing on every case (variants are often shape-dependent), halving, then the
        split into contenders for the full harness and stepping stones."""
        timed = []
        for node in smoked:
            if self.out_of_time():
                break
            self.ledger.stage("quick")
            with self.ledger.timed("quick"):
                t = self.ev.time_ab(node, QUICK_REP_MS, False)
            if t is not None:
                node.quick_timing = t
                timed.append(node)
        timed.sort(key=lambda n: (-(n.quick or 0.0), n.id))
        kept, dropped = selection.halve(
            timed,
            max(selection.MIN_KEEP - 1, math.ceil(len(timed) * selection.KEEP_AFTER_QUICK)),
            self.pop.case_speedups,
        )
        for node in dropped:
            self.ev.end(
                node,
                Fate.PRUNED,
                "quick",
                "ranked-out",
                f"quick timing {node.quick:.3f}x: below the kept half",
            )
        if force:  # a forced candidate (the dispatching variant) always gets its full verdict
            return kept
        contenders, behind, below = selection.split_stones(
            kept, self.pop.best_speedup, self.ties_first
        )
        margin, top = selection.STONE_MARGIN, selection.FULL_AFTER_QUICK
        for node in behind + below:
            why = (
                f"within {margin:.0%} of the lead, behind the {top} fastest"
                if node in behind
                else f"more than {margin:.0%} below the lead"
            )
            self.ev.end(
                node,
                Fate.STONE,
                "quick",
                "below-lead",
                f"quick timing {node.quick:.3f}x, {why}: expanded as a stepping stone, not fully verified",
            )
        return contenders

    def ties_first(self, nodes: list[Node]) -> list[Node]:
        """Quick-timed nodes, those tied with the fastest first (`selection.tied_first`)."""
        return selection.ties_first(nodes, self.simplicity)

    def full(self, smoked: list[Node], force: bool) -> None:
        """The full harness, then precise timing (GPU) or the estimate (CPU): verified variants."""
        warm = self.ev.prewarm_all(smoked, [s for s in m.STAGES if s != "smoke"])
        for node in smoked:
            if not force and not self.full_fits(node):
                node.outcome = Fate.NOT_RUN
                need, left = self.verify_s(node), self.meter.left_s()
                self.ledger.note_once(
                    "no-time-for-full",
                    f"candidates were left unverified at the end: a full verification takes "
                    f"about {need:.1f} s here and the search had {left:.1f} s left before the "
                    "time kept for its end",
                )
                continue
            res = self.correctness(node, "full", list(m.STAGES), force, warm)
            if res is None:
                continue
            node.harness = res
            if self.ev.gpu:
                self.ledger.stage("timing")
                with self.ledger.timed("timing"):
                    node.timing = self.ev.time_ab(node, PRECISE_REP_MS, True)
                if node.timing is None:
                    continue
            details = {"estimate_us": node.estimate_us, "timing": node.timing}
            # the best first: the trajectory point of a new best says so (a verified 3.55x at
            # 15 s showed a best of 1.0 until the next point at 44 s)
            self.consider_best(node)
            self.ev.end(
                node, Fate.VERIFIED, "full", None, res.message, passed=True, details=details
            )
            self.ledger.measurements(node, self.pop.per_case(node))
            self.emit("candidate", f"verified {node.origin}: {self.pop.score(node) or 0:.2f}x")

    def consider_best(self, node: Node) -> None:
        if self.pop.consider_best(node, self.meter.tick().wall_s):
            kind = "measured" if node.timing is not None else "estimated"
            self.emit("best", f"best so far {self.pop.best_speedup:.2f}x ({kind}): {node.origin}")


def autotune_configs(node: Node, kernel: str) -> int:
    """How many autotune configurations of `kernel` a case launches (the harness checks each of
    them), from the node's dry run; 1 for a kernel without autotuning or when unknown."""
    if node.spec is None:
        return 1
    counts = [
        sum(1 for r in c.launches if r.kernel == kernel and r.config) for c in node.spec.cases
    ]
    return max(1, max(counts, default=1))
