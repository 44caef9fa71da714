"""A candidate in the search, and the chain of mutators that made it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from ..api import facts as m

ORIGINAL = "original"  # the user's kernel: the root node's id and its chain


class Fate(StrEnum):
    """Where a candidate's climb up the ladder ended (strings, as the store and JSON keep them)."""

    PENDING = "pending"  # not judged yet
    NOT_RUN = "not-run"  # left out (budget, cancel, a batch that ran out of room): tried on resume
    COMPILE_DIED = "compile-died"  # the compile worker died under it (`Node.died`: how)
    REJECTED = "rejected"  # failed a rung: the gate, compile, correctness or timing
    PRUNED = "pruned"  # ranked out by the estimate or quick timing
    STONE = "stone"  # smoke-tested and quick-timed below the lead: built on, never offered
    VERIFIED = "verified"  # passed the full harness and was timed


# Rewrites that tune a kernel without changing how its work is laid out: a variant's structure
# is what remains. Counting them as structures would give every tuned chain of the best layout
# a parent slot of its own, and crowd out other layouts that need tuning before they win.
TUNING_STEPS = frozenset(
    {
        ORIGINAL,
        "config",
        "loop-stages",
        "hints",
        "int64-offsets",
        "launcher-cleanup",
        "autotune",
        "autotune-space",
        "exp2",
    }
)

# Tuning steps that depend on neither the tiling nor the structure and propose one variant each:
# one that made some variant faster is worth trying on the best before the search ends.
STACKABLE_STEPS = frozenset({"exp2", "hints", "int64-offsets"})


class Chain(tuple):
    """The mutators that made a variant, first applied first; `str()` spells it `a+b+c` (the
    `origin` of `optimize --json` and of the store)."""

    @classmethod
    def parse(cls, text: str) -> Chain:
        return cls(step for step in text.split("+") if step)

    def then(self, step: str) -> Chain:
        return Chain((*self, step))

    @property
    def last(self) -> str:
        return self[-1] if self else ""

    @property
    def structure(self) -> tuple[str, ...]:
        """The structural rewrites (tuning steps aside), in the order first applied."""
        return tuple(dict.fromkeys(step for step in self if step not in TUNING_STEPS))

    @property
    def autotuned(self) -> bool:
        return "autotune" in self

    def __str__(self) -> str:
        return "+".join(self)


def structure(origin: str | Chain) -> tuple[str, ...]:
    """The structural rewrites of a chain (or of its spelling)."""
    return (origin if isinstance(origin, Chain) else Chain.parse(origin)).structure


@dataclass
class Node:
    id: str
    source: str
    chain: Chain  # a string is parsed
    description: str
    parent: str | None
    llm: bool = False
    t: float = 0.0
    spec: m.SpecializeResult | None = None
    facts: dict[int, dict[int, m.CompiledFacts]] = field(default_factory=dict)
    compiled: set[str] = field(default_factory=set)  # compile keys already in Triton's cache
    estimate_us: list[float] | None = None
    quick_timing: m.TimingResult | None = None  # per case, few repetitions (GPU)
    harness: m.HarnessResult | None = None
    timing: m.TimingResult | None = None
    outcome: Fate = Fate.PENDING
    died: str = ""  # with Fate.COMPILE_DIED: how the compile worker died
    failure: str = ""  # rung, reason and message of a rejection (what an LLM repair is told)
    dispatch: bool = False
    expanded: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.chain, Chain):
            self.chain = Chain.parse(str(self.chain))

    @property
    def origin(self) -> str:
        return str(self.chain)

    @property
    def quick(self) -> float | None:
        """The quick timing's geomean speedup."""
        return self.quick_timing.speedup if self.quick_timing is not None else None

    @property
    def verified(self) -> bool:
        return self.outcome == Fate.VERIFIED

    @property
    def expandable(self) -> bool:
        """Verified, or a stepping stone (smoke-tested and quick-timed, below the lead)."""
        return self.outcome in (Fate.VERIFIED, Fate.STONE)
