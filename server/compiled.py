"""Each open file's compiled view (KB2xx, registers, spills, occupancy in hover), compiled
ahead of time in the engine agent and kept per source hash."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lsprotocol import types

from kernelbrain.engine.agent import protocol as p
from kernelbrain.engine.api.analysis import source_hash

from .engine_bridge import EngineUnavailable

if TYPE_CHECKING:
    from .shared import Session


class CompiledViews:
    def __init__(self, session: Session):
        self.session = session
        self.views: dict[str, tuple[str, p.CompiledViewResult]] = {}  # uri -> (source hash, view)

    async def refresh(self, uri: str) -> None:
        state = self.session.files.get(uri)
        if state is None:
            return
        text = self.session.current_text(uri)
        if text is None:
            return
        digest = source_hash(text)
        if uri in self.views and self.views[uri][0] == digest:
            return
        try:
            view = await self.session.engine.request(
                p.COMPILED_VIEW,
                p.CompiledViewRequest(state.path, text, arch=self.session.settings.target_arch),
                p.CompiledViewResult,
            )
        except EngineUnavailable as exc:
            self.session.tell_once(
                "compiled-unavailable",
                f"KernelBrain: the compiled view is unavailable: {exc}",
                types.MessageType.Warning,
            )
            return
        except Exception as exc:
            self.session.tell_once(
                "compiled-failed",
                f"KernelBrain: the compiled view failed: {exc}",
                types.MessageType.Warning,
            )
            return
        if view is None:
            return
        self.views[uri] = (view.source_hash, view)
        now = self.session.files.get(uri)
        if now is not None and now.index.source_hash == view.source_hash:
            self.session.publish(now)

    def view(self, uri: str) -> p.CompiledViewResult | None:
        entry = self.views.get(uri)
        state = self.session.files.get(uri)
        if entry is None or state is None or entry[0] != state.index.source_hash:
            return None
        return entry[1]
