"""Search results the editor offers: per (file, kernel), as the engine agent sent them, and the
variants among them that still apply to the document as it is now."""

from __future__ import annotations

import ast
import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.uris import to_fs_path

from kernelbrain.engine.agent import protocol as p
from kernelbrain.engine.agent.protocol import KernelRecord
from kernelbrain.engine.api.analysis import Finding
from kernelbrain.engine.api.results import SearchResult, Variant
from kernelbrain.engine.api.tasks import keeps_results

from .dispatch import expect
from .rebase import Rebased, rebase
from .state import FileState

if TYPE_CHECKING:
    from .shared import Session

# How long a request that offers variants waits for its file's stored records: the engine agent
# reads them from SQLite in milliseconds, but may first have to start (seconds on a busy machine).
STORED_WAIT_S = 20.0


@dataclass
class Offer:
    variant: Variant
    rebased: Rebased

    @property
    def stale(self) -> bool:
        return self.rebased.text is None


class ResultRegistry:
    """What the engine keeps for each (file, kernel), as the agent sent it: a finished job pushes
    its result, and a file's stored records are asked for once, when the file is first analysed
    (again after it changes on disk). Answers come from here, in memory."""

    def __init__(self, session: Session):
        self.session = session
        self._records: dict[tuple[str, str], KernelRecord] = {}
        self._asked: dict[str, asyncio.Future] = {}  # realpath -> the request for its records

    def put(self, path: str, record: KernelRecord) -> None:
        key = (os.path.realpath(path), record.kernel)
        before = self._records.get(key)
        if before is not None and record.profile_share is None:  # a job's result keeps the share
            record.profile_share, record.profile_script = (
                before.profile_share,
                before.profile_script,
            )
        self._records[key] = record

    def record(self, path: str, kernel: str) -> KernelRecord | None:
        return self._records.get((os.path.realpath(path), kernel))

    def get(self, path: str, kernel: str) -> SearchResult | None:
        record = self.record(path, kernel)
        return record.result if record is not None else None

    def asking(self, path: str) -> asyncio.Future | None:
        """The request for this file's stored records, if one was made since it last changed."""
        return self._asked.get(os.path.realpath(path))

    def ask(self, path: str, request: asyncio.Future) -> None:
        self._asked[os.path.realpath(path)] = request

    def offers(self, path: str, kernel: str, current: str) -> list[Offer]:
        result = self.get(path, kernel)
        if result is None:
            return []
        changed = changed_functions(result.original, current, [kernel, result.entry])
        out = []
        for v in result.variants:
            if not v.source or (v.measured and v.speedup <= 1.0):
                continue
            if changed:
                reason = f"{' and '.join(f'`{c}`' for c in changed)} changed since the search"
                out.append(Offer(v, Rebased(None, reason)))
            else:
                out.append(Offer(v, rebase(result.original, v.source, current)))
        return out

    def forget(self, path: str) -> None:
        real = os.path.realpath(path)
        for key in [k for k in self._records if k[0] == real]:
            self._records.pop(key, None)
        self._asked.pop(real, None)

    def measured_findings(self, state: FileState) -> list[Finding]:
        """KB3xx from the latest measured search of each kernel, while the kernel is as measured."""
        out: list[Finding] = []
        current = None
        for k in state.index.launchable:
            record = self.record(state.path, k.name)
            if record is None or record.result is None or not record.measured:
                continue
            current = (
                current if current is not None else (self.session.current_text(state.uri) or "")
            )
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

    def fetch(self, state: FileState) -> None:
        """Ask the agent, once per file until it changes on disk, what the workspace's store
        keeps for its kernels; publish and refresh lenses when the answer comes."""
        if not state.index.launchable or self.asking(state.path) is not None:
            return
        if not self.session.trusted:
            # An untrusted workspace's store is never opened (a cloned repository can ship one
            # whose rows offer "verified" variants nobody here verified); asked once trusted.
            return
        try:
            request = asyncio.get_running_loop().create_future()
        except RuntimeError:  # not on the event loop (analysis always is; a test may not be)
            return
        self.ask(state.path, request)
        if not keeps_results(state.path):
            request.set_result(None)
            return
        kernels = [k.name for k in state.index.launchable]
        self.session.spawn(self._fetch(state.uri, state.path, kernels, request))

    async def _fetch(self, uri: str, path: str, kernels: list[str], request) -> None:
        try:
            answer = await self.session.engine.request(
                p.STORED, p.StoredRequest(path, kernels), p.StoredResults
            )
        except Exception as exc:  # the agent could not start, or its store failed: say so once
            self.session.tell_once(
                "stored-unavailable",
                f"KernelBrain: earlier search results are unavailable: {exc}",
                types.MessageType.Warning,
            )
            answer = None
        finally:
            if not request.done():
                request.set_result(None)
        if self.asking(path) is not request:  # the file changed meanwhile: asked again
            return
        for record in answer.records if answer else []:
            if record.result is not None or record.profile_share is not None:
                self.put(path, record)
        state = self.session.files.get(uri)
        if state is not None:
            self.session.publish(state)
        self.session.refresh_lenses()

    async def ready(self, uri: str) -> None:
        """Wait (at most STORED_WAIT_S) for a file's stored records, if they are on their way:
        requests that offer variants call this, so a reopened file offers what was found before."""
        path = to_fs_path(uri) if isinstance(uri, str) else None
        request = self.asking(path) if path else None
        if request is not None and not request.done():
            try:
                await asyncio.wait_for(asyncio.shield(request), STORED_WAIT_S)
            except asyncio.TimeoutError:
                pass

    async def find_offer(self, uri, kernel, variant_id):
        """(path, current text, offer) for a variant of a kernel in a document; offer None if gone.
        Arguments come from clients: each must be a string."""
        expect(uri, str, "uri")
        expect(kernel, str, "kernel")
        expect(variant_id, str, "variant id")
        path = to_fs_path(uri) if uri else None
        current = self.session.current_text(uri) if uri else None
        if not path or current is None:
            return path, current, None
        await self.ready(uri)
        offer = next(
            (o for o in self.offers(path, kernel, current) if o.variant.id == variant_id),
            None,
        )
        return path, current, offer

    def profile_share(self, path: str, kernel: str) -> str | None:
        """ "31% of GPU time in train.py" from the latest `kernelbrain profile` that ran this kernel."""
        record = self.record(path, kernel)
        if record is None or record.profile_share is None:
            return None
        return f"{record.profile_share:.0%} of GPU time in {Path(record.profile_script or '').name}"


def _functions(source: str) -> dict[str, str] | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    return {
        n.name: ast.dump(n) for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
    }


def changed_functions(original: str, current: str, names: list[str]) -> list[str]:
    """Which of `names` (the kernel, its entry) differ between the searched source and now
    (formatting and comments aside); a file that does not parse counts as changed."""
    before, after = _functions(original), _functions(current)
    if after is None:
        return [n for n in names if n]
    return [n for n in names if n and (before or {}).get(n) != after.get(n)]
