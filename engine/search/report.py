"""A verified node as the search reports it: per-case figures, the diff, the explanation."""

from __future__ import annotations

from ..api import facts as m
from ..api.diff import unified_diff
from ..api.results import Variant
from ..task.spec import Task
from .explain import compiled_changes, explain
from .node import Node
from .population import Population


def variant(
    node: Node,
    pop: Population,
    original: str,
    task: Task,
    baseline_facts: dict[int, dict[int, m.CompiledFacts]],
) -> Variant:
    """`node` as a reported variant, explained against the original's compiled facts."""
    per_case = pop.per_case(node)
    speedup = pop.score(node) or 1.0
    diff = unified_diff(original, node.source, task.file, task.root)
    before = next(iter(baseline_facts.get(0, {}).values()), None)
    after = next(iter(node.facts.get(0, {}).values()), None)
    text = explain(
        node.description,
        diff,
        per_case,
        node.timing is not None,
        speedup,
        compiled_changes(before, after),
    )
    stages = [s.name for s in node.harness.stages if s.passed] if node.harness else list(m.STAGES)
    passed = sum(1 for c in node.harness.cases if c.ok) if node.harness else 0
    return Variant(
        node.id,
        node.origin,
        node.description,
        speedup,
        per_case,
        stages,
        node.timing is not None,
        diff,
        text,
        node.parent,
        node.llm,
        node.dispatch,
        node.source,
        pop.estimated_speedup(node),
        passed,
    )
