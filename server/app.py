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

from kernelbrain.engine.agent import protocol as p
from kernelbrain.engine.api import secrets
from kernelbrain.engine.api.analysis import Finding, iter_python_files, source_hash
from kernelbrain.engine.api.tasks import harness_config, keeps_results

from .debounce import Debouncer
from .dispatch import AnsweringProtocol, expect, guarded
from .editor_settings import Settings, parse_settings
from .engine_bridge import EngineBridge, EngineUnavailable
from .shared import JOB_CHANGED, NO_HARNESS, RunningJob, job_json
from .state import FileState, WorkspaceIndex
from .variants import ResultRegistry
from .watcher import WorkspaceWatcher

log = logging.getLogger("kernelbrain.server")
VERSION = "0.1.0"
# A workspace scan reads at most this many Python files; monorepos keep the server responsive.
MAX_SCANNED_FILES = 5000
# How long a request that offers variants waits for its file's stored records: the engine agent
# reads them from SQLite in milliseconds, but may first have to start (seconds on a busy machine).
STORED_WAIT_S = 20.0


class KernelBrainServer(LanguageServer):
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
        self.engine = EngineBridge(
            self._on_job_progress,
            self._on_job_finished,
            lambda msg: self.tell_once(
                f"restart:{msg}", f"KernelBrain: {msg}", types.MessageType.Warning
            ),
            self._on_jobs_changed,
        )
        self.compiled: dict[
            str, tuple[str, p.CompiledViewResult]
        ] = {}  # uri -> (source hash, view)
        self.harness_findings: dict[str, list[Finding]] = {}
        self.results = ResultRegistry()
        self.jobs: dict[str, RunningJob] = {}
        self.token_jobs: dict[str, str] = {}

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
        """None when trusted; else the message that says why `what` is off (told once)."""
        if self.trusted:
            return None
        msg = (
            f"KernelBrain: {what} is off until this workspace is trusted: it imports and runs "
            "the workspace's code. Static diagnostics work meanwhile. Trust the workspace in "
            "your editor, or set `kernelbrain.trustWorkspace`."
        )
        self.tell_once(f"untrusted-{what}", msg, types.MessageType.Info)
        return msg

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
        self.fetch_stored(state)
        if (
            state.open
            and self.settings.compiled_view
            and state.has_kernels
            and not state.index.errors
            and self.require_trust("the compiled view") is None
        ):
            self.debouncer.schedule(
                ("compiled", state.uri), 1.0, lambda: self._spawn(self.refresh_compiled(state.uri))
            )

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

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        task.add_done_callback(
            lambda t: (
                t.cancelled() or (t.exception() and log.error("task failed: %r", t.exception()))
            )
        )

    # -- compiled view -----------------------------------------------------------------------
    async def refresh_compiled(self, uri: str) -> None:
        state = self.files.get(uri)
        if state is None:
            return
        text = self.current_text(uri)
        if text is None:
            return
        digest = source_hash(text)
        if uri in self.compiled and self.compiled[uri][0] == digest:
            return
        try:
            view = await self.engine.request(
                p.COMPILED_VIEW,
                p.CompiledViewRequest(state.path, text, arch=self.settings.target_arch),
                p.CompiledViewResult,
            )
        except EngineUnavailable as exc:
            self.tell_once(
                "compiled-unavailable",
                f"KernelBrain: the compiled view is unavailable: {exc}",
                types.MessageType.Warning,
            )
            return
        except Exception as exc:
            self.tell_once(
                "compiled-failed",
                f"KernelBrain: the compiled view failed: {exc}",
                types.MessageType.Warning,
            )
            return
        if view is None:
            return
        self.compiled[uri] = (view.source_hash, view)
        now = self.files.get(uri)
        if now is not None and now.index.source_hash == view.source_hash:
            self.publish(now)

    def compiled_for(self, uri: str) -> p.CompiledViewResult | None:
        entry = self.compiled.get(uri)
        state = self.files.get(uri)
        if entry is None or state is None or entry[0] != state.index.source_hash:
            return None
        return entry[1]

    # -- publishing ------------------------------------------------------------------------
    def findings_for(self, state: FileState) -> list[Finding]:
        findings = list(state.findings) + self.harness_findings.get(state.uri, [])
        view = self.compiled_for(state.uri)
        if view is not None:
            for v in view.views:
                findings.extend(v.findings)
        findings.extend(self.measured_findings(state))
        return findings

    def measured_findings(self, state: FileState) -> list[Finding]:
        """KB3xx from the latest measured search of each kernel, while the kernel is as measured."""
        from .variants import changed_functions

        out: list[Finding] = []
        current = None
        for k in state.index.launchable:
            record = self.results.record(state.path, k.name)
            if record is None or record.result is None or not record.measured:
                continue
            current = current if current is not None else (self.current_text(state.uri) or "")
            if changed_functions(record.result.original, current, [k.name, record.result.entry]):
                continue
            for f in record.measured:
                out.append(
                    Finding(
                        f.code,
                        f.message + " (measured by the last search)",
                        k.name_span,
                        f.severity,
                        k.name,
                        state.path,
                    )
                )
        return out

    # -- the engine's records ------------------------------------------------------------------
    def fetch_stored(self, state: FileState) -> None:
        """Ask the agent, once per file until it changes on disk, what the workspace's store
        keeps for its kernels; publish and refresh lenses when the answer comes."""
        if not state.index.launchable or self.results.asking(state.path) is not None:
            return
        try:
            request = asyncio.get_running_loop().create_future()
        except RuntimeError:  # not on the event loop (analysis always is; a test may not be)
            return
        self.results.ask(state.path, request)
        if not keeps_results(state.path):
            request.set_result(None)
            return
        kernels = [k.name for k in state.index.launchable]
        self._spawn(self._fetch_stored(state.uri, state.path, kernels, request))

    async def _fetch_stored(self, uri: str, path: str, kernels: list[str], request) -> None:
        try:
            answer = await self.engine.request(
                p.STORED, p.StoredRequest(path, kernels), p.StoredResults
            )
        except Exception as exc:  # the agent could not start, or its store failed: say so once
            self.tell_once(
                "stored-unavailable",
                f"KernelBrain: earlier search results are unavailable: {exc}",
                types.MessageType.Warning,
            )
            answer = None
        finally:
            if not request.done():
                request.set_result(None)
        if self.results.asking(path) is not request:  # the file changed meanwhile: asked again
            return
        for record in answer.records if answer else []:
            if record.result is not None or record.profile_share is not None:
                self.results.put(path, record)
        state = self.files.get(uri)
        if state is not None:
            self.publish(state)
        self.refresh_lenses()

    async def stored_ready(self, uri: str) -> None:
        """Wait (at most STORED_WAIT_S) for a file's stored records, if they are on their way:
        requests that offer variants call this, so a reopened file offers what was found before."""
        path = to_fs_path(uri) if isinstance(uri, str) else None
        request = self.results.asking(path) if path else None
        if request is not None and not request.done():
            try:
                await asyncio.wait_for(asyncio.shield(request), STORED_WAIT_S)
            except asyncio.TimeoutError:
                pass

    def publish(self, state: FileState) -> None:
        from .features.diagnostics import to_diagnostics

        doc = self.open_document(state.uri)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=state.uri,
                diagnostics=to_diagnostics(self.findings_for(state), doc),
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

    # -- jobs --------------------------------------------------------------------------------
    def announce(self, job: RunningJob) -> None:
        """Push a job's state to the client (`kernelbrain/jobChanged`): a client shows progress
        and results from these notifications instead of polling `kernelbrain/jobs`."""
        self.protocol.notify(JOB_CHANGED, job_json(job))

    def _on_jobs_changed(self, msg: p.JobList) -> None:
        for info in msg.jobs:
            job = self.jobs.get(info.id)
            if job is not None:
                job.info = info
                self.announce(job)
        self.refresh_lenses()

    def _on_job_progress(self, msg: p.JobProgress) -> None:
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
            self.work_done_progress.report(
                job.token,
                types.WorkDoneProgressReport(
                    message=f"{msg.event.message}{best}"[:200],
                    percentage=int(msg.event.fraction * 100),
                    cancellable=True,
                ),
            )

    def _on_job_finished(self, msg: p.JobFinished) -> None:
        job = self.jobs.get(msg.job.id)
        if job is None:
            return
        job.info = msg.job
        result = msg.result
        if result is not None:
            self.results.put(result.file, p.KernelRecord(result.kernel, result, msg.measured))
        self.announce(job)  # after the result is in: a client that asks for it now gets it
        if job.token is not None:
            self.work_done_progress.end(
                job.token, types.WorkDoneProgressEnd(message=self._summary(msg))
            )
            self.token_jobs.pop(job.token, None)
        if msg.job.state == "failed":
            self.tell(
                f"KernelBrain: optimizing `{job.kernel}` failed: {msg.job.error}",
                types.MessageType.Error,
            )
        else:
            self.tell(f"KernelBrain: {self._summary(msg)}")
        state = self.files.get(job.uri)
        if state is not None:
            self.publish(state)
        self.refresh_lenses()

    @staticmethod
    def _summary(msg: p.JobFinished) -> str:
        r = msg.result
        if r is None:
            return f"`{msg.job.kernel}`: {msg.job.state}"
        best = next((v for v in r.variants if v.id == r.best), None)
        if best is None:
            return f"`{r.kernel}`: no faster verified variant ({msg.job.state}, {r.stopped})"
        kind = "faster" if best.measured else "faster (estimated)"
        return f"`{r.kernel}`: {len(r.variants)} verified variant(s), best {best.speedup:.2f}x {kind} ({msg.job.state})"

    async def shutdown_engine(self) -> None:
        await self.engine.stop()

    async def find_offer(self, uri, kernel, variant_id):
        """(path, current text, offer) for a variant of a kernel in a document; offer None if gone.
        Arguments come from clients: each must be a string."""
        expect(uri, str, "uri")
        expect(kernel, str, "kernel")
        expect(variant_id, str, "variant id")
        path = to_fs_path(uri) if uri else None
        current = self.current_text(uri) if uri else None
        if not path or current is None:
            return path, current, None
        await self.stored_ready(uri)
        offer = next(
            (o for o in self.results.offers(path, kernel, current) if o.variant.id == variant_id),
            None,
        )
        return path, current, offer

    # -- profiles ---------------------------------------------------------------------------
    def profile_share(self, path: str, kernel: str) -> str | None:
        """ "31% of GPU time in train.py" from the latest `kernelbrain profile` that ran this kernel."""
        record = self.results.record(path, kernel)
        if record is None or record.profile_share is None:
            return None
        return f"{record.profile_share:.0%} of GPU time in {Path(record.profile_script or '').name}"

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
