"""The workspace on disk: its kernel files at start, and files changed by other programs
(git checkout, code generation) while the server runs.

watchdog runs its observer in a thread; every event is handed to the server's event loop, where
all state lives, so nothing here touches server state directly.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Callable

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from kernelbrain.engine.api.analysis import SKIP_DIRS, iter_python_files

log = logging.getLogger(__name__)
# A workspace scan reads at most this many Python files; monorepos keep the server responsive.
MAX_SCANNED_FILES = 5000


def kernel_files(roots: list[str]) -> list[tuple[str, str]]:
    """(path, text) of every Python file under `roots` that mentions triton (at most
    MAX_SCANNED_FILES files read): what the server indexes at start."""
    found: list[tuple[str, str]] = []
    count = 0
    for root in roots:
        for path in iter_python_files(Path(root)):
            count += 1
            if count > MAX_SCANNED_FILES:
                return found
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if b"triton" in data:
                try:
                    found.append((str(path), data.decode("utf-8")))
                except UnicodeDecodeError:
                    continue
    return found


def is_watched(path: str) -> bool:
    p = Path(path)
    return p.suffix == ".py" and not any(
        part in SKIP_DIRS or part.startswith(".") for part in p.parts[:-1]
    )


class _Handler(FileSystemEventHandler):
    def __init__(self, loop: asyncio.AbstractEventLoop, on_change: Callable[[str], None]):
        self._loop = loop
        self._on_change = on_change

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type in ("opened", "closed_no_write"):
            return
        paths = [event.src_path]
        if getattr(event, "dest_path", None):
            paths.append(event.dest_path)
        for raw in paths:
            path = raw.decode() if isinstance(raw, bytes) else raw
            if is_watched(path):
                self._loop.call_soon_threadsafe(self._on_change, path)


class WorkspaceWatcher:
    """Recursive watch of the workspace folders; calls `on_change(path)` on the event loop."""

    def __init__(
        self, roots: list[str], loop: asyncio.AbstractEventLoop, on_change: Callable[[str], None]
    ):
        self._observer = Observer()
        self._observer.daemon = True
        handler = _Handler(loop, on_change)
        for root in roots:
            if Path(root).is_dir():
                self._observer.schedule(handler, root, recursive=True)

    def start(self) -> None:
        self._observer.start()

    def stop(self) -> None:
        try:
            self._observer.stop()
            self._observer.join(timeout=2)
        except Exception:
            log.exception("stopping the file watcher failed")
