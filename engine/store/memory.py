"""Experience memory: what paid and what failed, shared across searches and workspaces.

SQLite in `~/.cache/kernelbrain/memory.db` (`KERNELBRAIN_MEMORY_DIR` moves it). Each search
adds, per mutator, how many of its candidates it tried, how many paid (a variant faster than its
parent), the gain they brought (log speedup over the parent) and the commonest failure, under
the kernel's features: its op family and a set of traits (Triton calls used, static findings,
dtypes). A new search asks for the experience of kernels like its own (same family, weighted by
how many traits they share) and gets one `Prior` per mutator: what the search uses to decide
how many proposals each mutator gets before it has evidence of its own. Nothing of the user's
code is stored: only names of mutators, Triton calls and finding codes.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS experiences (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    family TEXT NOT NULL,
    traits TEXT NOT NULL,
    mutator TEXT NOT NULL,
    tried INTEGER NOT NULL,
    paid INTEGER NOT NULL,
    gain REAL NOT NULL,
    failure TEXT,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS experiences_by_family ON experiences (family);
CREATE TABLE IF NOT EXISTS wins (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    family TEXT NOT NULL,
    traits TEXT NOT NULL,
    chain TEXT NOT NULL,
    speedup REAL NOT NULL,
    created REAL NOT NULL
);
"""
MAX_ROWS_READ = 5000  # the newest rows of a family that inform a prior


def memory_enabled(requested: bool | None = None) -> bool:
    """`requested` when said, else on unless `KERNELBRAIN_MEMORY` is off (0, off, false, no)."""
    if requested is not None:
        return requested
    return os.environ.get("KERNELBRAIN_MEMORY", "on").strip().lower() not in (
        "0",
        "off",
        "false",
        "no",
    )


def default_folder() -> Path:
    return Path(os.environ.get("KERNELBRAIN_MEMORY_DIR") or Path.home() / ".cache" / "kernelbrain")


@dataclass(frozen=True)
class Prior:
    """What similar kernels taught about one mutator, weighted by similarity."""

    tried: float
    paid: float
    gain: float  # mean log speedup over the parent of the candidates that paid

    @property
    def rate(self) -> float:
        return self.paid / self.tried if self.tried else 0.0


@dataclass
class Outcome:
    """One search's tally for one mutator."""

    tried: int = 0
    paid: int = 0
    gain: float = 0.0
    failure: str | None = None


class Memory:
    def __init__(self, folder: Path | None = None):
        self.folder = folder or default_folder()
        self.path = self.folder / "memory.db"
        self.notice: str | None = None
        self._lock = threading.Lock()
        self.folder.mkdir(parents=True, exist_ok=True)
        self._conn = self._open()

    def _open(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, timeout=10, check_same_thread=False)
            conn.executescript(SCHEMA)
            conn.execute("SELECT count(*) FROM experiences").fetchone()
            return conn
        except sqlite3.DatabaseError as exc:
            aside = self.path.with_name(f"memory.db.unusable-{time.strftime('%Y%m%d-%H%M%S')}")
            self.path.replace(aside)
            self.notice = (
                f"the experience memory was not a usable database ({exc}); it was moved aside "
                f"({aside.name}) and a new one started"
            )
            conn = sqlite3.connect(self.path, timeout=10, check_same_thread=False)
            conn.executescript(SCHEMA)
            return conn

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def record(self, family: str, traits: set[str], outcomes: dict[str, Outcome]) -> None:
        rows = [
            (
                family,
                json.dumps(sorted(traits)),
                name,
                o.tried,
                o.paid,
                o.gain,
                o.failure,
                time.time(),
            )
            for name, o in outcomes.items()
            if o.tried
        ]
        with self._lock, self._conn:
            self._conn.executemany(
                "INSERT INTO experiences (family, traits, mutator, tried, paid, gain, failure, "
                "created) VALUES (?,?,?,?,?,?,?,?)",
                rows,
            )

    def record_win(self, family: str, traits: set[str], chain: str, speedup: float) -> None:
        """The chain of rewrites (`single-pass+config`) that made a search's best variant."""
        with self._lock, self._conn:
            self._conn.execute(
                "INSERT INTO wins (family, traits, chain, speedup, created) VALUES (?,?,?,?,?)",
                (family, json.dumps(sorted(traits)), chain, speedup, time.time()),
            )

    def winning_chains(self, family: str, traits: set[str], limit: int = 2) -> list[str]:
        """The chains that made the best variants of the most similar kernels of `family`,
        most similar (then fastest) first, each once."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT traits, chain, speedup FROM wins WHERE family=? ORDER BY id DESC LIMIT ?",
                (family, MAX_ROWS_READ),
            ).fetchall()
        ranked = sorted(rows, key=lambda r: (-_jaccard(traits, set(json.loads(r[0]))), -r[2]))
        out: list[str] = []
        for _, chain, _ in ranked:
            if chain not in out:
                out.append(chain)
        return out[:limit]

    def priors(self, family: str, traits: set[str]) -> dict[str, Prior]:
        """Per mutator, the experience of kernels of the same family, each search weighted by
        the share of traits it has in common with these (Jaccard)."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT traits, mutator, tried, paid, gain FROM experiences WHERE family=? "
                "ORDER BY id DESC LIMIT ?",
                (family, MAX_ROWS_READ),
            ).fetchall()
        tried: dict[str, float] = {}
        paid: dict[str, float] = {}
        gain: dict[str, float] = {}
        for text, name, t, p, g in rows:
            w = _jaccard(traits, set(json.loads(text)))
            tried[name] = tried.get(name, 0.0) + w * t
            paid[name] = paid.get(name, 0.0) + w * p
            gain[name] = gain.get(name, 0.0) + w * g
        return {
            name: Prior(tried[name], paid[name], gain[name] / paid[name] if paid[name] else 0.0)
            for name in tried
            if tried[name] > 0
        }

    def summary(self) -> list[tuple[str, str, int, int, int]]:
        """(family, mutator, tried, paid, searches) over everything remembered."""
        with self._lock:
            return self._conn.execute(
                "SELECT family, mutator, sum(tried), sum(paid), count(*) FROM experiences "
                "GROUP BY family, mutator ORDER BY family, sum(paid) DESC"
            ).fetchall()

    def clear(self) -> int:
        with self._lock, self._conn:
            self._conn.execute("DELETE FROM wins")
            return self._conn.execute("DELETE FROM experiences").rowcount


def _jaccard(a: set[str], b: set[str]) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 1.0


def log_gain(speedup: float, parent: float) -> float:
    return math.log(speedup / parent) if speedup > 0 and parent > 0 else 0.0
