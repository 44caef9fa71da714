"""Search results the editor offers: per (file, kernel), as the engine agent sent them."""

from __future__ import annotations

import ast
import asyncio
import os
from dataclasses import dataclass, field

from kernelbrain.engine.agent.protocol import KernelRecord
from kernelbrain.engine.api.results import SearchResult, Variant

from .rebase import Rebased, rebase


@dataclass
class Offer:
    variant: Variant
    rebased: Rebased

    @property
    def stale(self) -> bool:
        return self.rebased.text is None


@dataclass
class ResultRegistry:
    """What the engine keeps for each (file, kernel), as the agent sent it: a finished job pushes
    its result, and a file's stored records are asked for once, when the file is first analysed
    (again after it changes on disk). Answers come from here, in memory."""

    _records: dict[tuple[str, str], KernelRecord] = field(default_factory=dict)
    _asked: dict[str, asyncio.Future] = field(default_factory=dict)  # realpath -> the request

    def put(self, path: str, record: KernelRecord) -> None:
        key = (os.path.realpath(path), record.kernel)
        before = self._records.get(key)
        if before is not None and record.profile_share is None:  # a job's result keeps the share
            record.profile_share, record.profile_script = (
                before.profile_share,
                before.profile_script,
            )
        self._records[key] = record

    def record(self, path: str, kernel: str) -> KernelRecord | None:
        return self._records.get((os.path.realpath(path), kernel))

    def get(self, path: str, kernel: str) -> SearchResult | None:
        record = self.record(path, kernel)
        return record.result if record is not None else None

    def asking(self, path: str) -> asyncio.Future | None:
        """The request for this file's stored records, if one was made since it last changed."""
        return self._asked.get(os.path.realpath(path))

    def ask(self, path: str, request: asyncio.Future) -> None:
        self._asked[os.path.realpath(path)] = request

    def offers(self, path: str, kernel: str, current: str) -> list[Offer]:
        result = self.get(path, kernel)
        if result is None:
            return []
        changed = changed_functions(result.original, current, [kernel, result.entry])
        out = []
        for v in result.variants:
            if not v.source or (v.measured and v.speedup <= 1.0):
                continue
            if changed:
                reason = f"{' and '.join(f'`{c}`' for c in changed)} changed since the search"
                out.append(Offer(v, Rebased(None, reason)))
            else:
                out.append(Offer(v, rebase(result.original, v.source, current)))
        return out

    def forget(self, path: str) -> None:
        real = os.path.realpath(path)
        for key in [k for k in self._records if k[0] == real]:
            self._records.pop(key, None)
        self._asked.pop(real, None)


def _functions(source: str) -> dict[str, str] | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    return {
        n.name: ast.dump(n) for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
    }


def changed_functions(original: str, current: str, names: list[str]) -> list[str]:
    """Which of `names` (the kernel, its entry) differ between the searched source and now
    (formatting and comments aside); a file that does not parse counts as changed."""
    before, after = _functions(original), _functions(current)
    if after is None:
        return [n for n in names if n]
    return [n for n in names if n and (before or {}).get(n) != after.get(n)]
