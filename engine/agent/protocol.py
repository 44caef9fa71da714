"""Messages between the language server and the engine agent.

The transport is JSON-RPC over the agent's stdio (pygls on both ends); every params and result
object carries one field, `payload`, holding a msgspec-encoded message below, so both sides
decode into typed structs rather than generic JSON.
"""

from __future__ import annotations

from typing import TypeVar

import msgspec

from ..api.compiled_view import CompiledViewRequest, CompiledViewResult
from ..api.request import LLMOptions, OptimizeRequest
from ..api.results import SearchEvent, SearchResult

COMPILED_VIEW = "kb/compiledView"
JOB_START = "kb/jobStart"  # an OptimizeRequest; answered with the JobInfo
JOB_CANCEL = "kb/jobCancel"
JOB_PROGRESS = "kb/jobProgress"  # agent -> server notification
JOB_FINISHED = "kb/jobFinished"  # agent -> server notification
JOB_CHANGED = "kb/jobChanged"  # agent -> server notification: states and queue places (JobList)
HELLO = "kb/hello"
API_KEY = "kb/apiKey"  # server -> agent: the LLM key the editor handed over (never logged)
DRAFT_HARNESS = "kb/draftHarness"  # the LLM drafts a harness, the original is checked against it
STORED = "kb/stored"  # server -> agent: what the workspace's store holds for a file's kernels


class Hello(msgspec.Struct):
    pid: int
    version: str


class ApiKey(msgspec.Struct):
    key: str | None


class DraftHarnessRequest(msgspec.Struct):
    file: str
    kernel: str
    device: str = "auto"
    llm_options: LLMOptions = msgspec.field(default_factory=LLMOptions)


class DraftHarnessResult(msgspec.Struct):
    """A harness the original passed (`held`), as the texts to write; else why none held."""

    held: bool
    message: str  # what was checked and the LLM's rationale, or why nothing held (scrubbed)
    entry: str = ""
    harness_path: str = ""
    harness_text: str = ""
    config_path: str = ""
    config_text: str = ""
    created_config: bool = False
    rounds: int = 0
    spent: str = ""  # the LLM's tokens and dollars


class JobInfo(msgspec.Struct):
    id: str
    file: str
    kernel: str
    device: str
    state: str  # "queued" | "running" | "finished" | "cancelled" | "failed"
    fraction: float = 0.0
    message: str = ""
    best_speedup: float | None = None
    best_id: str | None = None
    measured: bool = False
    queued_behind: int = 0
    error: str | None = None
    worker_pids: list[int] = []


class JobCancel(msgspec.Struct):
    id: str


class JobList(msgspec.Struct):
    jobs: list[JobInfo]


class JobProgress(msgspec.Struct):
    job: JobInfo
    event: SearchEvent


class MeasuredFinding(msgspec.Struct):
    """A KB3xx finding of a measured search: where its cases stand on the roofline."""

    code: str
    severity: str
    message: str


class KernelRecord(msgspec.Struct):
    """What the engine keeps about one kernel of a file: its latest finished search (with that
    search's KB3xx findings when it was measured) and its share of the latest profile that ran it."""

    kernel: str
    result: SearchResult | None = None
    measured: list[MeasuredFinding] = []
    profile_share: float | None = None
    profile_script: str | None = None


class StoredRequest(msgspec.Struct):
    file: str
    kernels: list[str]


class StoredResults(msgspec.Struct):
    records: list[KernelRecord]


class JobFinished(msgspec.Struct):
    job: JobInfo
    result: SearchResult | None = None
    measured: list[MeasuredFinding] = []  # the result's KB3xx findings, when it was measured


T = TypeVar("T")


def pack(message: msgspec.Struct) -> dict:
    return {"payload": msgspec.json.encode(message).decode()}


def unpack(params, kind: type[T]) -> T:
    payload = params["payload"] if isinstance(params, dict) else getattr(params, "payload")
    return msgspec.json.decode(payload, type=kind)


__all__ = [
    "CompiledViewRequest",
    "CompiledViewResult",
    "LLMOptions",
    "OptimizeRequest",
    "pack",
    "unpack",
]
