"""Seconds a worker spends in Triton's JIT (worker only; imports triton when installed).

Why: a GPU worker that compiles holds its GPU idle. Ahead-of-time compiles on the CPU workers are
meant to leave it nothing to compile; this clock says, per harness stage, how much it still did
(the hooks fire on every in-memory cache miss: a load from the disk cache and a real compile).
"""

from __future__ import annotations

import time


class JitClock:
    def __init__(self) -> None:
        self.seconds = 0.0
        self._started: float | None = None

    def _start(self, **_) -> None:
        self._started = time.perf_counter()  # returning None (falsy): Triton goes on to compile

    def _end(self, **_) -> None:
        if self._started is not None:
            self.seconds += time.perf_counter() - self._started
            self._started = None

    def install(self) -> "JitClock":
        """Hook into Triton's JIT; a Triton without these hooks leaves the clock at zero."""
        try:
            from triton import knobs

            knobs.runtime.jit_cache_hook = self._start
            knobs.runtime.jit_post_compile_hook = self._end
        except (ImportError, AttributeError):
            pass
        return self


CLOCK = JitClock()
