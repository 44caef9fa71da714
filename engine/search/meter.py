"""The search's budget meter: what was spent, what is left, and which limit ended the search.

The meter owns its arithmetic: the search charges GPU seconds, admits candidates and holds a
reserve for the end game through its methods, and reads typed stop reasons back.
"""

from __future__ import annotations

import enum
import time
from contextlib import contextmanager
from dataclasses import dataclass

from ..api.budget import Budget, Spent


class StopKind(enum.Enum):
    WALL = "budget: wall time"
    GPU = "budget: GPU time"
    CANDIDATES = "budget: candidates"
    CANCELLED = "cancelled"
    STAGNATION = "stagnation"
    EXHAUSTED = "exhausted"
    FINISHED = "finished"


@dataclass(frozen=True)
class Stop:
    """Why a search stopped; `str()` is the `stopped` field of `optimize --json`."""

    kind: StopKind
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.detail}" if self.detail else self.kind.value

    @property
    def cancelled(self) -> bool:
        return self.kind is StopKind.CANCELLED

    @property
    def halts_admitted(self) -> bool:
        """Whether candidates already admitted stop too. The candidate cap only stops new ones:
        those admitted finish their ladder; running out of time or a cancel stops everything."""
        return self.kind is not StopKind.CANDIDATES


CANCELLED = Stop(StopKind.CANCELLED)

# Wall seconds the command needs after the search ends (storing the result, stopping the
# workers; a second on an idle 2-core machine, more on a loaded one), kept out of the search's
# own time so that the user's whole wait holds the budget.
EXIT_ALLOWANCE_S = 2.0


class Meter:
    """Tracks spending against a budget; says which limit ran out."""

    def __init__(self, budget: Budget, clock=time.monotonic, exit_s: float = EXIT_ALLOWANCE_S):
        self.budget = budget
        # What the search itself may spend: the budget less the command's exit, never below
        # half the budget (tiny budgets in tests).
        self._search_s = max(budget.wall_s / 2, budget.wall_s - exit_s)
        self.spent = Spent()
        self._clock = clock
        # The user's wait starts when the command did (`Budget.started_at`), not when the search
        # object was made: start-up, workers and the original's check count too.
        self._start = budget.started_at if budget.started_at is not None else clock()
        # Wall time held back from the generations for the end game; released when it starts.
        self._reserve_s = 0.0
        # When the GPU had work (start, end), and when the first candidate's GPU work began.
        self._gpu_busy: list[tuple[float, float]] = []
        self._candidates_from: float | None = None

    def tick(self) -> Spent:
        self.spent.wall_s = self._clock() - self._start
        return self.spent

    def reserve(self, seconds: float) -> None:
        """Hold `seconds` of the wall budget back from the generations."""
        self._reserve_s = max(0.0, seconds)

    def release_reserve(self) -> None:
        self._reserve_s = 0.0

    def charge_gpu(self, seconds: float) -> None:
        self.spent.gpu_s += max(0.0, seconds)

    @contextmanager
    def gpu_clock(self, on_gpu: bool = True):
        """Charge the wall seconds of the block as GPU time (when `on_gpu`)."""
        t0 = self._clock()
        try:
            yield
        finally:
            if on_gpu:
                t1 = self._clock()
                self.charge_gpu(t1 - t0)
                self._gpu_busy.append((t0, t1))

    def candidate_on_gpu(self) -> None:
        """A candidate's GPU work starts now (the busy share counts from the first)."""
        if self._candidates_from is None:
            self._candidates_from = self._clock()

    def gpu_busy_share(self) -> float | None:
        """The share of wall time since the first candidate's GPU work during which the GPU had
        work (overlapping calls counted once); None before any candidate reached a GPU."""
        start = self._candidates_from
        if start is None:
            return None
        now = self._clock()
        if now <= start:
            return None
        busy, reached = 0.0, start
        for t0, t1 in sorted(self._gpu_busy):
            t0, t1 = max(t0, reached), min(t1, now)
            if t1 > t0:
                busy += t1 - t0
                reached = t1
        return min(1.0, busy / (now - start))

    def admit(self, force: bool = False) -> bool:
        """Count one more candidate, unless the cap is reached (then False, nothing counted);
        `force` counts it past the cap (the end game's variants)."""
        if self.out_of_candidates() and not force:
            return False
        self.spent.candidates += 1
        return True

    def exhausted(self) -> Stop | None:
        self.tick()
        b, s = self.budget, self.spent
        if s.wall_s >= self._search_s - self._reserve_s:
            return Stop(StopKind.WALL)
        if b.gpu_s is not None and s.gpu_s >= b.gpu_s:
            return Stop(StopKind.GPU)
        if self.out_of_candidates():
            return Stop(StopKind.CANDIDATES)
        return None

    def wall_left_s(self) -> float:
        """Wall seconds before the budget ends, the end game's reserve included."""
        return max(0.0, self._search_s - self.tick().wall_s)

    def left_s(self) -> float:
        return max(0.0, self._search_s - self._reserve_s - self.tick().wall_s)

    def out_of_candidates(self) -> bool:
        cap = self.budget.max_candidates
        return cap is not None and self.spent.candidates >= cap

    def fraction(self) -> float:
        """How much of the budget is spent, by whichever limit is nearest (for progress bars)."""
        b, s = self.budget, self.tick()
        return min(
            1.0,
            max(
                s.wall_s / b.wall_s,
                (s.candidates / b.max_candidates) if b.max_candidates else 0.0,
                (s.gpu_s / b.gpu_s) if b.gpu_s else 0.0,
            ),
        )
