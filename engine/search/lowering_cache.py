"""torch.compile's answer for a reference, kept in the workspace's store: a later search of the
same kernel starts from the compiler's kernels and times without compiling the reference again
(max-autotune on the benchmark cases takes tens of seconds of a search's budget).

An answer is stored per mode under a key made of everything it follows from: the task (its
names, cases and tolerances), the text of the reference's file, of the kernel's file and of the
Python files beside the reference (helpers it may import), the seed that draws the cases, the
mode, and the device, PyTorch and Triton it was compiled with. A row is believed only under this
machine's seal (`store/seal.py`), like every row that is evidence: the compile times it holds are
shown to the user. The kernels it holds are a candidate's source like any other: they go through
the gate, the sandbox and the judge before anything is offered.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path

import msgspec

from ..api import facts
from ..store import Store

# Bumped whenever the capture (worker/lowering.py) writes its answer differently.
CAPTURE_VERSION = 1


def _text(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


class LoweringCache:
    """The store's answers of `LowerReference`, for one task on one device (`identity`: the
    device's name and the PyTorch and Triton versions its worker runs)."""

    def __init__(self, store: Store, task, seed: int, identity: str):
        self.store = store
        beside = sorted(Path(task.reference_module).parent.glob("*.py"))
        material = [
            CAPTURE_VERSION,
            msgspec.to_builtins(task),
            _text(task.file),
            [(p.name, _text(p)) for p in beside],
            seed,
            identity,
        ]
        self._base = json.dumps(material, sort_keys=True, default=str)

    def key(self, mode: str) -> str:
        return hashlib.sha256(f"{self._base}|{mode}".encode()).hexdigest()

    def get(self, mode: str) -> tuple[facts.LoweringResult, str] | None:
        """The stored answer for `mode` and when it was compiled (a date), if any is believed."""
        found = self.store.lowering(self.key(mode))
        if found is None:
            return None
        try:
            result = msgspec.convert(found[0], facts.LoweringResult)
        except msgspec.ValidationError:
            return None
        return result, dt.datetime.fromtimestamp(found[1]).strftime("%Y-%m-%d %H:%M")

    def put(self, mode: str, result: facts.LoweringResult) -> None:
        self.store.save_lowering(self.key(mode), msgspec.to_builtins(result))
