"""Rule registry: a rule is a function from a `RuleContext` to findings, registered by decorator.

Adding a rule means adding one module `kbNNN_<name>.py` in this package that defines a function
decorated with `@rule(...)`; the package imports every such module on first use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from ..index.builder import ParsedModule
from ..index.findings import Finding
from ..index.model import Span
from .analysis import KernelView, LaunchView, kernel_views, launch_views


@dataclass
class RuleContext:
    """What a rule sees: the parsed module plus per-kernel and per-launch analyses."""

    module: ParsedModule
    kernels: list[KernelView]
    launches: list[LaunchView]

    def finding(self, code: str, message: str, node, kernel: str | None = None) -> Finding:
        """A finding of rule `code` at an AST node (or at an index `Span`)."""
        span = node if isinstance(node, Span) else self.module.span(node)
        return Finding(code, message, span, REGISTRY[code].severity, kernel, self.module.path)


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    summary: str
    severity: str
    check: Callable[[RuleContext], Iterable[Finding]]


REGISTRY: dict[str, Rule] = {}


def rule(code: str, name: str, summary: str, severity: str = "warning"):
    """Register `check(ctx) -> Iterable[Finding]` under a stable code."""

    def register(fn: Callable[[RuleContext], Iterable[Finding]]):
        if code in REGISTRY and REGISTRY[code].check is not fn:
            raise ValueError(f"rule code {code} registered twice")
        REGISTRY[code] = Rule(code, name, summary, severity, fn)
        return fn

    return register


def make_context(module: ParsedModule) -> RuleContext:
    kernels = kernel_views(module)
    return RuleContext(module, kernels, launch_views(module, kernels))


def iter_rules(
    select: Iterable[str] | None = None, ignore: Iterable[str] | None = None
) -> Iterator[Rule]:
    sel = tuple(select or ())
    ign = tuple(ignore or ())
    for code in sorted(REGISTRY):
        if sel and not code.startswith(sel):
            continue
        if ign and code.startswith(ign):
            continue
        yield REGISTRY[code]
