"""The budget-bounded, coarse-to-fine search.

Each generation expands the best verified variants so far with every mutator and walks the new
candidates up the fidelity ladder (`rungs.py`); selection policy lives in `selection.py`, the
end game in `endgame.py`, the bookkeeping in `ledger.py`. The search stops on its budget (wall
time, GPU time, candidates), on stagnation, or when the mutators have nothing new; results go to
the store, so a later search of the same kernel source resumes where this one stopped.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

import msgspec

from ..api import facts
from ..api.budget import Budget
from ..api.results import BaselineCase, BudgetReport, SearchEvent, SearchResult
from ..evaluate.candidate import candidate_id
from ..evaluate.devices import is_gpu
from ..evaluate.pool import WorkerPool, default_compile_workers
from ..evaluate.verify import bench
from ..evaluate.work_floor import WorkFloor
from ..index.builder import source_hash
from ..llm import LLMMutator
from ..mutate import MutationContext, load_mutators
from ..profile.measured import roofline
from ..store import Store, kernel_key
from ..store.memory import Memory, Outcome, log_gain
from ..task.spec import Task
from . import report, selection
from .allocation import Allocation
from .cost_model import CostModel, DeviceModel, case_bytes_and_flops, case_written_bytes
from .endgame import RESERVE_MARGIN, EndGame
from .evaluation import Estimator, Evaluator, Timer, WorkerTimer
from .features import kernel_features
from .ledger import Ledger
from .llm_step import LLMStep
from .meter import CANCELLED, Meter, Stop, StopKind
from .node import ORIGINAL, Fate, Node
from .population import IMPROVEMENT, Population
from .replay import replay
from .rungs import Ladder

END_RESERVE_FRACTION = 0.15  # of the wall budget, kept for the end game
END_RESERVE_MAX_S = 45.0  # ... at first; once candidates are measured, what the end game costs
END_RESERVE_CAP_FRACTION = 0.5  # of the wall budget, at most, whatever it costs


class SearchError(Exception):
    """The search cannot start: the original fails its own harness, or (`harness`) the harness
    itself is broken (its reference, inputs or small inputs raise, or the reference and the
    entry disagree on the output's structure)."""

    def __init__(self, message: str, harness: bool = False):
        super().__init__(message)
        self.harness = harness


class Search:
    def __init__(
        self,
        task: Task,
        *,
        device: str,
        budget: Budget,
        store: Store,
        pool: WorkerPool,
        seed: int = 0,
        mutators: list[str] | None = None,
        on_event: Callable[[SearchEvent], None] | None = None,
        cancel: threading.Event | None = None,
        compile_workers: int | None = None,
        device_model: DeviceModel | None = None,
        ceilings: facts.Ceilings | None = None,
        estimator: Estimator | None = None,
        timer: Timer | None = None,
        exhaustive: bool = False,
        llm: LLMMutator | None = None,
        memory: Memory | None = None,
    ):
        """`estimator` (default: the cost model on `device_model`) ranks compiled candidates and
        stands in for timing without a GPU; `timer` (default: the GPU worker) runs the A/Bs;
        `ceilings` (the device's, measured by the judge) set the floor every timing is held to;
        `llm` (none: offline) proposes rewrites beside the offline mutators; `memory` (none:
        no experience) sizes each mutator's share by what paid on similar kernels before, and
        learns what paid here."""
        self.task, self.device, self.seed, self.pool = task, device, seed, pool
        self.gpu = is_gpu(device)
        self.dev = device_model or DeviceModel()
        self.ceilings = ceilings
        self.meter = Meter(budget)
        self.initial_reserve_s = min(END_RESERVE_MAX_S, END_RESERVE_FRACTION * budget.wall_s)
        self.meter.reserve(self.initial_reserve_s)
        self.on_event = on_event or (lambda e: None)
        self.cancel = cancel or threading.Event()
        self.mutators = {
            k: v for k, v in sorted(load_mutators().items()) if mutators is None or k in mutators
        }
        n = compile_workers or default_compile_workers()
        self.original = Path(task.file).read_text(encoding="utf-8")
        self.key = kernel_key(task.file, task.kernel, source_hash(self.original))
        self.store = store
        self.population = Population(self.gpu)
        self.ledger = Ledger(store, self.key, device, self.meter)
        self.evaluator = Evaluator(
            task,
            device,
            seed,
            pool,
            self.meter,
            self.ledger,
            self.population,
            estimator or CostModel(self.dev),
            timer or WorkerTimer(pool, device),
            [f"compile:{i}" for i in range(n)],
        )
        self.ladder = Ladder(self.evaluator, self.original, self.cancel, self._emit, exhaustive)
        self.endgame = EndGame(self.ladder, self.mutators)
        self.baseline_facts: dict[int, dict[int, facts.CompiledFacts]] = {}
        self.memory = memory
        self.allocation = Allocation()
        self.seed_chains: list[str] = []  # chains that won on similar kernels, replayed first
        self.llm = llm
        self.llm_step = LLMStep(llm, task, seed, self.ledger.notes) if llm is not None else None
        if llm is not None:
            budget.llm_tokens, budget.llm_dollars = (
                llm.settings.max_tokens,
                llm.settings.max_dollars,
            )

    def _emit(self, kind: str, message: str) -> None:
        pop = self.population
        self.on_event(
            SearchEvent(
                kind,
                self.meter.fraction(),
                message,
                pop.best_speedup if pop.best_id else None,
                pop.best_id,
                self.gpu,
            )
        )

    def prepare_variant(self, source: str, device: str | None = None) -> Node:
        """Any variant of this task's file, dry-run and AOT-compiled on a compile worker as in the
        search, ready for an estimator (bench/cost_model_fit.py calibrates the cost model so)."""
        node = Node(candidate_id(source), source, "offline", "", None)
        self.evaluator.specialize_and_compile(node, device or self.evaluator.compile_devices[0])
        return node

    # -- baseline and resume ------------------------------------------------------------------------
    def _baseline(self) -> None:
        """The original through its whole harness, compiled and estimated, and on a GPU timed on
        every case: the reference every candidate is scored against."""
        self._emit("rung", "checking the original against its harness")
        ev, pop = self.evaluator, self.population
        root = Node(ORIGINAL, self.original, ORIGINAL, "the original kernel", None)
        # every worker starts at once (imports, sandbox, CUDA context), in the background
        threading.Thread(target=ev.start_workers, daemon=True).start()
        ev.await_prewarm(ev.prewarm_all([root], list(facts.STAGES)), root.id)
        with self.ledger.timed("baseline"):
            result = ev.harness(None, list(facts.STAGES), "baseline")
        if not result.accepted and result.reason == "interpreter-gap":
            raise SearchError(result.message, harness=True)
        if not result.accepted and result.reason in facts.HARNESS_REASONS:
            raise SearchError(
                f"harness error ({result.stage} stage): {result.message}", harness=True
            )
        if not result.accepted:
            raise SearchError(
                f"the original kernel fails its own harness ({result.stage}: {result.reason}): "
                f"{result.message}"
            )
        self.ledger.notes.extend(result.notes)
        ev.specialize_and_compile(root, ev.compile_devices[0])
        if not self.gpu and not (root.spec and root.spec.cases):
            # Without a GPU the benchmark cases exist only as this dry run: nothing to rank on.
            why = root.spec.error if root.spec and root.spec.error else "no cases"
            raise SearchError(
                f"harness error: the benchmark inputs (`{self.task.inputs.rsplit(':', 1)[-1]}`) "
                "could not be "
                f"drawn for a dry run: {why}",
                harness=True,
            )
        self.baseline_facts = root.facts
        root.estimate_us = ev.estimate(root)
        pop.baseline_est = root.estimate_us or []
        root.outcome, root.harness = Fate.VERIFIED, result
        ev.floor = WorkFloor.of(result, self.ceilings)
        pop.nodes[root.id] = root
        if self.gpu:
            self._emit("rung", "timing the original on every case")
            with self.ledger.timed("baseline-timing"), self.meter.gpu_clock():
                b = bench(self.pool, self.task, self.device)
            pop.labels = [c.label for c in b.cases]
            pop.baseline_us = [c.median_ms * 1000 for c in b.cases]
            ceilings = self.ceilings or facts.Ceilings(
                "device model", self.dev.bandwidth_gbps, self.dev.bf16_tflops
            )
            pop.roofline = roofline(b.cases, ceilings)
        else:
            pop.labels = [c.label for c in root.spec.cases] if root.spec else []
            pop.baseline_us = list(pop.baseline_est)

    def _resume(self) -> None:
        """Verified variants of an earlier search of this kernel source, from the store."""
        pop, resumed = self.population, 0
        for cid, rungs in self.store.outcomes(self.key, self.device).items():
            cand = self.store.candidate(self.key, cid)
            if cand is None or cid in pop.nodes:
                continue
            node = Node(
                cid,
                cand["source"],
                cand["origin"],
                cand["description"],
                cand["parent"],
                bool(cand["llm"]),
            )
            final = rungs.get("full") or rungs.get("timing")
            if final and final["passed"]:
                details = final["details"]
                if details.get("timing"):
                    node.timing = pop.rebased(
                        msgspec.convert(details["timing"], facts.TimingResult)
                    )
                if "estimate_us" in details:
                    node.estimate_us = details["estimate_us"]
                node.outcome = Fate.VERIFIED
                resumed += 1
            else:
                node.outcome = Fate.REJECTED
            node.expanded = True  # its children were proposed already; they are in the store too
            pop.nodes[cid] = node
        if resumed:
            self.ledger.notes.append(
                f"resumed {resumed} verified variant(s) from an earlier search of this kernel"
            )
            for node in pop.nodes.values():
                if node.verified and node.id != ORIGINAL:
                    self.ladder.consider_best(node)
            for node in selection.parents(
                pop, ignore_expanded=True
            ):  # expanded again with anything new
                node.expanded = False

    # -- experience -------------------------------------------------------------------------------
    def _features(self) -> tuple[str, set[str]]:
        ctx = MutationContext(self.task, self.original, seed=self.seed)
        return kernel_features(ctx, self.population.labels)

    def _recall(self) -> None:
        """Size the mutators' shares by the experience of similar kernels."""
        if self.memory is None:
            return
        family, traits = self._features()
        priors = self.memory.priors(family, traits)
        if priors:
            self.allocation = Allocation(priors)
            self.ledger.notes.append(
                f"{family} kernel: experience of similar kernels: {self.allocation.describe()}"
            )
        self.seed_chains = self.memory.winning_chains(family, traits)

    def _replays(self, seen: set[str]) -> list[Node]:
        """The chains that won on similar kernels, replayed on the original."""
        chains, self.seed_chains = self.seed_chains, []
        if self.llm_step is not None:
            self.llm_step.past_wins = list(chains)
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

    def _tallies(self) -> dict[str, Outcome]:
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

    def _learn(self) -> None:
        """Tell the memory what each mutator's candidates did here."""
        if self.memory is None:
            return
        pop, outcomes = self.population, self._tallies()
        family, traits = self._features()
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

    # -- generations ------------------------------------------------------------------------------
    def propose(self, parents: list[Node]) -> list[Node]:
        """Every mutator on every parent, ordered so that what the compile rung cuts when time is
        short is the least promising: rewrites that already made some variant faster come first,
        and each mutator's proposals take turns with the others'."""
        pop, fresh, turn, seen = self.population, [], {}, set(self.population.nodes)
        for parent in parents:
            parent.expanded = True
            ctx = MutationContext(
                self.task, parent.source, seed=self.seed, previous=pop.paid_step(parent)
            )
            for name, mut in self.mutators.items():
                taken = 0
                try:
                    # Known candidates do not count: a configuration parent proposes the
                    # configurations after the ones its own parent already tried.
                    for p in mut.propose(ctx):
                        cid = candidate_id(p.source)
                        if cid in seen:
                            continue
                        seen.add(cid)
                        root = parent.id == ORIGINAL
                        chain = parent.chain.then(p.origin) if not root else p.origin
                        desc = (
                            p.description if root else f"{parent.description}; then {p.description}"
                        )
                        fresh.append(
                            Node(cid, p.source, chain, desc, parent.id, t=self.meter.tick().wall_s)
                        )
                        turn[cid] = taken
                        taken += 1
                        if taken >= self.allocation.quota(name):
                            break
                except Exception as exc:  # a mutator bug must not end the search
                    self.ledger.notes.append(
                        f"mutator {name} failed on {parent.id}: {type(exc).__name__}: {exc}"
                    )
        proven = pop.proven_steps()
        fresh.sort(key=lambda n: (n.chain.last not in proven, turn[n.id]))  # stable: parents' order
        if self.llm_step is not None:
            # The LLM's first: they cost tokens already spent, and the compile rung cuts the tail.
            self._emit("rung", "asking the LLM for rewrites")
            llm = self.llm_step.nodes(parents, pop, self.meter, self.gpu, self.allocation)
            fresh = llm + [n for n in fresh if n.id not in {m.id for m in llm}]
        return fresh

    def _recall_generation(self) -> None:
        """Before the first generation, the replayed winners of similar kernels alone through the
        ladder: verified in the time of one candidate instead of a whole generation's, and
        expanded by the first generation like any other variant. Mixed into the first generation,
        they waited for its compile rung and the memory saved nothing (BENCHMARKS.md, memory)."""
        replayed = self._replays(set(self.population.nodes))
        if replayed:
            self._emit("rung", "replaying what won on similar kernels")
            self.ladder.generation(replayed)

    def _generations(self) -> Stop:
        """Generations until a limit, stagnation or exhaustion."""
        self._recall_generation()
        stagnant = 0
        while True:
            stopped = self.ladder.stopped()
            if stopped:
                return stopped
            parents = selection.parents(self.population)
            repairs_owed = self.llm_step is not None and self.llm_step.pending
            if not parents and not repairs_owed:
                return Stop(StopKind.EXHAUSTED, "no verified variant left to expand")
            fresh = self.propose(parents)
            if not fresh:
                continue
            before = selection.Standing.of(self.population)
            self.ladder.generation(fresh)
            self.allocation.observe(self._tallies())  # the bandit's evidence from this search
            if self.llm_step is not None:
                self.llm_step.after(fresh)
            # The end game's share, from what candidates have cost so far in this search.
            self.meter.reserve(self.end_reserve_s())
            if not self.ladder.full_fits():
                return Stop(StopKind.WALL, "no time left for another full verification")
            stagnant = 0 if selection.progressed(self.population, before) else stagnant + 1
            if stagnant >= selection.STAGNATION_GENERATIONS:
                return Stop(StopKind.STAGNATION, f"no better variant in {stagnant} generations")

    def end_reserve_s(self) -> float:
        """The wall seconds the generations leave for the end game: at first a share of the
        budget, then what the end game costs by this search's measurements: the final A/B and a
        forced candidate through the ladder, or only the final A/B where both would take more
        than half the budget (the end game then leaves the candidate out). A fixed 15% let H200
        softmax searches run 10% past a 90 s budget, two forced candidates taking 30 s."""
        cap = END_RESERVE_CAP_FRACTION * self.meter.budget.wall_s
        final = RESERVE_MARGIN * self.endgame.final_s()
        both = final + RESERVE_MARGIN * self.endgame.candidate_s()
        return max(self.initial_reserve_s, both if both <= cap else final)

    def run(self) -> SearchResult:
        try:  # claims the kernel: another live search of it raises SearchBusy
            search_id = self.store.start_search(
                self.key, self.task.file, self.task.kernel, self.device
            )
        except BaseException:
            self.evaluator.close()
            raise
        status = "failed"
        try:
            self._emit("started", f"optimizing {self.task.kernel} on {self.device}")
            self._baseline()
            self._resume()
            self._recall()
            stopped = self._generations()
            if not stopped.cancelled:
                self.meter.release_reserve()
                self.endgame.run()
            status = "cancelled" if stopped.cancelled else "finished"
            prewarm = self.evaluator.prewarm
            if prewarm is not None and prewarm.compiled:
                self.ledger.notes.append(
                    f"compiled {prewarm.compiled} harness specialisations ahead on the CPU "
                    "for the GPU worker's JIT"
                )
            result = self._result(stopped)
            self._learn()
            self.store.finish_search(search_id, status, result)
            best = (
                f"best {self.population.best_speedup:.2f}x"
                if self.population.best_id
                else "no faster variant"
            )
            self._emit("finished", f"done ({result.stopped}): {best}")
            return result
        except BaseException:
            self.store.finish_search(
                search_id, CANCELLED.kind.value if self.cancel.is_set() else status, None
            )
            raise
        finally:
            self.evaluator.close()
            # The runner imported every candidate of this search, and what a candidate left in
            # its modules must not reach another search's timings: the next one starts afresh.
            # (The judge never imports a candidate; the compile workers' dry runs only feed
            # estimates, never a verdict, and they keep their start-up.)
            self.pool.retire(self.device)

    # -- results ----------------------------------------------------------------------------------
    def gpu_s_to_best(self) -> float | None:
        """GPU seconds spent when the best variant was verified (None on a CPU, or when the best
        was resumed from an earlier search)."""
        point = self.ledger.verified_at(self.population.best_id)
        return point.gpu_s if self.gpu and point else None

    def _result(self, stopped: Stop) -> SearchResult:
        pop, ledger = self.population, self.ledger
        variants = sorted(
            (
                report.variant(n, pop, self.original, self.task, self.baseline_facts)
                for n in pop.nodes.values()
                if n.verified and n.id != ORIGINAL
            ),
            key=lambda v: (-v.speedup, v.id),
        )
        ledger.counts.total = sum(1 for n in pop.nodes.values() if n.id != ORIGINAL)
        baseline = [
            BaselineCase(label, us, self.gpu) for label, us in zip(pop.labels, pop.baseline_us)
        ]
        if not self.gpu:
            ledger.notes.append(
                "no GPU: candidates were verified on the CPU interpreter and ranked by the static "
                "cost model; speedups are estimates (measured: false)"
            )
        root = pop.nodes.get(ORIGINAL)
        cases = root.spec.cases if root and root.spec else []
        case_bytes, case_flops = case_bytes_and_flops(cases)
        spent = self.meter.tick()
        if self.llm is not None:
            spent.llm_tokens, spent.llm_dollars = self.llm.tokens, round(self.llm.dollars, 6)
            ledger.notes.extend(n for n in self.llm.notices if n not in ledger.notes)
            ledger.notes.append(self.llm.summary())
        return SearchResult(
            kernel=self.task.kernel,
            file=self.task.file,
            device=self.device,
            measured=self.gpu,
            baseline=baseline,
            variants=variants,
            best=pop.best_id,
            time_to_best_s=pop.time_to_best,
            budget=BudgetReport(self.meter.budget, spent),
            candidates=ledger.counts,
            stopped=str(stopped),
            trajectory=ledger.trajectory,
            notes=ledger.notes,
            seed=self.seed,
            source_hash=source_hash(self.original),
            rung_seconds={k: round(v, 2) for k, v in ledger.rung_seconds.items()},
            original=self.original,
            stage_seconds={k: [round(v, 2) for v in vs] for k, vs in ledger.stage_seconds.items()},
            entry=self.task.entry,
            gpu_s_to_best=self.gpu_s_to_best(),
            case_bytes=case_bytes,
            case_flops=case_flops,
            case_written_bytes=case_written_bytes(cases, self.original),
            ceilings={
                "copy_gbps": self.dev.bandwidth_gbps,
                "bf16_tflops": self.dev.bf16_tflops,
                "read_gbps": self.ceilings.read_gbps if self.ceilings else 0.0,
            },
        )
