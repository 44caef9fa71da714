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
from ..api.results import SearchEvent, SearchResult
from ..evaluate.candidate import candidate_id
from ..evaluate.devices import is_gpu
from ..evaluate.pool import WorkerPool, default_compile_workers
from ..index.builder import source_hash
from ..llm import LLMMutator
from ..mutate import MutationContext, load_mutators
from ..store import Store, kernel_key
from ..store.memory import Memory
from ..task.spec import Task
from . import report, selection
from .cost_model import CostModel, DeviceModel
from .endgame import RESERVE_MARGIN, EndGame
from .evaluation import Estimator, Evaluator, Timer, WorkerTimer
from .experience import Experience
from .ledger import Ledger
from .llm_step import LLMStep
from .lowering_step import LoweringStep
from .meter import CANCELLED, Meter, Stop, StopKind
from .node import ORIGINAL, Node
from .population import Population
from .rungs import Ladder
from .start import check_original, resume

END_RESERVE_FRACTION = 0.15  # of the wall budget, kept for the end game
END_RESERVE_MAX_S = 45.0  # ... at first; once candidates are measured, what the end game costs
END_RESERVE_CAP_FRACTION = 0.5  # of the wall budget, at most, whatever it costs


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
        lowering: bool | None = None,
    ):
        """`estimator` (default: the cost model on `device_model`) ranks compiled candidates and
        stands in for timing without a GPU; `timer` (default: the GPU worker) runs the A/Bs;
        `ceilings` (the device's, measured by the judge) set the floor every timing is held to;
        `llm` (none: offline) proposes rewrites beside the offline mutators; `memory` (none:
        no experience) sizes each mutator's share by what paid on similar kernels before, and
        learns what paid here; `lowering` (None: on a GPU) starts from torch.compile's kernels
        of the reference."""
        self.task, self.device, self.seed, self.pool = task, device, seed, pool
        self.gpu = is_gpu(device)
        self.dev = device_model or DeviceModel()
        self.ceilings = ceilings
        if llm is not None:  # the LLM's caps join the budget (the caller's stays as it was)
            budget = msgspec.structs.replace(
                budget, llm_tokens=llm.settings.max_tokens, llm_dollars=llm.settings.max_dollars
            )
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
        self.experience = Experience(
            memory,
            task,
            self.original,
            seed,
            self.mutators,
            self.population,
            self.ledger,
            self.meter,
        )
        self.llm = llm
        self.llm_step = LLMStep(llm, task, seed, self.ledger.notes) if llm is not None else None
        self.lowering = LoweringStep.if_wanted(lowering, task, self.original, seed, self.gpu, store)

    def baseline(self) -> None:
        """The original through its whole harness and timing (`start.check_original`)."""
        root = check_original(
            task=self.task,
            original=self.original,
            device=self.device,
            pool=self.pool,
            evaluator=self.evaluator,
            population=self.population,
            ledger=self.ledger,
            meter=self.meter,
            ceilings=self.ceilings
            or facts.Ceilings("device model", self.dev.bandwidth_gbps, self.dev.bf16_tflops),
            emit=self._emit,
        )
        self.baseline_facts = root.facts

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

    # -- generations ------------------------------------------------------------------------------
    def propose(self, parents: list[Node]) -> list[Node]:
        """Every mutator on every parent, ordered so that what the compile rung cuts when time is
        short is the least promising: rewrites that already made some variant faster come first,
        and each mutator's proposals take turns with the others'."""
        pop, fresh, turn, seen = self.population, [], {}, set(self.population.nodes)
        for parent in parents:
            parent.expanded = True
            ctx = mutation_context(self.task, self.seed, pop, parent)
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
                        if taken >= self.experience.allocation.quota(name):
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
            llm = self.llm_step.nodes(
                parents, pop, self.meter, self.gpu, self.experience.allocation
            )
            fresh = llm + [n for n in fresh if n.id not in {m.id for m in llm}]
        return fresh

    def _recall_generation(self) -> None:
        """Before the first generation, the replayed winners of similar kernels alone through the
        ladder: verified in the time of one candidate instead of a whole generation's, and
        expanded by the first generation like any other variant. Mixed into the first generation,
        they would wait for its compile rung and the memory would save nothing (BENCHMARKS.md,
        memory)."""
        if self.lowering is not None:
            self._emit("rung", "torch.compile of the reference: its kernels as candidates")
            lowered = self.lowering.nodes(
                self.evaluator.call, self.device, self.meter, self.ledger.notes
            )
            self.lowering.tell(self.population)
            if lowered:
                self.ladder.generation(lowered)
        replayed = self.experience.replays(set(self.population.nodes), self.llm_step)
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
            self.experience.allocation.observe(
                self.experience.tallies()
            )  # the bandit's evidence from this search
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
            self.baseline()
            resume(self.store, self.key, self.device, self.population, self.ladder, self.ledger)
            self.experience.recall()
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
            result = report.search_result(
                stopped,
                task=self.task,
                device=self.device,
                original=self.original,
                seed=self.seed,
                population=self.population,
                ledger=self.ledger,
                meter=self.meter,
                llm=self.llm,
                baseline_facts=self.baseline_facts,
                gpu_s_to_best=self.gpu_s_to_best(),
                ceilings={
                    "copy_gbps": self.dev.bandwidth_gbps,
                    "bf16_tflops": self.dev.bf16_tflops,
                    "read_gbps": self.ceilings.read_gbps if self.ceilings else 0.0,
                },
            )
            self.experience.learn()
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


def mutation_context(task, seed: int, pop: Population, parent: Node) -> MutationContext:
    """What the mutators see of a parent: its source, the step that made it where that paid,
    and the configurations torch.compile chose for the reference (tried first)."""
    return MutationContext(
        task,
        parent.source,
        seed=seed,
        previous=pop.paid_step(parent),
        suggested=pop.compiler_configs,
    )
