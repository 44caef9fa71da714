"""Per-key debouncing on the server's event loop: only the last request in a burst runs."""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Hashable

log = logging.getLogger(__name__)


class Debouncer:
    def __init__(self) -> None:
        self._pending: dict[Hashable, asyncio.TimerHandle] = {}

    def schedule(self, key: Hashable, delay_s: float, fn: Callable[[], None]) -> None:
        self.cancel(key)
        loop = asyncio.get_running_loop()
        self._pending[key] = loop.call_later(delay_s, self._run, key, fn)

    def cancel(self, key: Hashable) -> bool:
        handle = self._pending.pop(key, None)
        if handle is not None:
            handle.cancel()
            return True
        return False

    def _run(self, key: Hashable, fn: Callable[[], None]) -> None:
        self._pending.pop(key, None)
        try:
            fn()
        except Exception:  # background work never raises into the protocol layer
            log.exception("debounced task %r failed", key)
