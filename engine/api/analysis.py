"""Static analysis of a file, as the language server runs it in its own process: the kernel
index, the KB1xx rules, the workspace's file walk. Pure `ast`, no torch or triton, milliseconds a
file; everything that compiles or runs goes through the engine agent instead."""

from __future__ import annotations

from ..index import FileIndex, Kernel, Span, parse_module
from ..index.builder import source_hash
from ..index.files import SKIP_DIRS, iter_python_files
from ..index.findings import Finding
from ..rules import check_module

__all__ = [
    "SKIP_DIRS",
    "FileIndex",
    "Finding",
    "Kernel",
    "Span",
    "check_module",
    "iter_python_files",
    "parse_module",
    "source_hash",
]
