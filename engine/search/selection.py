"""Selection policy: successive halving, stepping stones, tie rules, per-case leaders, parents
and progress. Pure functions over nodes and a `Population`; no evaluation happens here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..api import facts as m
from ..api.diff import diff_counts, unified_diff
from ..task.spec import Task
from .node import ORIGINAL, Node
from .population import IMPROVEMENT, Population

PARENTS_PER_GENERATION = 3
MAX_PARENTS = 5  # ... plus the best of other structures, up to this many
KEEP_AFTER_ESTIMATE = 0.5  # successive halving: fraction kept after the cost-model rank
KEEP_AFTER_QUICK = 0.5  # ... and after quick timing (GPU)
MIN_KEEP = 3
STAGNATION_GENERATIONS = 2
STONE_MARGIN = 0.1  # quick-timed more than 10% below the lead: a stepping stone, not fully verified
FULL_AFTER_QUICK = (
    2  # the most quick-timed candidates of a generation that go on to the full harness
)

PerCase = Callable[[Node], list[float]]


def case_leaders(nodes: list[Node], per_case: PerCase) -> list[Node]:
    """The fastest of `nodes` on each case, by `per_case` (in case order, without repeats; the
    first of equals in `nodes` order)."""
    values = {n.id: per_case(n) for n in nodes}
    leaders: list[Node] = []
    for i in range(max((len(v) for v in values.values()), default=0)):
        leader = max((n for n in nodes if len(values[n.id]) > i), key=lambda n: values[n.id][i])
        if leader not in leaders:
            leaders.append(leader)
    return leaders


def halve(
    ranked: list[Node], keep: int, per_case: PerCase | None = None
) -> tuple[list[Node], list[Node]]:
    """Successive halving (kept, dropped) that keeps, beside the top `keep`, the best of every
    mutator and of every structure (autotuned or not): a rewrite that is modest alone or slower
    until tuned composes with the others, and a structure's tuning goes on while another leads.
    With `per_case` (a node's speedups per case) it keeps each structure's best on each case
    too: results are dispatched per shape, a structure that wins one shape can lose the geomean
    badly, and within a structure the tiling that wins one shape can lose the others."""

    def kind(n: Node) -> tuple:  # an autotuned variant ends its structure's walk (`parents`)
        return n.chain.structure, n.chain.autotuned

    kept, dropped = ranked[:keep], []
    last_steps = {n.chain.last for n in kept}
    structures = {kind(n) for n in kept}
    by_kind: dict[tuple, list[Node]] = {}
    for node in ranked:
        by_kind.setdefault(kind(node), []).append(node)
    leaders = (
        {n.id for group in by_kind.values() for n in case_leaders(group, per_case)}
        if per_case
        else set()
    )
    for node in ranked[keep:]:
        last, shape = node.chain.last, kind(node)
        if last not in last_steps or shape not in structures or node.id in leaders:
            last_steps.add(last)
            structures.add(shape)
            kept.append(node)
        else:
            dropped.append(node)
    return kept, dropped


def split_stones(
    kept: list[Node], best: float, order: Callable[[list[Node]], list[Node]] = lambda nodes: nodes
) -> tuple[list[Node], list[Node], list[Node]]:
    """(contenders, stones near the lead, stones below it) among quick-timed candidates, `kept`
    fastest first: a contender is within STONE_MARGIN of the lead (the best so far or the best
    quick timing) and among the first FULL_AFTER_QUICK in `order` (ties with the fastest first,
    the simplest of them first). The full harness is the dearest rung on a GPU; stones stay
    parents, so a near-tie left unverified still has its rewrites combined in the next
    generation."""
    lead = max([best] + [n.quick or 0.0 for n in kept])
    near = [n for n in kept if (n.quick or 0.0) >= lead * (1 - STONE_MARGIN)]
    contenders = order(near)[:FULL_AFTER_QUICK]
    return contenders, [n for n in near if n not in contenders], [n for n in kept if n not in near]


def noise_floor(timing: m.TimingResult | None) -> float:
    """A timing's largest per-case noise floor (0 without a timing)."""
    return max((c.noise_floor for c in timing.cases), default=0.0) if timing else 0.0


def tied_first(
    scored: list[tuple[float, Node]],
    noise: Callable[[Node], float],
    simpler: Callable[[Node], tuple],
) -> list[tuple[float, Node]]:
    """(speedup, node) pairs, those tied with the fastest first, in `simpler` order, then the
    rest fastest first. Tied: within the larger of the two noise floors. Between tied variants
    the measured order is noise; an order that does not change from run to run makes a search
    repeatable."""
    if not scored:
        return []
    top_speedup, top = max(scored, key=lambda f: f[0])  # the first of equals
    tied = [f for f in scored if f[0] * (1 + max(noise(f[1]), noise(top))) >= top_speedup]
    rest = sorted((f for f in scored if all(f[1] is not t[1] for t in tied)), key=lambda f: -f[0])
    return sorted(tied, key=lambda f: simpler(f[1])) + rest


def parents(pop: Population, ignore_expanded: bool = False) -> list[Node]:
    """The best verified variants (and stepping stones), plus the best of every other structure
    (a rewrite that needs the configuration space before it wins would never be expanded among
    the top three), plus the best on each case, which a dispatching variant can use. A
    structure's walk goes on from its best hand-tuned variant: `config` cannot retune an
    autotuned kernel."""
    expandable = [n for n in pop.nodes.values() if n.expandable]
    expandable.sort(key=lambda n: (-(pop.score(n) or (1.0 if n.id == ORIGINAL else 0.0)), n.id))
    fresh = [n for n in expandable if ignore_expanded or not n.expanded]
    chosen = fresh[:PARENTS_PER_GENERATION]
    structures = {n.chain.structure for n in chosen}
    for node in sorted(fresh[PARENTS_PER_GENERATION:], key=lambda n: n.chain.autotuned):
        if len(chosen) >= MAX_PARENTS:
            break
        if node.chain.structure not in structures:
            structures.add(node.chain.structure)
            chosen.append(node)
    for leader in case_leaders([n for n in expandable if n.id != ORIGINAL], pop.case_speedups):
        if leader not in chosen and (ignore_expanded or not leader.expanded):
            chosen.append(leader)
    return chosen


@dataclass(frozen=True)
class Standing:
    """What a generation is measured against: the best, the per-shape best, each structure's."""

    best: float
    per_shape: float
    structures: dict[tuple[str, ...], float]

    @classmethod
    def of(cls, pop: Population) -> Standing:
        return cls(pop.best_speedup, pop.per_shape_best(), pop.structure_bests())


def progressed(pop: Population, before: Standing) -> bool:
    """Whether the last generation made progress: a better best variant, a better per-shape best
    (what a dispatch could reach), or a structure already seen that got better, each by
    IMPROVEMENT. A structure still climbing is not stagnation."""
    now = pop.structure_bests()
    return (
        pop.best_speedup > before.best * (1 + IMPROVEMENT)
        or pop.per_shape_best() > before.per_shape * (1 + IMPROVEMENT)
        or any(now.get(k, 0.0) > v * (1 + IMPROVEMENT) for k, v in before.structures.items())
    )


def simplicity_key(pop: Population, original: str, task: Task) -> Callable[[Node], tuple]:
    """The order among variants tied in speed: no dispatch branch first, then fewer changed
    lines (as an engineer would pick between two equally fast diffs), then what does not change
    from run to run: the estimator's figure, the id."""

    def key(node: Node) -> tuple:
        changed = sum(diff_counts(unified_diff(original, node.source, task.file, task.root)))
        return node.dispatch, changed, -(pop.estimated_speedup(node) or 0.0), node.id

    return key


def ties_first(nodes: list[Node], simpler: Callable[[Node], tuple]) -> list[Node]:
    """Quick-timed nodes, those tied with the fastest first (`tied_first`)."""
    return [
        n
        for _, n in tied_first(
            [(n.quick or 0.0, n) for n in nodes], lambda n: noise_floor(n.quick_timing), simpler
        )
    ]
