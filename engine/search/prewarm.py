"""Compile ahead, on the CPU workers, what a GPU correctness rung is about to JIT-compile.

The harness's small and odd-sized inputs specialise each kernel differently from the benchmark
cases the compile rung compiled (other dtypes, integers not divisible by 16), so the GPU worker
JIT-compiled them itself, one after another: in one H200 matmul search (5 minutes) the smoke rung
took 85 s for 48 candidates, ~1.7 s each, nearly all of it compiling, and each full harness
~10 s. Triton's on-disk cache is keyed by the kernel's source and its specialisation, not by the
process, so a cubin compiled here by `triton.compile` for the same key is loaded by the GPU
worker's JIT instead of compiled (quick timing, whose cases the compile rung covers, took
~0.5 s per candidate in the same run).

For each candidate: one dry run of the stages' inputs on a compile worker (`Specialize.stages`)
records every launch; each new specialisation is then compiled as its own job, so one
candidate's specialisations compile in parallel on all the compile workers while the GPU works
on the candidate before it.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable

from .. import protocol as m
from ..api import facts
from ..task.spec import Task

DRY_RUN_TIMEOUT_S = 120.0
COMPILE_TIMEOUT_S = 300.0


class Prewarm:
    def __init__(self, task: Task, seed: int, devices: list[str], call: Callable):
        """`call(device, request, timeout)` talks to a worker (the search's accounted call)."""
        self.task = task
        self.seed = seed
        self.call = call
        self._free: queue.Queue[str] = queue.Queue()
        for d in devices:
            self._free.put(d)
        self._ex = ThreadPoolExecutor(max_workers=len(devices), thread_name_prefix="prewarm")
        self.compiled = 0  # specialisations compiled ahead so far

    def _on_a_worker(self, request, timeout: float):
        device = self._free.get()
        try:
            return self.call(device, request, timeout)
        except Exception as exc:  # a dead or hung compiler only loses the head start
            return exc
        finally:
            self._free.put(device)

    def start(self, source: str, stages: list[str], known: set[str]) -> Future:
        """Dry-run `source` on `stages`' inputs, then compile every specialisation whose key is not
        in `known` (already compiled). The future resolves, never raises, when all are done."""
        done: Future = Future()
        spec = self._ex.submit(
            self._on_a_worker, m.Specialize(self.task, source, self.seed, stages), DRY_RUN_TIMEOUT_S
        )
        spec.add_done_callback(
            lambda f: self._compile(source, None if f.cancelled() else f.result(), known, done)
        )
        return done

    def _compile(self, source: str, spec, known: set[str], done: Future) -> None:
        records: dict[str, facts.LaunchRecord] = {}
        if isinstance(spec, facts.SpecializeResult):
            for case in spec.cases:
                for rec in case.launches:
                    key = facts.compile_key(rec)
                    if key not in known:
                        records.setdefault(key, rec)
        if not records:
            done.set_result(0)
            return
        left = [len(records)]
        lock = threading.Lock()

        def one_done(_):
            with lock:
                left[0] -= 1
                finished = left[0] == 0
            if finished:
                known.update(records)
                self.compiled += len(records)
                done.set_result(len(records))

        for rec in records.values():
            try:
                job = self._ex.submit(
                    self._on_a_worker,
                    m.Compile(source, self.task.file, [rec], sass=False),
                    COMPILE_TIMEOUT_S,
                )
            except RuntimeError:  # closed: the search has ended
                done.set_result(0)
                return
            job.add_done_callback(one_done)

    def close(self) -> None:
        self._ex.shutdown(wait=False, cancel_futures=True)
