"""When this process started, on the `time.monotonic()` clock: a budget is the user's wait,
which begins when the command does, before Python has imported anything of ours."""

from __future__ import annotations

import os
import time

# The fallback: when this module was first imported, early in the command's start-up.
_IMPORTED_AT = time.monotonic()


def process_started_at() -> float:
    """The process's start as a `time.monotonic()` reading: from the kernel's record of it
    (`/proc/self/stat`, ticks since boot, against `/proc/uptime`) where there is one, else the
    moment this module was imported."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        started_since_boot = int(fields[19]) / os.sysconf("SC_CLK_TCK")
        with open("/proc/uptime", encoding="ascii") as f:
            now_since_boot = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return _IMPORTED_AT
    age = now_since_boot - started_since_boot
    if not 0 <= age < time.monotonic() - _IMPORTED_AT + 60:
        return _IMPORTED_AT  # a clock that disagrees (a container's uptime): trust our own
    return time.monotonic() - age
