"""Static bottleneck diagnostics (KB1xx), one small module per rule.

`check_source` is what the CLI and the language server call: parse (with recovery), run every
registered rule, and report syntax errors as findings (KB001) instead of raising.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Iterable

from ..index.builder import ParsedModule, parse_module
from ..index.findings import Finding
from ..index.model import Span
from .registry import REGISTRY, Rule, RuleContext, iter_rules, make_context, rule

SYNTAX_ERROR = "KB001"
RULE_CRASH = "KB002"
_loaded = False


def load_rules() -> dict[str, Rule]:
    """Import every `kbNNN_*` module of this package once; each registers itself."""
    global _loaded
    if not _loaded:
        for info in pkgutil.iter_modules(__path__):
            if info.name.startswith("kb"):
                importlib.import_module(f"{__name__}.{info.name}")
        _loaded = True
    return REGISTRY


def check_module(
    pm: ParsedModule, select: Iterable[str] | None = None, ignore: Iterable[str] | None = None
) -> list[Finding]:
    load_rules()
    findings = [
        Finding(
            SYNTAX_ERROR,
            f"syntax error: {e.message}",
            Span(e.line, e.col, e.line, e.col + 1),
            "error",
            None,
            pm.path,
        )
        for e in pm.index.errors
    ]
    if pm.tree is None or not pm.index.kernels:
        return findings
    ctx = make_context(pm)
    for r in iter_rules(select, ignore):
        try:
            findings.extend(r.check(ctx))
        except Exception as exc:  # a rule bug must never hide the other findings or crash a client
            findings.append(
                Finding(
                    RULE_CRASH,
                    f"rule {r.code} failed on this file: {type(exc).__name__}: {exc}",
                    Span(0, 0, 0, 0),
                    "information",
                    None,
                    pm.path,
                )
            )
    seen: set[tuple] = set()
    unique = []
    for f in sorted(findings, key=lambda f: (f.span.line, f.span.col, f.code)):
        key = (f.code, f.span.line, f.span.col, f.message)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


def check_source(source: str, path: str = "<memory>", **kw) -> list[Finding]:
    return check_module(parse_module(source, path), **kw)


__all__ = ["REGISTRY", "Rule", "RuleContext", "check_module", "check_source", "load_rules", "rule"]
