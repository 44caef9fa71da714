"""Search jobs for the editor: one queue per device, one running search per device.

Each job runs the optimize service (`service.py`, as the CLI does) in a thread with its own
worker pool. Cancelling sets the search's
cancel flag and kills that pool's worker processes at once (a thread cannot be interrupted, so
this is the job's own kill path); the search then returns what it verified so far.
"""

from __future__ import annotations

import itertools
import threading
from typing import Callable

import msgspec

from ..api.request import OptimizeRequest
from ..api.results import SearchEvent, SearchResult
from ..evaluate.devices import resolve_device
from ..evaluate.pool import WorkerPool
from ..llm.settings import resolve_llm
from ..service import SearchBusy, SearchError, optimize
from ..task import TaskError
from .protocol import DraftHarnessRequest, DraftHarnessResult, JobInfo

_ids = itertools.count(1)


class Job:
    def __init__(self, request: OptimizeRequest, device: str):
        self.request = request
        self.info = JobInfo(
            f"job-{next(_ids)}", request.file, request.kernel or "", device, "queued"
        )
        self.cancel = threading.Event()
        self.pool: WorkerPool | None = None
        self.thread: threading.Thread | None = None


class JobManager:
    def __init__(
        self,
        on_progress: Callable[[JobInfo, SearchEvent], None],
        on_finished: Callable[[JobInfo, SearchResult | None], None],
        on_changed: Callable[[list[JobInfo]], None] = lambda infos: None,
    ):
        self.on_progress = on_progress
        self.on_finished = on_finished
        self.on_changed = on_changed  # a job started running, or the queue behind it moved
        self.jobs: dict[str, Job] = {}
        self._queues: dict[str, list[Job]] = {}
        self._running: dict[str, Job] = {}
        self._lock = threading.Lock()
        self.api_key: str | None = None  # handed over by the editor; else the environment's

    def start(self, request: OptimizeRequest) -> JobInfo:
        try:
            device = resolve_device(request.device)
        except ValueError:
            device = resolve_device("auto")
        job = Job(request, device)
        with self._lock:
            self.jobs[job.info.id] = job
            queue = self._queues.setdefault(device, [])
            queue.append(job)
            job.info.queued_behind = len(queue) - 1 + (device in self._running)
        self._pump(device)
        return job.info

    def _pump(self, device: str) -> None:
        with self._lock:
            if device in self._running or not self._queues.get(device):
                return
            job = self._queues[device].pop(0)
            self._running[device] = job
            job.info.state = "running"
            job.info.queued_behind = 0
            for i, waiting in enumerate(self._queues[device]):
                waiting.info.queued_behind = i + 1
            changed = [job.info] + [w.info for w in self._queues[device]]
        self.on_changed(changed)
        job.thread = threading.Thread(target=self._run, args=(job,), name=job.info.id, daemon=True)
        job.thread.start()

    def _run(self, job: Job) -> None:
        result: SearchResult | None = None
        req = job.request
        try:
            job.pool = WorkerPool()
            if job.cancel.is_set():
                job.pool.kill()

            def on_event(event: SearchEvent) -> None:
                job.info.fraction = event.fraction
                job.info.message = event.message
                job.info.best_speedup = event.best_speedup
                job.info.best_id = event.best_id
                job.info.measured = event.measured
                job.info.worker_pids = job.pool.pids() if job.pool else []
                self.on_progress(job.info, event)

            request = msgspec.structs.replace(req, device=job.info.device)
            result = optimize(
                request, on_event=on_event, cancel=job.cancel, pool=job.pool, llm_key=self.api_key
            )
            job.info.state = "cancelled" if result.stopped == "cancelled" else "finished"
            job.info.best_id, job.info.measured = result.best, result.measured
            if result.best:
                job.info.best_speedup = next(
                    v.speedup for v in result.variants if v.id == result.best
                )
        except Exception as exc:  # never let a job take the agent down
            if (
                job.cancel.is_set()
            ):  # a cancel kills the workers: whatever that broke, it was asked for
                job.info.state = "cancelled"
            elif isinstance(exc, (TaskError, SearchError, SearchBusy)):
                job.info.state, job.info.error = "failed", str(exc)
            else:
                job.info.state, job.info.error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            if job.pool is not None:
                job.pool.close()
            job.info.worker_pids = []
            with self._lock:
                self._running.pop(job.info.device, None)
            self.on_finished(job.info, result)
            self._pump(job.info.device)

    def draft_harness(self, req: DraftHarnessRequest) -> DraftHarnessResult:
        """The KB003 quick fix with the LLM: a drafted harness the original passes, as texts for
        the editor to offer as an edit (nothing is written here), or why none held. Runs in the
        agent's request thread, beside any search: the check is a few small harness runs."""
        from ..api.secrets import scrub
        from ..llm.harness_draft import DraftFailed, draft_checked
        from ..llm.mutator import LLMMutator

        try:
            settings, env_key = resolve_llm(req.llm_options)
        except ValueError as exc:  # a bad KERNELBRAIN_LLM_* in the engine's environment
            return DraftHarnessResult(False, str(exc))
        llm = LLMMutator(settings, self.api_key or env_key)
        try:
            device = resolve_device(req.device)
        except ValueError:
            device = resolve_device("auto")
        try:
            draft = draft_checked(req.file, req.kernel, llm, device)
        except (DraftFailed, TaskError) as exc:
            return DraftHarnessResult(False, scrub(str(exc), limit=2000), spent=llm.summary())
        sc = draft.scaffold
        return DraftHarnessResult(
            True,
            scrub(
                f"drafted by {settings.model} in {draft.rounds} round(s); the original passes it "
                f"on {draft.checked}. Read it before you trust it: {draft.rationale}",
                limit=2000,
            ),
            sc.entry,
            str(sc.harness),
            sc.harness_text,
            str(sc.config),
            sc.config_text,
            sc.created_config,
            draft.rounds,
            llm.summary(),
        )

    def cancel(self, job_id: str) -> JobInfo | None:
        job = self.jobs.get(job_id)
        if job is None:
            return None
        with self._lock:
            queue = self._queues.get(job.info.device, [])
            if job in queue:
                queue.remove(job)
                job.info.state = "cancelled"
                self.on_finished(job.info, None)
                return job.info
        job.cancel.set()
        if job.pool is not None:
            job.pool.kill()  # the workers go now; the search notices and returns its best so far
        return job.info

    def shutdown(self) -> None:
        for job in list(self.jobs.values()):
            if job.info.state in ("queued", "running"):
                self.cancel(job.info.id)
