"""Search budgets (wall time, GPU time, candidates, LLM tokens), what was spent, and the defaults
every front end starts from."""

from __future__ import annotations

import re

import msgspec

_DURATION = re.compile(
    r"^\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s?)?\s*$"
)


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


# The defaults of every front end, in one place. The CLI searches without a candidate cap (the
# time budget and stagnation end it); the editor keeps a cap so that a search started from a lens
# stays short on a fast GPU, where 60 candidates compile and rank in well under a minute.
DEFAULT_WALL_S = 180.0
DEFAULT_BUDGET = "3m"  # the same, as the CLI flag and the editor setting spell it
EDITOR_MAX_CANDIDATES = 60


class Budget(msgspec.Struct):
    wall_s: float = DEFAULT_WALL_S
    gpu_s: float | None = None  # None: bounded by wall time only
    max_candidates: int | None = None  # None: no cap
    llm_tokens: int = 0
    llm_dollars: float = 0.0
    # `time.monotonic()` when the user's wait began (the command's process start); None: when
    # the search starts. The wall budget counts from it.
    started_at: float | None = None


class Spent(msgspec.Struct):
    wall_s: float = 0.0
    gpu_s: float = 0.0
    candidates: int = 0
    llm_tokens: int = 0
    llm_dollars: float = 0.0
    # Share of the wall time from the first candidate's first GPU work to the end during which
    # the GPU had work (a harness, a timing, a dry run); None off a GPU or before a candidate
    # reached it. What is not busy is time the GPU waited on compiles, the CPU or the LLM.
    gpu_busy_share: float | None = None
