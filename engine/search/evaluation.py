"""The evaluation primitives the ladder's rungs are built from: accounted worker calls, dry run
and AOT compile, harness stages, compiles ahead of the GPU, and interleaved timing. The
estimator and the timer are injected."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Protocol

from .. import protocol as m
from ..api import facts
from ..evaluate.devices import is_gpu
from ..evaluate.pool import JUDGE_PREFIX, STARTUP_TIMEOUT_S, WorkerDied, WorkerPool, task_paths
from ..evaluate.verify import candidate_timeout, harness_timeout, run_harness, time_ab
from ..evaluate.work_floor import WorkFloor, held_to_floor
from ..task.spec import Task
from .ledger import Ledger
from .meter import Meter
from .node import ORIGINAL, Fate, Node
from .population import Population
from .prewarm import Prewarm

PREWARM_WAIT_S = 60.0  # longest the GPU waits for a candidate's ahead-of-time compiles
MIN_CALL_S = 5.0  # the least timeout a worker call gets, however little of the budget is left


class Estimator(Protocol):
    """Per-case times (µs) of a dry-run, compiled candidate; None when it cannot say."""

    def estimate(
        self,
        spec: facts.SpecializeResult | None,
        compiled: dict[int, dict[int, facts.CompiledFacts]],
        source: str,
    ) -> list[float] | None: ...


class Timer(Protocol):
    """Runs one interleaved A/B request on the device; raises `WorkerDied` when the worker dies."""

    def __call__(
        self, request: m.TimeAB
    ) -> facts.TimingResult | facts.TimingResults | facts.WorkerError: ...


class WorkerTimer:
    """The default timer: the search's GPU worker, `triton.testing.do_bench`-style timing."""

    def __init__(self, pool: WorkerPool, device: str):
        self.pool, self.device = pool, device

    def __call__(self, request: m.TimeAB):
        return time_ab(self.pool, self.device, request)


