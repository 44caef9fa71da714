"""Types and codes that the server's session (`app.py`) and its features share.

Features import these instead of `app.py`, so the dependency runs one way: app -> features.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from kernelbrain.engine.agent import protocol as p

NO_HARNESS = "KB003"  # a kernel with no task harness: a hint with a quick fix that scaffolds one
JOB_CHANGED = (
    "kernelbrain/jobChanged"  # server -> client: one job's state, as `kernelbrain/jobs` lists it
)


@dataclass
class RunningJob:
    """A search job this session started, with the work-done progress token that shows it."""

    info: p.JobInfo
    uri: str
    kernel: str
    token: str | None


def job_json(job: RunningJob) -> dict:
    """A job as clients see it, in `kernelbrain/jobs` and `kernelbrain/jobChanged` alike."""
    return msgspec.to_builtins(job.info) | {"uri": job.uri}
