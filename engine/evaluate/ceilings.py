"""Per-device ceilings (copy, write and read-stream bandwidth, bf16 matmul rate), measured once
and cached on disk.

Keyed by device name, torch/triton versions and how the timing flushes the L2, in the user's
cache folder, so every project on the machine shares one measurement (it takes a few seconds of
GPU time) and a ceiling is never compared with times measured another way.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec

from .. import protocol as m
from ..api import facts
from .pool import WorkerDied, WorkerPool

# Bumped whenever `timing.measure` changes how it times (the flush before each run).
TIMING_METHOD = "flush: read pass"
# Changed whenever `timing.measure_ceilings` measures something new (an older entry lacks it).
MEASURED = "copy, write, read stream, L2, bf16 matmul"


def cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernelbrain" / "ceilings.json"


class CeilingCache:
    def __init__(self, path: Path | None = None):
        self.path = path or cache_path()

    def _load(self) -> dict:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}  # missing or corrupt: measure again

    def key(self, info: m.Ready) -> str:
        return (
            f"{info.device_name}|torch {info.torch}|triton {info.triton}|{TIMING_METHOD}|{MEASURED}"
        )

    def get_or_measure(self, pool: WorkerPool, device: str) -> facts.Ceilings | None:
        if not device.startswith("cuda"):
            return None
        worker = pool.worker(device)
        info = worker.info if worker.alive and worker.info else pool.call(device, m.Ping(), 180.0)
        key = self.key(info)
        data = self._load()
        if key in data:
            try:
                return msgspec.convert(data[key], facts.Ceilings)
            except msgspec.ValidationError:
                pass
        try:
            ceilings = pool.call(device, m.MeasureCeilings(), 300.0)
        except WorkerDied:
            return None
        if not isinstance(ceilings, facts.Ceilings):
            return None
        data[key] = msgspec.to_builtins(ceilings)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(
                f".{os.getpid()}.tmp"
            )  # searches on two GPUs may write at once
            tmp.write_text(json.dumps(data, indent=2))
            tmp.replace(self.path)
        except OSError:
            pass  # a read-only home only costs a re-measurement next time
        return ceilings
