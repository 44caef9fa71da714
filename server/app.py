"""The KernelBrain language server: document lifecycle, workspace scan, watcher, publishing.

Only this package knows LSP. It parses with `ast` through the engine's index and rules, answers
lenses, actions and hover from `WorkspaceIndex` in memory, and never imports torch or triton.
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

from kernelbrain.engine.check import iter_python_files

from .debounce import Debouncer
from .settings import Settings, parse_settings
from .state import FileState, WorkspaceIndex
from .watcher import WorkspaceWatcher

log = logging.getLogger("kernelbrain.server")
VERSION = "0.1.0"
# A workspace scan reads at most this many Python files; monorepos keep the server responsive.
MAX_SCANNED_FILES = 5000


class KernelBrainServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("kernelbrain", VERSION, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.files = WorkspaceIndex()
        self.debouncer = Debouncer()
        self.settings = Settings()
        self.watcher: WorkspaceWatcher | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._told: set[str] = set()

    # -- messages --------------------------------------------------------------------------
    def tell_once(self, key: str, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        """Show a message to the user once per session (partial availability, bad settings)."""
        if key in self._told:
            return
        self._told.add(key)
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    # -- documents -------------------------------------------------------------------------
    def open_document(self, uri: str) -> TextDocument | None:
        doc = self.workspace.text_documents.get(uri)
        return doc

    def analyse_open(self, uri: str) -> FileState | None:
        doc = self.open_document(uri)
        if doc is None:
            return None
        self.debouncer.cancel(uri)
        state = self.files.analyse(uri, doc.path or uri, doc.source, doc.version, True)
        self.publish(state)
        return state

    def schedule_analysis(self, uri: str) -> None:
        self.debouncer.schedule(uri, self.settings.debounce_ms / 1000, lambda: self.analyse_open(uri))

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
            self.publish(state)
        return state

    def on_disk_change(self, path: str) -> None:
        """Watcher callback (event loop thread): debounce bursts of events per file."""
        self.debouncer.schedule(("disk", path), 0.1, lambda: self.analyse_disk(path))

    # -- publishing ------------------------------------------------------------------------
    def publish(self, state: FileState) -> None:
        from .features.diagnostics import to_diagnostics

        doc = self.open_document(state.uri)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=state.uri, diagnostics=to_diagnostics(state.findings, doc), version=state.version
            )
        )

    def clear(self, uri: str) -> None:
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    # -- workspace -------------------------------------------------------------------------
    def workspace_roots(self) -> list[str]:
        roots = [to_fs_path(f.uri) for f in self.workspace.folders.values()]
        if not roots and self.workspace.root_path:
            roots = [self.workspace.root_path]
        return [r for r in roots if r and os.path.isdir(r)]

    async def scan_workspace(self) -> None:
        """Index every kernel file of the workspace (read in a thread, analysed on the loop)."""
        roots = self.workspace_roots()

        def read_all() -> list[tuple[str, str]]:
            found: list[tuple[str, str]] = []
            count = 0
            for root in roots:
                for path in iter_python_files(Path(root)):
                    count += 1
                    if count > MAX_SCANNED_FILES:
                        return found
                    try:
                        data = path.read_bytes()
                    except OSError:
                        continue
                    if b"triton" in data:
                        try:
                            found.append((str(path), data.decode("utf-8")))
                        except UnicodeDecodeError:
                            continue
            return found

        loop = asyncio.get_running_loop()
        for path, text in await loop.run_in_executor(None, read_all):
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
            self.tell_once("watcher", f"KernelBrain cannot watch the workspace for changes on disk: {exc}",
                           types.MessageType.Warning)

    def apply_settings(self, raw) -> None:
        self.settings, problems = parse_settings(raw, self.settings)
        for p in problems:
            self.tell_once(f"setting:{p}", f"KernelBrain: {p}", types.MessageType.Warning)


def create_server() -> KernelBrainServer:
    from .features import code_actions, code_lens, commands, diagnostics, hover, lifecycle, workspace_kernels

    server = KernelBrainServer()
    for feature in (lifecycle, diagnostics, code_lens, code_actions, hover, commands, workspace_kernels):
        feature.register(server)
    return server


def serve() -> None:
    logging.basicConfig(level=os.environ.get("KERNELBRAIN_LOG", "WARNING").upper(), format="%(name)s: %(message)s")
    create_server().start_io()
