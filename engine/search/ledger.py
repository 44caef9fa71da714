"""The search's bookkeeping in one place: counts per rung and outcome, the trajectory, notes,
seconds per rung and per harness stage, and every write to the store."""

from __future__ import annotations

import time
from contextlib import contextmanager

from ..api import facts as m
from ..api.results import CandidateCounts, CaseValue, TrajectoryPoint
from ..llm.prompt import failure_told
from ..store import Store
from .meter import Meter
from .node import Fate, Node


class Ledger:
    def __init__(self, store: Store, key: str, device: str, meter: Meter):
        self.store = store
        self.key = key
        self.device = device
        self.meter = meter
        self.counts = CandidateCounts(per_stage={}, per_outcome={})
        self.trajectory: list[TrajectoryPoint] = []
        self.notes: list[str] = []
        self._noted: set[str] = set()
        self.rung_seconds: dict[str, float] = {}
        self.stage_seconds: dict[
            str, list[float]
        ] = {}  # "rung/stage" -> [seconds, of which JIT, runs]

    def stage(self, rung: str) -> None:
        """One more candidate reached `rung`."""
        self.counts.per_stage[rung] = self.counts.per_stage.get(rung, 0) + 1

    @contextmanager
    def timed(self, rung: str):
        """Wall seconds spent in the block, added to the rung's (where does the budget go?)."""
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.rung_seconds[rung] = self.rung_seconds.get(rung, 0.0) + time.monotonic() - t0

    def note_once(self, key: str, text: str) -> None:
        """A note the search makes at most once, however often its cause recurs."""
        if key not in self._noted:
            self._noted.add(key)
            self.notes.append(text)

    def seconds_per_candidate(self, rungs: tuple[str, ...]) -> float | None:
        """Wall seconds one candidate has taken through `rungs` in this search, rung by rung
        (each rung's seconds over the candidates that reached it); None until a candidate
        reached the last of them."""
        if not self.counts.per_stage.get(rungs[-1]):
            return None
        return sum(
            self.rung_seconds.get(r, 0.0) / self.counts.per_stage[r]
            for r in rungs
            if self.counts.per_stage.get(r)
        )

    def harness_seconds(self, result: m.HarnessResult, rung: str) -> None:
        """The worker's seconds per stage of a harness run, with those it spent in Triton's JIT."""
        for stage in result.stages:
            spent = self.stage_seconds.setdefault(f"{rung}/{stage.name}", [0.0, 0.0, 0])
            spent[0] += stage.seconds
            spent[1] += stage.jit_seconds
            spent[2] += 1

    def admit(self, node: Node) -> None:
        self.store.add_candidate(
            self.key, node.id, node.source, node.origin, node.parent, node.description, node.llm
        )

    def end(
        self,
        node: Node,
        outcome: Fate,
        rung: str,
        *,
        score: float | None,
        best: float,
        reason: str | None = None,
        message: str = "",
        passed: bool = False,
        details=None,
    ) -> None:
        """A node's last rung: its outcome counted, stored and put on the trajectory. A cancel is
        no verdict on the candidate: it is `not-run`, and a resumed search tries it again."""
        if reason == "cancelled":
            node.outcome = Fate.NOT_RUN
            return
        node.outcome = outcome
        if not passed and outcome == Fate.REJECTED:
            # what an LLM repair and later prompts are told: never the candidate's own words
            node.failure = failure_told(rung, str(reason or outcome), message)
        key = str(outcome) if outcome == Fate.VERIFIED else f"{rung}:{reason or outcome}"
        self.counts.per_outcome[key] = self.counts.per_outcome.get(key, 0) + 1
        self.store.record_outcome(
            self.key, node.id, self.device, rung, passed, reason, message, details
        )
        spent = self.meter.tick()
        self.trajectory.append(
            TrajectoryPoint(
                spent.wall_s,
                node.id,
                node.origin,
                key,
                score,
                best,
                round(spent.gpu_s, 3),
                self.counts.per_stage.get("compile", 0),
            )
        )

    def measurements(self, node: Node, per_case: list[CaseValue]) -> None:
        for cv in per_case:
            self.store.record_measurement(
                self.key,
                node.id,
                self.device,
                cv.label,
                node.timing is not None,
                cv.baseline_us,
                cv.value_us,
                cv.speedup,
                {"verdict": cv.verdict},
            )

    def verified_at(self, node_id: str | None) -> TrajectoryPoint | None:
        """The trajectory point where a variant was verified (None: resumed from the store)."""
        return next(
            (p for p in self.trajectory if p.candidate == node_id and p.outcome == Fate.VERIFIED),
            None,
        )