class Evaluator:
    def __init__(
        self,
        task: Task,
        device: str,
        seed: int,
        pool: WorkerPool,
        meter: Meter,
        ledger: Ledger,
        population: Population,
        estimator: Estimator,
        timer: Timer,
        compile_devices: list[str],
    ):
        self.task, self.device, self.seed, self.pool = task, device, seed, pool
        self.gpu = is_gpu(device)
        self.meter, self.ledger, self.pop = meter, ledger, population
        self.estimator, self.timer = estimator, timer
        self.compile_devices = compile_devices
        self.prewarm: Prewarm | None = None
        self.floor: WorkFloor | None = None  # set once the original's harness has run (GPU)
        self.original_stage_s: dict[str, float] = {}  # the original's own check, per stage

    def start_workers(self) -> None:
        """Start every worker the search is about to use without a request (imports, sandbox, on
        a GPU the CUDA context), each on its own thread, so that they start together: the
        compile workers the ahead-of-time compiles spread over and, on a GPU, the device's runner
        and judge. Otherwise they start one after another: the prewarm's first dry run started
        only one compile worker, the others when its compiles spread out, and a compile worker
        takes seconds to start. A start that fails is reported by the first real call."""

        # started showing the task's workspace, its secrets hidden
        self.pool.protect(*task_paths(self.task))

        def start(role: str) -> None:
            try:
                self.pool.call(role, m.Ping(), STARTUP_TIMEOUT_S)
            except WorkerDied:
                pass

        roles = list(self.compile_devices)
        if self.gpu:
            roles += [self.device, JUDGE_PREFIX + self.device]
        threads = [threading.Thread(target=start, args=(role,), daemon=True) for role in roles]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def within_budget(self, limit_s: float) -> float:
        """A call's timeout: `limit_s`, or what the wall budget has left when that is less (at
        least MIN_CALL_S): a compile that would outlast the search does not hold the user up
        (a replayed configuration that tiled a head dimension at 2048 compiled for 600 s)."""
        return min(limit_s, max(MIN_CALL_S, self.meter.wall_left_s()))

    def call(self, device: str, request, timeout: float):
        """A worker call, its seconds charged as GPU time when it runs on the GPU."""
        with self.meter.gpu_clock(is_gpu(device)):
            return self.pool.call(device, request, timeout)

    def end(
        self,
        node: Node,
        outcome: Fate,
        rung: str,
        reason: str | None = None,
        message: str = "",
        passed: bool = False,
        details=None,
    ) -> None:
        self.ledger.end(
            node,
            outcome,
            rung,
            score=self.pop.score(node),
            best=self.pop.best_speedup,
            reason=reason,
            message=message,
            passed=passed,
            details=details,
        )

    # -- dry run, compile, estimate ---------------------------------------------------------------
    def specialize_and_compile(self, node: Node, device: str) -> None:
        source = node.source if node.id != ORIGINAL else None
        spec = self.call(
            device, m.Specialize(self.task, source, seed=self.seed), self.within_budget(180.0)
        )
        if not isinstance(spec, facts.SpecializeResult):
            return
        node.spec = spec
        records = [
            (ci, li, rec) for ci, c in enumerate(spec.cases) for li, rec in enumerate(c.launches)
        ]
        if not records:
            return
        unique: dict[str, int] = {}
        order = []
        for _, _, rec in records:
            k = facts.compile_key(rec)
            if k not in unique:
                unique[k] = len(order)
                order.append(rec)
        result = self.call(
            device, m.Compile(node.source, self.task.file, order), self.within_budget(600.0)
        )
        if not isinstance(result, facts.CompileResult):
            return
        node.compiled |= set(unique)
        for ci, li, rec in records:
            node.facts.setdefault(ci, {})[li] = result.facts[unique[facts.compile_key(rec)]]

    def compile_all(self, nodes: list[Node], deadline: float | None = None, first: int = 0) -> None:
        """Dry-run and compile every node, in parallel on the compile workers. With `deadline`
        (a `time.monotonic()` value), a node after the `first` that would start past it is
        `not-run`: a batch sized by past compile times cannot run on when these take longer."""

        def one(i: int, node: Node) -> None:
            if deadline is not None and i >= first and time.monotonic() > deadline:
                node.outcome = Fate.NOT_RUN
                return
            try:
                self.specialize_and_compile(
                    node, self.compile_devices[i % len(self.compile_devices)]
                )
            except WorkerDied as d:
                node.outcome, node.died = Fate.COMPILE_DIED, d.kind

        with ThreadPoolExecutor(max_workers=len(self.compile_devices)) as ex:
            for f in [ex.submit(one, i, n) for i, n in enumerate(nodes)]:
                f.result()

    def estimate(self, node: Node) -> list[float] | None:
        return self.estimator.estimate(node.spec, node.facts, node.source)

    # -- correctness ------------------------------------------------------------------------------
    def harness(self, source: str | None, stages: list[str], rung: str) -> facts.HarnessResult:
        """Some or all correctness stages (`source` None: the original), GPU seconds accounted.
        A candidate's call times out after a floor plus a multiple of what the original's own
        check of those stages took (`candidate_timeout`): one that hangs ends in seconds."""
        timeout = None
        if source is None:
            # The original's check fits in what the budget has left, like every other call: a
            # check that cannot finish in it is the user's to know at once (`check_original`).
            timeout = self.within_budget(harness_timeout(self.device))
        if source is not None and self.gpu:
            self.meter.candidate_on_gpu()
        if source is not None and self.original_stage_s:
            seconds = sum(self.original_stage_s.get(s, 0.0) for s in stages)
            timeout = candidate_timeout(seconds, self.device)
        with self.meter.gpu_clock(self.gpu):
            result = run_harness(
                self.pool, self.task, source, self.device, self.seed, stages=stages,
                timeout_s=timeout, from_call=source is None,
            )  # fmt: skip
        if source is None and result.accepted:
            for stage in result.stages:
                self.original_stage_s[stage.name] = stage.seconds
        self.ledger.harness_seconds(result, rung)
        return result

    def prewarm_all(self, nodes: list[Node], stages: list[str]) -> dict[str, Future]:
        """On a GPU: compile what `stages` will JIT for each node, ahead, on the CPU workers."""
        if not self.gpu or not nodes:
            return {}
        if self.prewarm is None:
            self.prewarm = Prewarm(self.task, self.seed, self.compile_devices, self.call)
        return {n.id: self.prewarm.start(n.source, stages, n.compiled) for n in nodes}

    def await_prewarm(self, warm: dict[str, Future] | None, node_id: str) -> None:
        """Wait (at most PREWARM_WAIT_S) for a node's ahead-of-time compiles, if any were started."""
        if not warm or node_id not in warm:
            return
        with self.ledger.timed("prewarm-wait"):
            try:
                warm[node_id].result(timeout=PREWARM_WAIT_S)
            except FutureTimeout:
                pass

    # -- timing -----------------------------------------------------------------------------------
    def _timed_call(self, request: m.TimeAB):
        """The timer's answer, held to the task's work floor whatever timer ran it."""
        with self.meter.gpu_clock():
            return held_to_floor(self.timer(request), self.floor)

    def time_ab(self, node: Node, rep_ms: float, noise: bool) -> facts.TimingResult | None:
        """`node` against the original on every case, rebased on the original's reference times;
        None (and the node rejected) when the timing fails."""
        req = m.TimeAB(
            self.task, node.source, node.id, rep_ms=rep_ms, noise_check=noise, seed=self.seed
        )
        try:
            answer = self._timed_call(req)
        except WorkerDied as d:
            self.end(node, Fate.REJECTED, "timing", d.kind, d.message)
            return None
        if isinstance(answer, facts.WorkerError):
            self.end(node, Fate.REJECTED, "timing", answer.reason, answer.message)
            return None
        if answer.rejection is not None:
            self.end(
                node, Fate.REJECTED, "timing", answer.rejection.reason, answer.rejection.message
            )
            return None
        return self.pop.rebased(answer)

    def time_together(self, nodes: list[Node], rep_ms: float) -> list[facts.TimingResult | None]:
        """Every node against the original in one interleaved A/B (shared baseline runs and noise
        floor). Should that fail, each alone, so one failing node does not take the others'
        verdicts with it."""
        if len(nodes) > 1:
            req = m.TimeAB(
                self.task,
                nodes[0].source,
                nodes[0].id,
                rep_ms=rep_ms,
                noise_check=True,
                seed=self.seed,
                rivals=[n.source for n in nodes[1:]],
            )
            try:
                answer = self._timed_call(req)
            except WorkerDied:
                answer = None
            if isinstance(answer, facts.TimingResults) and len(answer.results) == len(nodes):
                out: list[facts.TimingResult | None] = []
                for node, t in zip(nodes, answer.results):
                    if t.rejection is not None:
                        self.end(
                            node, Fate.REJECTED, "timing", t.rejection.reason, t.rejection.message
                        )
                        out.append(None)
                    else:
                        out.append(self.pop.rebased(t))
                return out
        return [self.time_ab(n, rep_ms, True) for n in nodes]

    def close(self) -> None:
        if self.prewarm is not None:
            self.prewarm.close()
