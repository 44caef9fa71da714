"""A "⚡ Optimize kernel" lens above every launchable kernel."""

from __future__ import annotations

from lsprotocol import types

from ..convert import Positions

OPTIMIZE_COMMAND = "kernelbrain.optimize"


def optimize_command(uri: str, kernel: str, title: str = "⚡ Optimize kernel") -> types.Command:
    return types.Command(title=title, command=OPTIMIZE_COMMAND, arguments=[uri, kernel])


def register(server) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_LENS)
    def code_lens(ls, params: types.CodeLensParams) -> list[types.CodeLens]:
        """Answered from the in-memory index."""
        uri = params.text_document.uri
        state = ls.current(uri)
        if state is None:
            return []
        pos = Positions(ls.open_document(uri))
        return [
            types.CodeLens(range=pos.range(k.name_span), command=optimize_command(uri, k.name))
            for k in state.index.launchable
        ]
