"""How many proposals each mutator gets per parent: a bandit over mutators, by what paid.

Without evidence every mutator gets `PROPOSALS_PER_MUTATOR` (the configuration space is the
large one). The evidence is what paid on similar kernels before (the memory's priors,
`store.memory.Prior`) plus what paid in this search so far (`observe`, after each generation):
a mutator's quota follows its posterior chance of paying, a Beta(1, 1) prior updated with both,
as a share of the best-evidenced mutator's. Mutators that keep failing get a few proposals (they
are still explored), the ones that pay keep their full quota. The LLM is one more arm
(`LLM_ARM`): its share scales how many proposals it is asked for per generation. Within a
generation, rewrites that already paid go first (`Population.proven_steps`).
"""

from __future__ import annotations

from ..store.memory import Outcome, Prior

PROPOSALS_PER_MUTATOR = 12  # per parent
MIN_QUOTA = 2  # even a mutator that never paid is still explored
MIN_EVIDENCE = 3.0  # candidates of experience (weighted) before a quota changes
LLM_ARM = "llm"


class Allocation:
    def __init__(self, priors: dict[str, Prior] | None = None):
        self.priors = priors or {}
        self.here: dict[str, Outcome] = {}  # this search's tallies so far

    def observe(self, tallies: dict[str, Outcome]) -> None:
        """This search's tallies per mutator (all of them so far, not an increment)."""
        self.here = dict(tallies)

    def _evidence(self, mutator: str) -> tuple[float, float]:
        prior, here = self.priors.get(mutator), self.here.get(mutator)
        tried = (prior.tried if prior else 0.0) + (here.tried if here else 0)
        paid = (prior.paid if prior else 0.0) + (here.paid if here else 0)
        return tried, paid

    def _posterior(self, mutator: str) -> float:
        tried, paid = self._evidence(mutator)
        return (paid + 1.0) / (tried + 2.0)

    def share(self, mutator: str) -> float:
        """The mutator's posterior chance of paying over the best-evidenced one's (1: full)."""
        if self._evidence(mutator)[0] < MIN_EVIDENCE:
            return 1.0
        arms = set(self.priors) | set(self.here)
        best = max(
            (self._posterior(a) for a in arms if self._evidence(a)[0] >= MIN_EVIDENCE),
            default=0.0,
        )
        return min(1.0, self._posterior(mutator) / best) if best > 0 else 1.0

    def quota(self, mutator: str, full: int = PROPOSALS_PER_MUTATOR) -> int:
        """Proposals per parent for `mutator`, out of `full` (the LLM's: its per-generation
        count, floored at one)."""
        floor = MIN_QUOTA if full >= MIN_QUOTA * 2 else 1
        return max(floor, min(full, round(full * self.share(mutator))))

    def describe(self) -> str:
        cut = {
            m: self.quota(m)
            for m in sorted(set(self.priors) | set(self.here))
            if self.quota(m) < PROPOSALS_PER_MUTATOR
        }
        if not cut:
            return "every mutator keeps its full quota"
        return "fewer proposals from " + ", ".join(f"{m} ({q})" for m, q in cut.items())
