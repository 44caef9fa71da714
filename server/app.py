"""The KernelBrain language server: documents, workspace scan, watcher, publishing, engine jobs.

Only this package knows LSP. It parses with `ast` through the engine's index and rules, answers
lenses, actions and hover from memory, and sends everything heavy (compiled views, searches) to
the engine agent process; it never imports torch or triton.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path
from pygls.workspace import TextDocument

from kernelbrain.engine.api import secrets
from kernelbrain.engine.api.analysis import Finding
from kernelbrain.engine.api.tasks import harness_config

from .compiled import CompiledViews
from .debounce import Debouncer
from .dispatch import AnsweringProtocol, guarded
from .editor_settings import Settings, parse_settings
from .engine_bridge import EngineBridge
from .jobs import JobBoard
from .shared import NO_HARNESS
from .state import FileState, WorkspaceIndex
from .variants import ResultRegistry
from .watcher import WorkspaceWatcher, kernel_files

log = logging.getLogger("kernelbrain.server")
VERSION = "0.1.0"


class KernelBrainServer(LanguageServer):
    """The session: documents and their analysis, trust, publishing, settings and the workspace;
    jobs, stored results and compiled views are its parts (`jobs.py`, `variants.py`,
    `compiled.py`). Features see it as a `shared.Session`."""

    def __init__(self) -> None:
        super().__init__(
            "kernelbrain",
            VERSION,
            protocol_cls=AnsweringProtocol,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
        )
        self.files = WorkspaceIndex()
        self.debouncer = Debouncer()
        self.settings = Settings()
        self.client_trust: bool | None = None  # the editor's workspace trust, when it has one
        self.api_key: str | None = None  # the editor's LLM key: memory only
        self.watcher: WorkspaceWatcher | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._told: set[str] = set()
        self.jobs = JobBoard(self)
        self.results = ResultRegistry(self)
        self.compiled = CompiledViews(self)
        self.engine = EngineBridge(
            self.jobs.on_progress,
            self.jobs.on_finished,
            lambda msg: self.tell_once(
                f"restart:{msg}", f"KernelBrain: {msg}", types.MessageType.Warning
            ),
            self.jobs.on_changed,
        )
        self.harness_findings: dict[str, list[Finding]] = {}

    # -- one dispatch path: every handler registered here is guarded (dispatch.py) ------------
    def feature(self, feature_name: str, options=None):
        register = super().feature(feature_name, options)
        return lambda fn: register(guarded(fn, feature_name))

    def command(self, command_name: str):
        register = super().command(command_name)
        return lambda fn: register(guarded(fn, command_name))

    # -- messages --------------------------------------------------------------------------
    def tell_once(
        self, key: str, message: str, kind: types.MessageType = types.MessageType.Info
    ) -> None:
        """Show a message to the user once per session (partial availability, bad settings)."""
        if key in self._told:
            return
        self._told.add(key)
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def take_api_key(self, key: str | None) -> None:
        """Keep the editor's LLM key in memory and out of every log line from now on."""
        secrets.register(key)
        secrets.scrub_logs()
        self.api_key = key
        self.engine.api_key = key

    def tell(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    # -- documents -------------------------------------------------------------------------
    def open_document(self, uri: str) -> TextDocument | None:
        return self.workspace.text_documents.get(uri)

    def current_text(self, uri: str) -> str | None:
        doc = self.open_document(uri)
        if doc is not None:
            return doc.source
        path = to_fs_path(uri)
        try:
            return Path(path).read_text(encoding="utf-8") if path else None
        except (OSError, UnicodeDecodeError):
            return None

    def analyse_open(self, uri: str) -> FileState | None:
        doc = self.open_document(uri)
        if doc is None:
            return None
        self.debouncer.cancel(uri)
        state = self.files.analyse(uri, doc.path or uri, doc.source, doc.version, True)
        self._after_analysis(state)
        return state

    def schedule_analysis(self, uri: str) -> None:
        self.debouncer.schedule(
            uri, self.settings.debounce_ms / 1000, lambda: self.analyse_open(uri)
        )

    def current(self, uri: str) -> FileState | None:
        """The analysis of the document as the editor has it now (re-analysed if stale)."""
        state = self.files.get(uri)
        doc = self.open_document(uri)
        if doc is not None and (state is None or state.version != doc.version or not state.open):
            state = self.analyse_open(uri)
        return state

    def analyse_disk(self, path: str, text: str | None = None) -> FileState | None:
        """(Re-)analyse a file from disk unless the editor owns it; drop it when gone or kernel-free."""
        uri = from_fs_path(path) or path
        if self.open_document(uri) is not None:
            return self.files.get(uri)
        if text is None:
            try:
                text = Path(path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                text = None
        previous = self.files.get(uri)
        self.results.forget(path)  # the engine's records are asked for again after the analysis
        if text is None or "triton" not in text:
            if previous is not None:
                self.files.drop(uri)
                self.clear(uri)
            return None
        state = self.files.analyse(uri, path, text, None, False)
        if not state.has_kernels and not state.index.errors:
            self.files.drop(uri)
            if previous is not None:
                self.clear(uri)
            return None
        if self.settings.workspace_diagnostics:
            self._after_analysis(state)
        return state

    def on_disk_change(self, path: str) -> None:
        """Watcher callback (event loop thread): debounce bursts of events per file."""
        self.debouncer.schedule(("disk", path), 0.1, lambda: self.analyse_disk(path))

    @property
    def trusted(self) -> bool:
        """Whether this workspace's code may be imported and run: the editor's trust where it
        has one, else the `trustWorkspace` setting (off by default)."""
        return self.client_trust if self.client_trust is not None else self.settings.trust_workspace

    def require_trust(self, what: str) -> str | None:
        """None when trusted; else the message that says why `what` is off (the caller tells
        it: a command pressed gets it every time, a passive feature at most once)."""
        if self.trusted:
            return None
        return (
            f"KernelBrain: {what} is off until this workspace is trusted: it imports and runs "
            "the workspace's code. Static diagnostics work meanwhile. Trust the workspace in "
            "your editor, or set `kernelbrain.trustWorkspace`."
        )

    def on_trust_changed(self) -> None:
        """Trust granted: what was held back (compiled views) starts for the open files."""
        if self.trusted:
            for state in list(self.files):
                if state.open:
                    self._after_analysis(state)
        self.refresh_lenses()

    def _after_analysis(self, state: FileState) -> None:
        self.harness_findings[state.uri] = self._harness_hints(state)
        self.publish(state)
        self.results.fetch(state)
        if (
            state.open
            and self.settings.compiled_view
            and state.has_kernels
            and not state.index.errors
            and self._compiled_view_trusted()
        ):
            self.debouncer.schedule(
                ("compiled", state.uri), 1.0, lambda: self.spawn(self.compiled.refresh(state.uri))
            )

    def _compiled_view_trusted(self) -> bool:
        """Whether the compiled view may run. An editor with a trust of its own (VS Code) says
        why its restricted mode holds back features, so the server adds no second message for
        the same cause; an editor without one is told once."""
        if self.trusted:
            return True
        if self.client_trust is None:
            why = self.require_trust("the compiled view")
            self.tell_once("untrusted-compiled-view", why, types.MessageType.Info)
        return False

    def _harness_hints(self, state: FileState) -> list[Finding]:
        if not self.settings.harness_hints:
            return []
        source = self.current_text(state.uri) if state.index.launchable else None
        return [
            Finding(
                NO_HARNESS,
                f"`{k.name}` has no task harness, so it cannot be optimized or verified: add a "
                "[[tasks]] entry (entry, reference, inputs) or use the quick fix to scaffold one.",
                k.name_span,
                "hint",
                k.name,
                state.path,
            )
            for k in state.index.launchable
            if harness_config(state.path, k.name, source) is None
        ]

    def spawn(self, coro) -> None:
        """Run a coroutine on the loop, logging (never raising) what it fails with."""
        task = asyncio.get_running_loop().create_task(coro)
        task.add_done_callback(
            lambda t: (
                t.cancelled() or (t.exception() and log.error("task failed: %r", t.exception()))
            )
        )

    # -- publishing ------------------------------------------------------------------------
    def findings_for(self, state: FileState) -> list[Finding]:
        findings = list(state.findings) + self.harness_findings.get(state.uri, [])
        view = self.compiled.view(state.uri)
        if view is not None:
            for v in view.views:
                findings.extend(v.findings)
        findings.extend(self.results.measured_findings(state))
        return findings

    def publish(self, state: FileState) -> None:
        from .features.diagnostics import to_diagnostics

        doc = self.open_document(state.uri)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=state.uri,
                diagnostics=to_diagnostics(self.findings_for(state), doc, state.uri),
                version=state.version,
            )
        )

    def clear(self, uri: str) -> None:
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=[])
        )

    def refresh_lenses(self) -> None:
        caps = self.client_capabilities.workspace
        if caps and caps.code_lens and caps.code_lens.refresh_support:
            self.workspace_code_lens_refresh(None)

    async def shutdown_engine(self) -> None:
        await self.engine.stop()

    # -- workspace -------------------------------------------------------------------------
    def workspace_roots(self) -> list[str]:
        roots = [to_fs_path(f.uri) for f in self.workspace.folders.values()]
        if not roots and self.workspace.root_path:
            roots = [self.workspace.root_path]
        return [r for r in roots if r and os.path.isdir(r)]

    async def scan_workspace(self) -> None:
        """Index every kernel file of the workspace (read in a thread, analysed on the loop)."""
        roots = self.workspace_roots()

        loop = asyncio.get_running_loop()
        for path, text in await loop.run_in_executor(None, kernel_files, roots):
            self.analyse_disk(path, text)

    def start_watcher(self) -> None:
        roots = self.workspace_roots()
        if not roots or self.loop is None:
            return
        try:
            self.watcher = WorkspaceWatcher(roots, self.loop, self.on_disk_change)
            self.watcher.start()
        except Exception as exc:  # e.g. inotify watch limit reached
            self.watcher = None
            self.tell_once(
                "watcher",
                f"KernelBrain cannot watch the workspace for changes on disk: {exc}",
                types.MessageType.Warning,
            )

    def apply_settings(self, raw) -> None:
        was_trusted = self.trusted
        self.settings, problems = parse_settings(raw, self.settings)
        if self.trusted != was_trusted and self.loop is not None:
            self.on_trust_changed()
        for problem in problems:
            self.tell_once(
                f"setting:{problem}", f"KernelBrain: {problem}", types.MessageType.Warning
            )

    async def pull_settings(self) -> None:
        caps = self.client_capabilities.workspace
        if not (caps and caps.configuration):
            return
        try:
            items = await self.workspace_configuration_async(
                types.ConfigurationParams(items=[types.ConfigurationItem(section="kernelbrain")])
            )
        except Exception as exc:
            log.warning("workspace/configuration failed: %s", exc)
            return
        if items:
            self.apply_settings(items[0])


def create_server() -> KernelBrainServer:
    from .features import (
        code_actions,
        code_lens,
        commands,
        diagnostics,
        hover,
        lifecycle,
        requests,
        workspace_kernels,
    )

    server = KernelBrainServer()
    for feature in (
        lifecycle,
        diagnostics,
        code_lens,
        code_actions,
        hover,
        commands,
        workspace_kernels,
        requests,
    ):
        feature.register(server)
    return server


def serve() -> None:
    logging.basicConfig(
        level=os.environ.get("KERNELBRAIN_LOG", "WARNING").upper(), format="%(name)s: %(message)s"
    )
    secrets.scrub_logs()  # before the first message: a key may arrive in one
    create_server().start_io()
