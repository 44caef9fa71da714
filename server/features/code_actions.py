"""Code actions: "Optimize kernel" when the cursor is inside a kernel."""

from __future__ import annotations

from lsprotocol import types

from ..convert import Positions
from .code_lens import optimize_command

OPTIMIZE_KIND = "refactor.kernelbrain.optimize"


def _wanted(only, kind: str) -> bool:
    return not only or any(kind == o or kind.startswith(o + ".") for o in only)


def register(server) -> None:
    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.Refactor], resolve_provider=False),
    )
    def code_action(ls, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        state = ls.current(uri)
        if state is None:
            return []
        line, col = Positions(ls.open_document(uri)).from_client(params.range.start)
        kernel = state.index.kernel_at(line, col)
        if kernel is None or kernel.is_helper or not _wanted(params.context.only, OPTIMIZE_KIND):
            return []
        return [
            types.CodeAction(
                title=f"Optimize kernel `{kernel.name}`",
                kind=OPTIMIZE_KIND,
                command=optimize_command(uri, kernel.name, f"Optimize kernel `{kernel.name}`"),
            )
        ]
