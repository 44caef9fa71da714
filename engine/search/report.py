"""A search as it reports itself: each verified node with its per-case figures, diff and
explanation, and the whole result (`optimize --json`, the editor's results view)."""

from __future__ import annotations

import msgspec

from ..api import facts as m
from ..api.diff import unified_diff
from ..api.results import BaselineCase, BudgetReport, SearchResult, Variant
from ..evaluate.devices import is_gpu
from ..index.builder import source_hash
from ..llm import LLMMutator
from ..task.spec import Task
from .cost_model import case_bytes_and_flops, case_written_bytes
from .explain import compiled_changes, explain
from .ledger import Ledger
from .meter import Meter, Stop
from .node import ORIGINAL, Fate, Node
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


def search_result(
    stopped: Stop,
    *,
    task: Task,
    device: str,
    original: str,
    seed: int,
    population: Population,
    ledger: Ledger,
    meter: Meter,
    llm: LLMMutator | None,
    baseline_facts: dict,
    gpu_s_to_best: float | None,
    ceilings: dict[str, float],
) -> SearchResult:
    """What a search found and spent, as `optimize --json` and the editor show it."""
    pop, gpu = population, is_gpu(device)
    variants = sorted(
        (
            variant(n, pop, original, task, baseline_facts)
            for n in pop.nodes.values()
            if n.verified and n.id != ORIGINAL
        ),
        key=lambda v: (-v.speedup, v.id),
    )
    ledger.counts.total = sum(1 for n in pop.nodes.values() if n.id != ORIGINAL)
    # candidates made but never judged to an end (the budget ran out first, a cancel): counted,
    # so the outcomes account for every candidate
    ledger.counts.per_outcome.pop(str(Fate.NOT_RUN), None)  # an earlier report's
    unjudged = ledger.counts.total - sum(ledger.counts.per_outcome.values())
    if unjudged > 0:
        ledger.counts.per_outcome[str(Fate.NOT_RUN)] = unjudged
    compiled = pop.compile_us + [{}] * (len(pop.labels) - len(pop.compile_us))
    baseline = [
        BaselineCase(label, us, gpu, compile_us=c)
        for label, us, c in zip(pop.labels, pop.baseline_us, compiled)
    ]
    if not gpu:
        ledger.notes.append(
            "no GPU: candidates were verified on the CPU interpreter and ranked by the static "
            "cost model; speedups are estimates (measured: false)"
        )
    root = pop.nodes.get(ORIGINAL)
    cases = root.spec.cases if root and root.spec else []
    case_bytes, case_flops = case_bytes_and_flops(cases, root.source if root else "")
    spent = meter.tick()
    spent.gpu_busy_share = meter.gpu_busy_share()
    if llm is not None:
        spent.llm_tokens, spent.llm_dollars = llm.tokens, round(llm.dollars, 6)
        ledger.notes.extend(n for n in llm.notices if n not in ledger.notes)
        ledger.notes.append(llm.summary())
    return SearchResult(
        kernel=task.kernel,
        file=task.file,
        device=device,
        measured=gpu,
        baseline=baseline,
        variants=variants,
        best=pop.best_id,
        time_to_best_s=pop.time_to_best,
        # the clock reading the budget counted from means nothing outside this process
        budget=BudgetReport(msgspec.structs.replace(meter.budget, started_at=None), spent),
        candidates=ledger.counts,
        stopped=str(stopped),
        trajectory=ledger.trajectory,
        notes=ledger.notes,
        seed=seed,
        source_hash=source_hash(original),
        rung_seconds={k: round(v, 2) for k, v in ledger.rung_seconds.items()},
        original=original,
        stage_seconds={k: [round(v, 2) for v in vs] for k, vs in ledger.stage_seconds.items()},
        entry=task.entry,
        gpu_s_to_best=gpu_s_to_best,
        case_bytes=case_bytes,
        case_flops=case_flops,
        case_written_bytes=case_written_bytes(cases, original),
        ceilings=ceilings,
    )
