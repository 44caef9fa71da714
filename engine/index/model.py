"""Serializable description of the Triton kernels in one Python file.

These are plain msgspec structs so the index can cross process boundaries (server ↔ engine
workers) and be written as JSON by the CLI without any conversion code.
Lines are 0-based and columns are character offsets, as in LSP; the CLI adds 1 for humans.
"""

from __future__ import annotations

import msgspec


class Span(msgspec.Struct, frozen=True):
    line: int
    col: int
    end_line: int
    end_col: int

    def contains(self, line: int, col: int) -> bool:
        if line < self.line or line > self.end_line:
            return False
        if line == self.line and col < self.col:
            return False
        if line == self.end_line and col > self.end_col:
            return False
        return True


class Param(msgspec.Struct, frozen=True):
    name: str
    constexpr: bool = False
    annotation: str | None = None
    default: str | None = None


class AutotuneConfig(msgspec.Struct, frozen=True):
    """One `triton.Config(...)`; values that are not literals are kept as source text."""

    kwargs: dict[str, int | float | str | bool | None]
    num_warps: int | None = None
    num_stages: int | None = None
    span: Span | None = None


class LaunchSite(msgspec.Struct, frozen=True):
    """`kernel[grid](args...)`: where and how a kernel is launched."""

    kernel: str
    span: Span
    grid: str
    args: list[str]
    kwargs: dict[str, str]
    launcher: str | None = None


class Launcher(msgspec.Struct, frozen=True):
    """A Python function that launches one or more kernels of this file."""

    name: str
    span: Span
    params: list[str]
    kernels: list[str]


class Kernel(msgspec.Struct, frozen=True):
    name: str
    span: Span
    name_span: Span
    params: list[Param]
    decorators: list[str]
    autotune_configs: list[AutotuneConfig] = []
    autotune_key: list[str] = []
    heuristics: dict[str, str] = {}
    helpers: list[str] = []
    launch_sites: list[LaunchSite] = []
    launchers: list[str] = []
    is_helper: bool = False
    docstring: str | None = None

    @property
    def constexprs(self) -> list[str]:
        return [p.name for p in self.params if p.constexpr]

    @property
    def autotuned(self) -> bool:
        return "triton.autotune" in self.decorators


class ParseError(msgspec.Struct, frozen=True):
    message: str
    line: int
    col: int


class FileIndex(msgspec.Struct, frozen=True):
    path: str
    source_hash: str
    kernels: list[Kernel]
    launchers: list[Launcher]
    errors: list[ParseError]
    imports_triton: bool

    def kernel(self, name: str) -> Kernel | None:
        for k in self.kernels:
            if k.name == name:
                return k
        return None

    def kernel_at(self, line: int, col: int = 0) -> Kernel | None:
        for k in self.kernels:
            if k.span.contains(line, col):
                return k
        return None

    @property
    def launchable(self) -> list[Kernel]:
        """Kernels a user would optimize: everything except pure `@triton.jit` helpers."""
        return [k for k in self.kernels if not k.is_helper]
