"""Types and codes that the server's session (`app.py`) and its features share.

Features import these instead of `app.py`, so the dependency runs one way: app -> features.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelbrain.engine.agent import protocol as p

NO_HARNESS = "KB003"  # a kernel with no task harness: a hint with a quick fix that scaffolds one


@dataclass
class RunningJob:
    """A search job this session started, with the work-done progress token that shows it."""

    info: p.JobInfo
    uri: str
    kernel: str
    token: str | None
