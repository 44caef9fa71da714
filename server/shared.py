"""Types and codes that the server's session (`app.py`) and its features share.

Features import these instead of `app.py`, so the dependency runs one way: app -> features.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import msgspec
from lsprotocol import types
from pygls.workspace import TextDocument

from kernelbrain.engine.agent import protocol as p
from kernelbrain.engine.api.analysis import Finding

if TYPE_CHECKING:
    from .compiled import CompiledViews
    from .debounce import Debouncer
    from .editor_settings import Settings
    from .engine_bridge import EngineBridge
    from .jobs import JobBoard
    from .state import FileState, WorkspaceIndex
    from .variants import ResultRegistry
    from .watcher import WorkspaceWatcher

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


class Session(Protocol):
    """What a feature handler (and a part of the session) reads and calls: the one interface
    every handler of `features/` takes as `ls`, implemented by `app.KernelBrainServer`."""

    # state
    files: WorkspaceIndex  # every analysed file, open or from disk
    settings: Settings
    results: ResultRegistry  # search results from the engine, and the variants offered now
    jobs: JobBoard  # this session's search jobs
    compiled: CompiledViews  # compiled views of the open files
    engine: EngineBridge  # the engine agent process
    debouncer: Debouncer
    watcher: WorkspaceWatcher | None
    loop: asyncio.AbstractEventLoop | None
    client_trust: bool | None  # the editor's workspace trust, when it has one
    api_key: str | None  # the editor's LLM key, in memory only

    # pygls
    protocol: Any
    work_done_progress: Any
    client_capabilities: types.ClientCapabilities

    def workspace_apply_edit_async(self, params: types.ApplyWorkspaceEditParams) -> Any: ...

    # documents and analysis
    def open_document(self, uri: str) -> TextDocument | None: ...
    def current_text(self, uri: str) -> str | None: ...
    def current(self, uri: str) -> FileState | None: ...
    def analyse_open(self, uri: str) -> FileState | None: ...
    def analyse_disk(self, path: str, text: str | None = None) -> FileState | None: ...
    def schedule_analysis(self, uri: str) -> None: ...
    def findings_for(self, state: FileState) -> list[Finding]: ...

    # publishing and messages
    def publish(self, state: FileState) -> None: ...
    def clear(self, uri: str) -> None: ...
    def refresh_lenses(self) -> None: ...
    def tell(self, message: str, kind: types.MessageType = ...) -> None: ...
    def tell_once(self, key: str, message: str, kind: types.MessageType = ...) -> None: ...
    def spawn(self, coro) -> None: ...

    # trust, settings, lifecycle
    @property
    def trusted(self) -> bool: ...
    def require_trust(self, what: str) -> str | None: ...
    def on_trust_changed(self) -> None: ...
    def take_api_key(self, key: str | None) -> None: ...
    def apply_settings(self, raw) -> None: ...
    async def pull_settings(self) -> None: ...
    async def scan_workspace(self) -> None: ...
    def start_watcher(self) -> None: ...
    async def shutdown_engine(self) -> None: ...
