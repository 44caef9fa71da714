"""The optimize service: the one composition root of a search, for the CLI and the editor alike.

It resolves the task and the folder its results live in, opens and closes the store, measures
(or loads) the device's ceilings and builds the cost model's device from them, and runs the
search with an event stream. Front ends only say what to search and how to show progress, so the
same request gives the same search whichever front end sent it.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable

from .api import facts as m
from .api.budget import Budget
from .api.request import LLMOptions, OptimizeRequest
from .api.results import SearchEvent, SearchResult
from .evaluate.devices import is_gpu, resolve_device
from .evaluate.pool import WorkerPool
from .llm import LLMMutator
from .llm.settings import resolve_llm
from .search.cost_model import DeviceModel
from .search.driver import Search
from .search.start import SearchError
from .store import SearchBusy, Store
from .store.memory import Memory, memory_enabled
from .task import find_task
from .task.spec import Task

__all__ = [
    "SearchBusy",
    "SearchError",
    "device_ceilings",
    "device_model",
    "optimize",
    "task_root",
]


def task_root(task: Task) -> Path:
    """Where a task's results live: the folder of its harness config, else the kernel's own."""
    return Path(task.config).parent if task.config else Path(task.file).parent


def device_ceilings(pool: WorkerPool, device: str, store: Store) -> m.Ceilings | None:
    """The device's measured ceilings (measured once per device by its judge, then cached), kept
    in the store too; None off a GPU or when they cannot be measured."""
    if not is_gpu(device):
        return None
    from .evaluate.ceilings import CeilingCache

    ce = CeilingCache().get_or_measure(pool, device)
    if ce is not None:
        store.save_ceilings(ce.device_name, ce.copy_gbps, ce.bf16_tflops, ce.measured_at)
    return ce


def device_model(ceilings: m.Ceilings | None) -> DeviceModel:
    """The cost model's device: with the measured ceilings when known, else the defaults."""
    if ceilings is None:
        return DeviceModel()
    return DeviceModel(bandwidth_gbps=ceilings.copy_gbps, bf16_tflops=ceilings.bf16_tflops)


def _wait_for_other_search(
    store: Store,
    task: Task,
    wait: bool,
    cancel: threading.Event | None,
    on_notice: Callable[[str], None] | None,
) -> None:
    """Before the budget starts: when another search holds the kernel, wait until it ends (said
    once) or, not waiting, raise `SearchBusy`."""
    said = False
    while (holder := store.running_search(task.file, task.kernel)) is not None:
        if not wait:
            raise SearchBusy(holder)
        if not said and on_notice is not None:
            on_notice(f"{SearchBusy(holder)}; waiting")
            said = True
        if cancel is not None and cancel.wait(0.5):
            return  # the search itself then stops as cancelled
        if cancel is None:
            time.sleep(0.5)


def _llm_mutator(
    options: LLMOptions | None, key: str | None, on_notice: Callable[[str], None] | None
) -> LLMMutator | None:
    """The LLM mutator a request asks for: its options over the environment's settings, and the
    key handed over (else the environment's). Raises ValueError on a setting out of range."""
    if options is None:
        return None
    settings, env_key = resolve_llm(options)
    return LLMMutator(settings, key or env_key, notify=on_notice)


def optimize(
    request: OptimizeRequest,
    *,
    on_event: Callable[[SearchEvent], None] | None = None,
    cancel: threading.Event | None = None,
    pool: WorkerPool | None = None,
    on_notice: Callable[[str], None] | None = None,
    task: Task | None = None,
    llm_key: str | None = None,
) -> SearchResult:
    """Run one search. Raises `TaskError` (no or a broken harness), `ValueError` (an unknown
    device), `SearchError` (the original fails its harness) or `SearchBusy` (another search of
    the kernel runs and `request.wait` is off). `pool`: the caller's, so that it can kill the
    workers on cancel; else one of its own, closed at the end. `on_notice`: store notices (a
    corrupt database moved aside, waiting for another search, the LLM off and why). `llm_key`:
    the API key for `request.llm` (kept out of the request, which is logged and stored)."""
    started_at = request.started_at if request.started_at is not None else time.monotonic()
    task = task or find_task(request.file, request.kernel)
    device = resolve_device(request.device)
    store = Store(task_root(task))
    own_pool = pool is None
    pool = pool or WorkerPool()
    memory = None
    try:
        if store.notice is not None and on_notice is not None:
            on_notice(store.notice.message)
        if memory_enabled(request.memory):
            memory = Memory()
            if memory.notice is not None and on_notice is not None:
                on_notice(memory.notice)
        _wait_for_other_search(store, task, request.wait, cancel, on_notice)
        budget = Budget(
            wall_s=request.budget_s, max_candidates=request.max_candidates, started_at=started_at
        )
        ceilings = device_ceilings(pool, device, store)
        search = Search(
            task,
            device=device,
            budget=budget,
            store=store,
            pool=pool,
            seed=request.seed,
            mutators=request.mutators,
            lowering=request.lowering,
            on_event=on_event,
            cancel=cancel,
            compile_workers=request.compile_workers,
            device_model=device_model(ceilings),
            ceilings=ceilings,
            llm=_llm_mutator(request.llm, llm_key, on_notice),
            memory=memory,
        )
        return search.run()
    finally:
        if own_pool:
            pool.close()
        if memory is not None:
            memory.close()
        store.close()
