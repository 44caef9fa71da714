"""Search budgets: wall time, GPU time, candidates and LLM tokens, and what was spent."""

from __future__ import annotations

import re
import time

import msgspec

_DURATION = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*$")


def parse_duration(text: str) -> float:
    """`90s`, `5m`, `1h30m`, `2m30s` or plain seconds -> seconds."""
    m = _DURATION.match(text or "")
    if not text or not text.strip() or m is None or not any(m.groups()):
        raise ValueError(f"not a duration: {text!r} (use e.g. 90s, 5m, 1h30m)")
    h, mi, s = (float(g) if g else 0.0 for g in m.groups())
    seconds = h * 3600 + mi * 60 + s
    if seconds <= 0:
        raise ValueError(f"a budget must be positive, got {text!r}")
    return seconds


class Budget(msgspec.Struct):
    wall_s: float = 180.0
    gpu_s: float | None = None  # None: bounded by wall time only
    # None: no cap, the time budget bounds the search (the CLI's default: an H200 compiles and
    # ranks 60 candidates in about 40 s, so a cap of 60 ended `--budget 5m` searches there)
    max_candidates: int | None = 60
    llm_tokens: int = 0
    llm_dollars: float = 0.0


class Spent(msgspec.Struct):
    wall_s: float = 0.0
    gpu_s: float = 0.0
    candidates: int = 0
    llm_tokens: int = 0
    llm_dollars: float = 0.0


class Meter:
    """Tracks spending against a budget; says which limit ran out."""

    def __init__(self, budget: Budget):
        self.budget = budget
        self.spent = Spent()
        self._start = time.monotonic()
        # Wall time held back from the generations for the work at the end (a dispatching
        # variant, the final A/B); released when that work starts.
        self.reserve_s = 0.0

    def tick(self) -> Spent:
        self.spent.wall_s = time.monotonic() - self._start
        return self.spent

    def exhausted(self) -> str | None:
        self.tick()
        b, s = self.budget, self.spent
        if s.wall_s >= b.wall_s - self.reserve_s:
            return "budget: wall time"
        if b.gpu_s is not None and s.gpu_s >= b.gpu_s:
            return "budget: GPU time"
        if self.out_of_candidates():
            return "budget: candidates"
        return None

    def left_s(self) -> float:
        return max(0.0, self.budget.wall_s - self.reserve_s - self.tick().wall_s)

    def out_of_candidates(self) -> bool:
        cap = self.budget.max_candidates
        return cap is not None and self.spent.candidates >= cap
