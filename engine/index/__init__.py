"""AST-based kernel index: finds Triton kernels, their launch sites and launchers without importing triton."""

from .builder import ParsedModule, build_index, parse_module
from .model import AutotuneConfig, FileIndex, Kernel, Launcher, LaunchSite, Param, ParseError, Span

__all__ = [
    "AutotuneConfig",
    "FileIndex",
    "Kernel",
    "LaunchSite",
    "Launcher",
    "Param",
    "ParseError",
    "ParsedModule",
    "Span",
    "build_index",
    "parse_module",
]
