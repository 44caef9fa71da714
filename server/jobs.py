"""The search jobs this session started, as the engine agent reports them: each change is shown
as work-done progress and pushed to the client (`kernelbrain/jobChanged`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from kernelbrain.engine.agent import protocol as p

from .shared import JOB_CHANGED, RunningJob, job_json

if TYPE_CHECKING:
    from .shared import Session


class JobBoard:
    def __init__(self, session: Session):
        self.session = session
        self.jobs: dict[str, RunningJob] = {}
        self.token_jobs: dict[str, str] = {}  # work-done progress token -> job id

    def add(self, job: RunningJob) -> None:
        self.jobs[job.info.id] = job
        if job.token is not None:
            self.token_jobs[job.token] = job.info.id
        self.announce(job)

    def active(self, path: str, kernel: str) -> RunningJob | None:
        """The queued or running job of this kernel, if any."""
        return next(
            (
                j
                for j in self.jobs.values()
                if j.kernel == kernel
                and j.info.file == path
                and j.info.state in ("queued", "running")
            ),
            None,
        )

    def announce(self, job: RunningJob) -> None:
        """Push a job's state to the client (`kernelbrain/jobChanged`): a client shows progress
        and results from these notifications instead of polling `kernelbrain/jobs`."""
        self.session.protocol.notify(JOB_CHANGED, job_json(job))

    def on_changed(self, msg: p.JobList) -> None:
        for info in msg.jobs:
            job = self.jobs.get(info.id)
            if job is not None:
                job.info = info
                self.announce(job)
        self.session.refresh_lenses()

    def on_progress(self, msg: p.JobProgress) -> None:
        job = self.jobs.get(msg.job.id)
        if job is None:
            return
        job.info = msg.job
        self.announce(job)
        if job.token is not None:
            best = (
                f" · best {msg.event.best_speedup:.2f}x{'' if msg.event.measured else ' (est.)'}"
                if msg.event.best_speedup
                else ""
            )
            self.session.work_done_progress.report(
                job.token,
                types.WorkDoneProgressReport(
                    message=f"{msg.event.message}{best}"[:200],
                    percentage=int(msg.event.fraction * 100),
                    cancellable=True,
                ),
            )

    def on_finished(self, msg: p.JobFinished) -> None:
        job = self.jobs.get(msg.job.id)
        if job is None:
            return
        job.info = msg.job
        result = msg.result
        if result is not None:
            self.session.results.put(
                result.file, p.KernelRecord(result.kernel, result, msg.measured)
            )
        self.announce(job)  # after the result is in: a client that asks for it now gets it
        if job.token is not None:
            self.session.work_done_progress.end(
                job.token, types.WorkDoneProgressEnd(message=self.summary(msg))
            )
            self.token_jobs.pop(job.token, None)
        if msg.job.state == "failed":
            self.session.tell(
                f"KernelBrain: optimizing `{job.kernel}` failed: {msg.job.error}",
                types.MessageType.Error,
            )
        else:
            self.session.tell(f"KernelBrain: {self.summary(msg)}")
        state = self.session.files.get(job.uri)
        if state is not None:
            self.session.publish(state)
        self.session.refresh_lenses()

    @staticmethod
    def summary(msg: p.JobFinished) -> str:
        r = msg.result
        if r is None:
            return f"`{msg.job.kernel}`: {msg.job.state}"
        best = next((v for v in r.variants if v.id == r.best), None)
        if best is None:
            return f"`{r.kernel}`: no faster verified variant ({msg.job.state}, {r.stopped})"
        kind = "faster" if best.measured else "faster (estimated)"
        return f"`{r.kernel}`: {len(r.variants)} verified variant(s), best {best.speedup:.2f}x {kind} ({msg.job.state})"
