"""How many proposals each mutator gets per parent: what paid on similar kernels before.

Without experience every mutator gets `PROPOSALS_PER_MUTATOR` (the configuration space is the
large one). With the memory's priors (`store.memory.Prior`) a mutator's quota follows its
posterior chance of paying, a Beta(1, 1) prior updated with what similar kernels showed, as a
share of the best mutator's: mutators that never paid on kernels like this one get a few
proposals (they are still explored), the ones that paid keep their full quota. Within the
search, rewrites that already paid go first (`Population.proven_steps`).
"""

from __future__ import annotations

from ..store.memory import Prior

PROPOSALS_PER_MUTATOR = 12  # per parent
MIN_QUOTA = 2  # even a mutator that never paid on similar kernels is still explored
MIN_EVIDENCE = 3.0  # weighted candidates of experience before a prior changes a quota


class Allocation:
    def __init__(self, priors: dict[str, Prior] | None = None):
        self.priors = priors or {}
        rates = [self._posterior(p) for p in self.priors.values() if p.tried >= MIN_EVIDENCE]
        self._best = max(rates, default=0.0)

    @staticmethod
    def _posterior(p: Prior) -> float:
        return (p.paid + 1.0) / (p.tried + 2.0)

    def quota(self, mutator: str) -> int:
        prior = self.priors.get(mutator)
        if prior is None or prior.tried < MIN_EVIDENCE or self._best <= 0:
            return PROPOSALS_PER_MUTATOR
        share = self._posterior(prior) / self._best
        return max(MIN_QUOTA, min(PROPOSALS_PER_MUTATOR, round(PROPOSALS_PER_MUTATOR * share)))

    def describe(self) -> str:
        cut = {
            m: self.quota(m) for m in sorted(self.priors) if self.quota(m) < PROPOSALS_PER_MUTATOR
        }
        if not cut:
            return "experience of similar kernels: every mutator keeps its full quota"
        return "experience of similar kernels: fewer proposals from " + ", ".join(
            f"{m} ({q})" for m, q in cut.items()
        )
