"""How a harness run fails, and whose fault it is: a reason code (machine-readable, stable), and
whether the device context survived."""

from __future__ import annotations

import traceback

import torch

from ..api.facts import CaseResult
from ..task.scaffold import STUB_MARK

# Reasons a runner may report for the candidate's own call. Anything else it claims (a broken
# harness, say) is the candidate's exception: a candidate cannot shift the blame to the task.
CANDIDATE_REASONS = frozenset(
    {
        "exception",
        "load-error",
        "compile-error",
        "out-of-memory",
        "illegal-memory-access",
        "cuda-error",
        "type",
        "tampered",
        "out-of-bounds",
    }
)


class HarnessFailure(Exception):
    def __init__(self, reason: str, message: str, case: CaseResult | None = None):
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.case = case


class FatalDeviceError(HarnessFailure):
    """The device context is unusable (e.g. illegal memory access): the worker must restart."""


def classify_exception(exc: BaseException) -> tuple[str, bool]:
    """(reason, fatal) for an exception raised by user or candidate code."""
    text = f"{type(exc).__name__}: {exc}"
    if STUB_MARK in text:
        return "harness-incomplete", False
    if (
        isinstance(exc, torch.cuda.OutOfMemoryError)
        or "out of memory" in text.lower()
        or "can't allocate memory" in text
    ):
        return "out-of-memory", False
    if isinstance(exc, MemoryError):
        return "out-of-memory", False
    if "illegal memory access" in text or "illegal address" in text or "misaligned address" in text:
        return "illegal-memory-access", True
    if "CUDA error" in text or "unspecified launch failure" in text:
        return "cuda-error", True
    if type(exc).__name__ in ("CompilationError", "CompileTimeAssertionFailure"):
        return "compile-error", False
    return "exception", False


def short_traceback(exc: BaseException, limit: int = 6) -> str:
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return "".join(lines[-limit:]).strip()


def _library_file(filename: str) -> bool:
    import os
    import sys

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # this package
    return (
        filename.startswith("<")
        or "site-packages" in filename
        or "dist-packages" in filename
        or filename.startswith((sys.prefix, sys.base_prefix, here))
    )


def user_frame(exc: BaseException):
    """The innermost frame in the user's code (kernel or launcher) of the innermost exception
    in `exc`'s chain that passed through it."""
    import traceback

    found = None
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        frames = [
            f for f in traceback.extract_tb(exc.__traceback__) if not _library_file(f.filename)
        ]
        if frames:
            found = frames[-1]
        exc = exc.__cause__ or exc.__context__
    return found


def site(exc: BaseException) -> str:
    """Where in the user's code `exc` was raised, as " at harness.py:12 (`code`)"; "" when no
    frame of theirs is on its way."""
    from pathlib import Path

    frame = user_frame(exc)
    if frame is None:
        return ""
    return f" at {Path(frame.filename).name}:{frame.lineno} (`{(frame.line or '').strip()[:120]}`)"
