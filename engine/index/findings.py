"""A diagnostic found by the engine: static rules (KB1xx), compiled view (KB2xx), measurements (KB3xx).

Plain data so the CLI prints it, the store keeps it and the language server turns it into an LSP
`Diagnostic` without the engine knowing LSP.
"""

from __future__ import annotations

import msgspec

from .model import Span

SEVERITIES = ("error", "warning", "information", "hint")


class Finding(msgspec.Struct, frozen=True):
    code: str
    message: str
    span: Span
    severity: str = "warning"
    kernel: str | None = None
    path: str | None = None
