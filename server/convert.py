"""Engine positions (0-based lines, code-point columns) <-> LSP positions (client units)."""

from __future__ import annotations

from lsprotocol import types
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

from kernelbrain.engine.index import Span


def span_to_range(span: Span, doc: TextDocument | None) -> types.Range:
    """Convert with the open document's position encoding; files read from disk are sent as is."""
    if doc is not None:
        try:
            return doc.range_to_client_units(
                ServerTextRange(ServerTextPosition(span.line, span.col), ServerTextPosition(span.end_line, span.end_col))
            )
        except (IndexError, ValueError):
            pass
    return types.Range(
        start=types.Position(line=span.line, character=span.col),
        end=types.Position(line=span.end_line, character=span.end_col),
    )


def position_from_client(pos: types.Position, doc: TextDocument | None) -> tuple[int, int]:
    if doc is not None:
        try:
            p = doc.position_from_client_units(pos)
            return p.line, p.character
        except (IndexError, ValueError):
            pass
    return pos.line, pos.character
