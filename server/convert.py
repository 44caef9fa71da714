"""Engine positions (0-based lines, code-point columns) <-> LSP positions (client units)."""

from __future__ import annotations

from lsprotocol import types
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

from kernelbrain.engine.api.analysis import Span


class Positions:
    """Converts for one document. `TextDocument.lines` re-splits the whole source on every
    access (7 ms per code-lens answer on a 2,000-line file), so the lines are taken once here."""

    def __init__(self, doc: TextDocument | None):
        self._doc = doc
        self._lines = list(doc.lines) if doc is not None else None

    def _ascii(self, *lines: int) -> bool:
        assert self._lines is not None
        return all(0 <= n < len(self._lines) and self._lines[n].isascii() for n in lines)

    def range(self, span: Span) -> types.Range:
        """Open documents use the negotiated encoding; files read from disk are sent as is."""
        if self._doc is not None and not self._ascii(span.line, span.end_line):
            try:
                return self._doc.position_codec.range_to_client_units(
                    self._lines,
                    ServerTextRange(
                        ServerTextPosition(span.line, span.col),
                        ServerTextPosition(span.end_line, span.end_col),
                    ),
                )
            except (IndexError, ValueError):
                pass
        return types.Range(
            start=types.Position(line=span.line, character=span.col),
            end=types.Position(line=span.end_line, character=span.end_col),
        )

    def from_client(self, pos: types.Position) -> tuple[int, int]:
        if self._doc is not None and not self._ascii(pos.line):
            try:
                p = self._doc.position_codec.position_from_client_units(self._lines, pos)
                return p.line, p.character
            except (IndexError, ValueError):
                pass
        return pos.line, pos.character
