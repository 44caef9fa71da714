"""Messages between the language server and the engine agent.

The transport is JSON-RPC over the agent's stdio (pygls on both ends); every params and result
object carries one field, `payload`, holding a msgspec-encoded message below, so both sides
decode into typed structs rather than generic JSON.
"""

from __future__ import annotations

from typing import TypeVar

import msgspec

from ..api.budget import DEFAULT_WALL_S, EDITOR_MAX_CANDIDATES
from ..api.compiled_view import CompiledViewRequest, CompiledViewResult
from ..api.results import SearchEvent, SearchResult

COMPILED_VIEW = "kb/compiledView"
JOB_START = "kb/jobStart"
JOB_CANCEL = "kb/jobCancel"
JOB_LIST = "kb/jobs"
JOB_PROGRESS = "kb/jobProgress"  # agent -> server notification
JOB_FINISHED = "kb/jobFinished"  # agent -> server notification
HELLO = "kb/hello"
API_KEY = "kb/apiKey"  # server -> agent: the LLM key the editor handed over (never logged)
DRAFT_HARNESS = "kb/draftHarness"  # the LLM drafts a harness, the original is checked against it


class Hello(msgspec.Struct):
    pid: int
    version: str


class LLMOptions(msgspec.Struct):
    """Where and how the LLM is asked, as the editor's settings say; None: the engine's
    environment, else the default (`llm.settings.from_environment`). The key travels apart
    (`ApiKey`)."""

    model: str | None = None
    base_url: str | None = None
    max_tokens: int | None = None
    max_dollars: float | None = None
    temperature: float | None = None
    concurrency: int | None = None
    timeout_s: float | None = None
    max_repairs: int | None = None


class JobRequest(msgspec.Struct):
    file: str
    kernel: str
    budget_s: float = DEFAULT_WALL_S
    max_candidates: int | None = EDITOR_MAX_CANDIDATES
    device: str = "auto"
    seed: int = 0
    llm: bool = False  # the LLM mutator on or off
    llm_options: LLMOptions = msgspec.field(default_factory=LLMOptions)
    memory: bool | None = None  # the experience memory (None: on unless KERNELBRAIN_MEMORY=off)


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


class JobFinished(msgspec.Struct):
    job: JobInfo
    result: SearchResult | None = None


T = TypeVar("T")


def pack(message: msgspec.Struct) -> dict:
    return {"payload": msgspec.json.encode(message).decode()}


def unpack(params, kind: type[T]) -> T:
    payload = params["payload"] if isinstance(params, dict) else getattr(params, "payload")
    return msgspec.json.decode(payload, type=kind)


__all__ = ["CompiledViewRequest", "CompiledViewResult", "pack", "unpack"]
