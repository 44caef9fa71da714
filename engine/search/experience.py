"""The experience memory in a search: before it, the mutators' shares and the chains to replay,
from what paid on similar kernels; during it, what each mutator's candidates did here (the
bandit's evidence); after it, what to remember."""

from __future__ import annotations

from ..evaluate.candidate import candidate_id
from ..mutate import MutationContext
from ..store.memory import Memory, Outcome, log_gain
from ..task.spec import Task
from .allocation import Allocation
from .features import kernel_features
from .ledger import Ledger
from .llm_step import LLMStep
from .meter import Meter
from .node import ORIGINAL, Fate, Node
from .population import IMPROVEMENT, Population
from .replay import replay


class Experience:
    """One search's side of the experience memory (`memory` None: no memory, shares even)."""

    def __init__(
        self,
        memory: Memory | None,
        task: Task,
        original: str,
        seed: int,
        mutators: dict,
        population: Population,
        ledger: Ledger,
        meter: Meter,
    ):
        self.memory, self.task, self.original, self.seed = memory, task, original, seed
        self.mutators, self.population, self.ledger, self.meter = (
            mutators,
            population,
            ledger,
            meter,
        )
        self.allocation = Allocation()  # each mutator's proposals per parent
        self.seed_chains: list[str] = []  # chains that won on similar kernels, replayed first

    def features(self) -> tuple[str, set[str]]:
        ctx = MutationContext(self.task, self.original, seed=self.seed)
        return kernel_features(ctx, self.population.labels)

    def recall(self) -> None:
        """Size the mutators' shares by the experience of similar kernels."""
        if self.memory is None:
            return
        family, traits = self.features()
        priors = self.memory.priors(family, traits)
        if priors:
            self.allocation = Allocation(priors)
            self.ledger.notes.append(
                f"{family} kernel: experience of similar kernels: {self.allocation.describe()}"
            )
        self.seed_chains = self.memory.winning_chains(family, traits)

    def replays(self, seen: set[str], llm_step: LLMStep | None) -> list[Node]:
        """The chains that won on similar kernels, replayed on the original."""
        chains, self.seed_chains = self.seed_chains, []
        if llm_step is not None:
            llm_step.past_wins = list(chains)
        out = []
        for chain in chains:
            for made in replay(chain, self.task, self.original, self.mutators, self.seed):
                cid = candidate_id(made.source)
                if cid in seen:
                    continue
                seen.add(cid)
                out.append(
                    Node(
                        cid,
                        made.source,
                        made.origin,
                        made.description,
                        ORIGINAL,
                        t=self.meter.tick().wall_s,
                    )
                )
        return out

    def tallies(self) -> dict[str, Outcome]:
        """What each mutator's candidates did in this search so far: a step that made a variant
        faster than its parent paid (the LLM's rewrites count under `llm`)."""
        pop, outcomes = self.population, {}
        for node in pop.nodes.values():
            parent = pop.nodes.get(node.parent or "")
            if parent is None or node.dispatch or node.outcome in (Fate.PENDING, Fate.NOT_RUN):
                continue  # a dispatching variant is no mutator's: its parts are
            o = outcomes.setdefault(node.chain.last, Outcome())
            o.tried += 1
            score, base = pop.score(node), pop.score(parent) or 1.0
            if node.expandable and score is not None and score > base * (1 + IMPROVEMENT):
                o.paid += 1
                o.gain += log_gain(score, base)
            elif node.failure and o.failure is None:
                o.failure = ":".join(part.strip() for part in node.failure.split(":")[:2])
        return outcomes

    def learn(self) -> None:
        """Tell the memory what each mutator's candidates did here."""
        if self.memory is None:
            return
        pop, outcomes = self.population, self.tallies()
        family, traits = self.features()
        # The winner's chain; for a dispatching best, its best single variant's (a dispatch
        # between shape buckets does not replay on other shapes).
        singles = [
            n
            for n in pop.nodes.values()
            if n.verified and n.id != ORIGINAL and not n.dispatch and pop.score(n)
        ]
        best = max(singles, key=lambda n: pop.score(n) or 0.0, default=None)
        try:
            self.memory.record(family, traits, outcomes)
            if best is not None and (pop.score(best) or 0.0) > 1.0 + IMPROVEMENT:
                self.memory.record_win(family, traits, best.origin, pop.score(best) or 1.0)
        except Exception as exc:  # losing a memory row must never lose the search
            self.ledger.notes.append(f"the experience memory could not be written: {exc}")
