"""Findings -> LSP diagnostics (publishing itself lives on the server)."""

from __future__ import annotations

from lsprotocol import types

from kernelbrain.engine.api.analysis import Finding

from ..convert import Positions

SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "information": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}


def to_diagnostics(findings: list[Finding], doc) -> list[types.Diagnostic]:
    pos = Positions(doc)
    return [
        types.Diagnostic(
            range=pos.range(f.span),
            message=f.message,
            severity=SEVERITY.get(f.severity, types.DiagnosticSeverity.Warning),
            code=f.code,
            source="kernelbrain",
            data={"kernel": f.kernel} if f.kernel else None,
        )
        for f in findings
    ]


def register(server) -> None:
    """Diagnostics are pushed by the lifecycle handlers; nothing to register here."""
