"""Search results the editor offers: per (file, kernel), from finished jobs or the store."""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from kernelbrain.engine.api.results import SearchResult, Variant
from kernelbrain.engine.store import Store
from kernelbrain.engine.task.discover import harness_config

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
    _results: dict[tuple[str, str], SearchResult] = field(default_factory=dict)
    _checked_store: set[tuple[str, str]] = field(default_factory=set)

    def put(self, path: str, kernel: str, result: SearchResult) -> None:
        self._results[(os.path.realpath(path), kernel)] = result

    def get(self, path: str, kernel: str) -> SearchResult | None:
        key = (os.path.realpath(path), kernel)
        if key not in self._results and key not in self._checked_store:
            self._checked_store.add(key)
            loaded = load_from_store(path, kernel)
            if loaded is not None:
                self._results[key] = loaded
        return self._results.get(key)

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
        for key in [k for k in self._results if k[0] == real]:
            self._results.pop(key, None)
            self._checked_store.discard(key)


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


def load_from_store(path: str, kernel: str) -> SearchResult | None:
    """The latest finished search of this kernel, from `.kernelbrain/` beside its harness config."""
    config = harness_config(path, kernel)
    if config is None:
        return None
    root = config.parent
    if not (root / ".kernelbrain" / "kernelbrain.db").exists():
        return None
    store = Store(root)
    try:
        record = store.latest_result(str(Path(path).resolve()), kernel)
    finally:
        store.close()
    if record is None or not record["result"]:
        return None
    try:
        return msgspec.convert(record["result"], SearchResult)
    except msgspec.ValidationError:
        return None
