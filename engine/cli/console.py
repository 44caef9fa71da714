"""A search in a terminal: its progress, and Ctrl-C that stops it for real.

The search runs in a thread with its own worker pool, so the main thread stays free for the
signal: the first Ctrl-C sets the search's cancel flag and kills the pool's workers (a worker
mid-compile or mid-harness cannot be interrupted any other way), then waits a moment for the
search to hand back what it verified; a second Ctrl-C leaves at once.

Progress goes to stderr, so `--json` and a redirected stdout stay clean: on a terminal a bar
that fits the terminal's width; otherwise (a file, a pipe, CI) one plain line per step of the
ladder, never a redrawn line full of control characters.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from typing import Callable

from rich.markup import escape

from ..api.results import SearchEvent, SearchResult
from ..evaluate.pool import WorkerPool

# How long the first Ctrl-C waits for the search to return what it kept: its workers are dead
# by then, so what is left is writing the result to the store.
CANCEL_GRACE_S = 2.5
# Events that mark a step worth a line of its own when progress cannot redraw one line.
_LINE_EVENTS = frozenset({"started", "rung", "best", "finished", "note"})


@dataclass
class Outcome:
    """How a search run from the terminal ended."""

    result: SearchResult | None = None
    error: BaseException | None = None
    interrupted: bool = False
    notes: list[str] = field(default_factory=list)


def run_interruptibly(
    run: Callable[[threading.Event, WorkerPool], SearchResult],
    pool_factory: Callable[[], WorkerPool] = WorkerPool,
    grace_s: float = CANCEL_GRACE_S,
) -> Outcome:
    """Run `run(cancel, pool)` in a thread; on Ctrl-C cancel it, kill its workers and give it
    `grace_s` to return. What the search raised comes back in `Outcome.error`."""
    cancel, done = threading.Event(), threading.Event()
    pool = pool_factory()
    outcome = Outcome()

    def work() -> None:
        try:
            outcome.result = run(cancel, pool)
        except BaseException as exc:  # handed to the main thread, which decides
            outcome.error = exc
        finally:
            done.set()

    # Waiting on an event, not `Thread.join`: a join that Ctrl-C interrupts marks the thread
    # as stopped while it still runs (CPython bpo-45274's handling), and a later join returns
    # at once.
    threading.Thread(target=work, name="search", daemon=True).start()
    try:
        while not done.wait(0.2):
            pass
    except KeyboardInterrupt:
        outcome.interrupted = True
        cancel.set()
        print("\nkernelbrain: interrupted: stopping the search", file=sys.stderr, flush=True)
        pool.kill()
        if not done.wait(grace_s):
            outcome.notes.append(
                f"the search did not stop within {grace_s:.1f} s; its results so far are in the store"
            )
    finally:
        pool.close()
    return outcome


class ProgressView:
    """The search's progress on stderr: a bar on a terminal, plain lines anywhere else."""

    def __init__(self, kernel: str, stream=None, enabled: bool = True):
        from rich.console import Console

        self.kernel = kernel
        self.enabled = enabled
        self.console = Console(file=stream or sys.stderr, highlight=False)
        self.live = enabled and self.console.is_terminal
        self._progress = None
        self._bar = None
        self._last_line = ""

    def __enter__(self) -> "ProgressView":
        if self.live:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(bar_width=None if self.console.width >= 100 else 12),
                TextColumn("{task.percentage:>3.0f}%"),
                TimeElapsedColumn(),
                console=self.console,
                transient=False,
                expand=False,
            )
            self._progress.__enter__()
            self._bar = self._progress.add_task(self.kernel, total=1.0)
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)

    def describe(self, e: SearchEvent) -> str:
        best = (
            f" · best {e.best_speedup:.2f}x{'' if e.measured else ' est.'}"
            if e.best_speedup
            else ""
        )
        return f"{e.message}{best}"

    def update(self, e: SearchEvent) -> None:
        if not self.enabled:
            return
        text = self.describe(e)
        if self._progress is not None:
            # Keep the description inside the width the bar, percentage and clock leave.
            room = max(20, self.console.width - 30)
            self._progress.update(
                self._bar, completed=e.fraction, description=escape(_fit(text, room))
            )
            return
        line = f"[{e.fraction * 100:3.0f}%] {text}"
        if e.kind in _LINE_EVENTS and line != self._last_line:
            self._last_line = line
            # a line of its own, whole: written to a file or a pipe nothing is cut, and a
            # terminal wraps it
            self.console.print(line, soft_wrap=True, markup=False)


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
