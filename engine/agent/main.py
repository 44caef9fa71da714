"""The engine agent: `python -m kernelbrain.engine.agent.main`, driven by the language server.

A JSON-RPC server (pygls) on stdio, so the language server stays light: it never imports torch or
triton, and every compile, run and search happens here or in this process's workers. Requests
that take seconds (compiled views) run in a thread pool; search jobs run in their own threads
with their own worker pools (`jobs.py`). Notifications for job progress are written from the
event loop's thread.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys

from pygls.protocol import JsonRPCProtocol, default_converter
from pygls.server import JsonRPCServer

from ..api import secrets
from ..evaluate.pool import WorkerPool
from ..profile.view import CompiledViewService
from . import protocol as p
from .jobs import JobManager
from .stored import measured, stored_records

VERSION = "0.1.0"
log = logging.getLogger("kernelbrain.agent")


class Agent(JsonRPCServer):
    def __init__(self) -> None:
        super().__init__(JsonRPCProtocol, default_converter)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pool = WorkerPool()
        self.compiled = CompiledViewService(self.pool)
        self.jobs = JobManager(self._job_progress, self._job_finished, self._jobs_changed)

    def _notify(self, method: str, message) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.protocol.notify, method, p.pack(message))

    def _job_progress(self, info, event) -> None:
        self._notify(p.JOB_PROGRESS, p.JobProgress(info, event))

    def _job_finished(self, info, result) -> None:
        self._notify(p.JOB_FINISHED, p.JobFinished(info, result, measured(result)))

    def _jobs_changed(self, infos) -> None:
        self._notify(p.JOB_CHANGED, p.JobList(list(infos)))

    def shutdown(self) -> None:
        self.jobs.shutdown()
        self.pool.close()
        super().shutdown()


def create_agent() -> Agent:
    agent = Agent()

    @agent.feature(p.HELLO)
    def hello(ls: Agent, params):
        ls.loop = asyncio.get_running_loop()
        return p.pack(p.Hello(os.getpid(), VERSION))

    @agent.feature(p.API_KEY)
    def api_key(ls: Agent, params):
        key = p.unpack(params, p.ApiKey).key
        secrets.register(key)
        ls.jobs.api_key = key or None
        return None

    @agent.feature(p.DRAFT_HARNESS)
    @agent.thread()
    def draft_harness(ls: Agent, params):
        return p.pack(ls.jobs.draft_harness(p.unpack(params, p.DraftHarnessRequest)))

    @agent.feature(p.STORED)
    @agent.thread()
    def stored(ls: Agent, params):
        return p.pack(stored_records(p.unpack(params, p.StoredRequest)))

    @agent.feature(p.COMPILED_VIEW)
    @agent.thread()
    def compiled_view(ls: Agent, params):
        return p.pack(ls.compiled.view(p.unpack(params, p.CompiledViewRequest)))

    @agent.feature(p.JOB_START)
    def job_start(ls: Agent, params):
        ls.loop = ls.loop or asyncio.get_running_loop()
        return p.pack(ls.jobs.start(p.unpack(params, p.OptimizeRequest)))

    @agent.feature(p.JOB_CANCEL)
    def job_cancel(ls: Agent, params):
        info = ls.jobs.cancel(p.unpack(params, p.JobCancel).id)
        return p.pack(info) if info is not None else None

    return agent


def main() -> None:
    logging.basicConfig(
        level=os.environ.get("KERNELBRAIN_LOG", "WARNING").upper(),
        stream=sys.stderr,
        format="agent: %(name)s: %(message)s",
    )
    secrets.scrub_logs()
    agent = create_agent()
    try:
        agent.start_io()
    finally:
        agent.jobs.shutdown()
        agent.pool.close()


if __name__ == "__main__":
    main()
