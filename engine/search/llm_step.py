"""The LLM's part in a generation: proposals for the best candidate and repairs of the LLM's
own proposals that failed, as ordinary nodes (tagged `llm`) for the same ladder.

A proposal that fails at the gate, the compile or the harness is fed back once a generation
with its error (at most `max_repairs` rounds down one line of repairs); one that was merely
ranked out or timed slower is no error to repair.
"""

from __future__ import annotations

from ..evaluate.candidate import candidate_id
from ..llm import LLMMutator
from ..llm.prompt import Diagnosis
from ..mutate import MutationContext
from ..profile.compiled_rules import compiled_findings
from .allocation import LLM_ARM, Allocation
from .meter import Meter
from .node import ORIGINAL, Fate, Node
from .population import Population


class LLMStep:
    def __init__(self, llm: LLMMutator, task, seed: int, notes: list[str]):
        self.llm, self.task, self.seed, self.notes = llm, task, seed, notes
        self.repairs: dict[str, int] = {}  # node id -> its round of repair (0: a first proposal)
        self._to_repair: list[Node] = []
        self.past_wins: list[str] = []  # chains that made the best of similar kernels (memory)

    def nodes(
        self,
        parents: list[Node],
        pop: Population,
        meter: Meter,
        gpu: bool,
        allocation: Allocation | None = None,
    ) -> list[Node]:
        """This generation's LLM nodes: repairs first, then proposals on the best parent, as
        many as the LLM's share of the bandit (`allocation`) gives out of the per-generation
        setting. An LLM source an earlier generation had is dropped; one an offline mutator
        proposed in this generation too is kept as the LLM's (the caller drops the other)."""
        if not self.llm.available:
            return []
        out: list[Node] = []
        seen = set(pop.nodes)
        for failed in self._to_repair:
            ctx = MutationContext(self.task, failed.source, seed=self.seed)
            made, errors = self.llm.repair(ctx, failed.description, failed.failure, meter.left_s())
            self._note(errors)
            parent = pop.nodes.get(failed.parent or ORIGINAL)
            for mutation in made:
                node = self._node(mutation, parent, meter, seen)
                if node is not None:
                    self.repairs[node.id] = self.repairs.get(failed.id, 0) + 1
                    out.append(node)
        self._to_repair = []
        if not parents:
            return out
        parent = parents[0]
        ctx = MutationContext(self.task, parent.source, seed=self.seed)
        full = self.llm.settings.proposals_per_generation
        count = allocation.quota(LLM_ARM, full) if allocation is not None else full
        made, errors = self.llm.propose(
            ctx, self.diagnosis(pop, gpu, parent), meter.left_s(), count
        )
        self._note(errors)
        for mutation in made:
            node = self._node(mutation, parent, meter, seen)
            if node is not None:
                self.repairs[node.id] = 0
                out.append(node)
        return out

    @property
    def pending(self) -> bool:
        """Failed proposals wait for their repair (a generation is owed to them)."""
        return bool(self._to_repair) and self.llm.available

    def after(self, fresh: list[Node]) -> None:
        """Queue the LLM's failed proposals of this generation for repair."""
        for node in fresh:
            if not node.llm or node.id not in self.repairs:
                continue
            if self.repairs[node.id] >= self.llm.settings.max_repairs:
                continue
            if node.failure:  # set on rejections only: ranked out or a stone is no fault
                self._to_repair.append(node)

    def diagnosis(self, pop: Population, gpu: bool, parent: Node | None = None) -> Diagnosis:
        """What the prompt says: cases, the best so far, what was tried, the compiler's findings
        on the module shown (`parent`), the original's roofline places, the memory's wins."""
        best = pop.nodes.get(pop.best_id) if pop.best_id else None
        tried = [
            (n.description, n.failure or n.outcome)
            for n in pop.nodes.values()
            if n.id != ORIGINAL and n.outcome not in (Fate.PENDING, Fate.NOT_RUN)
        ]
        return Diagnosis(
            cases=list(pop.labels),
            measured=gpu,
            best_speedup=pop.best_speedup if best is not None else None,
            best_description=best.description if best is not None else "",
            tried=tried,
            compiled=compiled_lines(parent) if parent is not None else [],
            roofline=list(pop.roofline),
            past_wins=list(self.past_wins),
            compiler=compiler_lines(pop),
            compiler_kernels=pop.compiler_kernels,
        )

    def _node(self, mutation, parent: Node | None, meter: Meter, seen: set[str]) -> Node | None:
        cid = candidate_id(mutation.source)
        if cid in seen:
            return None
        seen.add(cid)
        root = parent is None or parent.id == ORIGINAL
        chain = mutation.origin if root else parent.chain.then(mutation.origin)
        return Node(
            cid,
            mutation.source,
            chain,
            mutation.description,
            parent.id if parent is not None else ORIGINAL,
            llm=True,
            t=meter.tick().wall_s,
        )

    def _note(self, errors: list[str]) -> None:
        for error in errors:
            text = f"an LLM proposal failed: {error}"
            if text not in self.notes:
                self.notes.append(text)


def compiler_lines(pop: Population) -> list[str]:
    """Per case, the original's time beside torch.compile's of the reference (GPU searches
    that lowered it): where the compiler already beats the user's kernel."""
    out = []
    for label, ours, compiled in zip(pop.labels, pop.baseline_us, pop.compile_us):
        if compiled and pop.gpu:
            mode = min(compiled, key=compiled.get)
            out.append(
                f"{label}: the original {ours:.1f} µs, torch.compile ({mode}) {compiled[mode]:.1f} µs"
            )
    return out


def compiled_lines(node: Node) -> list[str]:
    """The KB2xx findings on a node's compiled specialisations, each code once (its first
    case's message: the configuration it names shows where it holds)."""
    seen: dict[str, str] = {}
    cases = node.spec.cases if node.spec is not None else []
    for ci, launches in sorted(node.facts.items()):
        for li, facts in sorted(launches.items()):
            if ci >= len(cases) or li >= len(cases[ci].launches):
                continue
            for code, _, message in compiled_findings(cases[ci].launches[li], facts):
                seen.setdefault(code, f"{code} ({cases[ci].label}): {message}")
    return list(seen.values())
