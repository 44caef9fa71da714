"""Findings -> LSP diagnostics (publishing itself lives on the server)."""

from __future__ import annotations

import re

from lsprotocol import types

from kernelbrain.engine.api.analysis import Finding

from ..convert import Positions

SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "information": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}


# A sentence ends at a full stop followed by the start of another (a capital, code, a bracket):
# never inside "e.g. 16384" or "2.5x".
SENTENCE_END = re.compile(r"(?<=[^\s.]{2})\.\s+(?=[A-Z`(])")


def one_line(message: str) -> tuple[str, str]:
    """(the finding's first sentence on one line, the rest): the Problems view shows one line
    per entry and cuts what is longer, so the detail goes into the related information."""
    flat = " ".join(message.split())
    end = SENTENCE_END.search(flat)
    if end is None:
        return flat, ""
    return flat[: end.start() + 1], flat[end.end() :]


def to_diagnostics(findings: list[Finding], doc, uri: str) -> list[types.Diagnostic]:
    """`doc`: the open document (None for a file only on disk), for positions; `uri`: its URI."""
    pos = Positions(doc)
    out = []
    for f in findings:
        where = pos.range(f.span)
        summary, detail = one_line(f.message)
        out.append(
            types.Diagnostic(
                range=where,
                message=summary,
                severity=SEVERITY.get(f.severity, types.DiagnosticSeverity.Warning),
                code=f.code,
                source="kernelbrain",
                related_information=[
                    types.DiagnosticRelatedInformation(types.Location(uri, where), detail)
                ]
                if detail
                else None,
                data={"kernel": f.kernel} if f.kernel else None,
            )
        )
    return out


def register(server) -> None:
    """Diagnostics are pushed by the lifecycle handlers; nothing to register here."""
