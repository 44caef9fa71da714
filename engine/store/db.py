"""The workspace store: SQLite in `.kernelbrain/kernelbrain.db` (WAL mode).

Holds candidates (every source the search produced, de-duplicated by normalised hash),
outcomes (how far each got on which device, and why it stopped), measurements (per case,
measured or estimated), per-device ceilings and the history of searches, so a search can resume
and results reappear after a restart. A database that is corrupt or from another schema version
is moved aside with a message and rebuilt: losing a cache must never stop the user.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import msgspec

from ..task.layout import FILENAME, FOLDER
from .seal import seal, sealed

# 2: rows that are evidence carry a seal (`seal.py`)
SCHEMA_VERSION = 2

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE candidates (
    id TEXT NOT NULL,
    kernel_key TEXT NOT NULL,
    source TEXT NOT NULL,
    origin TEXT NOT NULL,
    parent TEXT,
    description TEXT NOT NULL DEFAULT '',
    llm INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    seal TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (kernel_key, id)
);
CREATE TABLE outcomes (
    kernel_key TEXT NOT NULL,
    candidate_id TEXT NOT NULL,
    device TEXT NOT NULL,
    rung TEXT NOT NULL,
    passed INTEGER NOT NULL,
    reason TEXT,
    message TEXT NOT NULL DEFAULT '',
    details TEXT NOT NULL DEFAULT '{}',
    created REAL NOT NULL,
    seal TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (kernel_key, candidate_id, device, rung)
);
CREATE TABLE measurements (
    kernel_key TEXT NOT NULL,
    candidate_id TEXT NOT NULL,
    device TEXT NOT NULL,
    case_label TEXT NOT NULL,
    measured INTEGER NOT NULL,
    baseline REAL,
    value REAL NOT NULL,
    speedup REAL,
    details TEXT NOT NULL DEFAULT '{}',
    created REAL NOT NULL,
    PRIMARY KEY (kernel_key, candidate_id, device, case_label, measured)
);
CREATE TABLE ceilings (
    device_key TEXT PRIMARY KEY,
    copy_gbps REAL NOT NULL,
    bf16_tflops REAL NOT NULL,
    measured_at TEXT NOT NULL
);
CREATE TABLE searches (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kernel_key TEXT NOT NULL,
    file TEXT NOT NULL,
    kernel TEXT NOT NULL,
    device TEXT NOT NULL,
    started REAL NOT NULL,
    finished REAL,
    status TEXT NOT NULL,
    result TEXT,
    seal TEXT NOT NULL DEFAULT ''
);
CREATE INDEX outcomes_by_kernel ON outcomes (kernel_key, device);
CREATE INDEX searches_by_file ON searches (file, kernel);
"""

# Tables added after version 1 shipped: created when missing, so no version bump is needed.
ADDITIVE = """
CREATE TABLE IF NOT EXISTS profiles (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    script TEXT NOT NULL,
    created REAL NOT NULL,
    total_us REAL NOT NULL,
    rows TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS lowerings (
    key TEXT PRIMARY KEY,
    result TEXT NOT NULL,
    created REAL NOT NULL,
    seal TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS search_locks (
    file TEXT NOT NULL,
    kernel TEXT NOT NULL,
    search_id INTEGER NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    token TEXT NOT NULL,
    started REAL NOT NULL,
    PRIMARY KEY (file, kernel)
);
"""

# Claims this process holds (their tokens): a claim by this pid is alive only while listed, so
# two searches of one kernel in one process (the editor's agent) exclude each other too.
_LIVE_CLAIMS: set[str] = set()


class SearchBusy(Exception):
    """Another search of the same kernel holds its claim in this store."""

    def __init__(self, holder: dict):
        self.holder = holder
        when = time.strftime("%H:%M:%S", time.localtime(holder["started"]))
        super().__init__(
            f"a search of `{holder['kernel']}` in {holder['file']} is already running "
            f"(process {holder['pid']} on {holder['host']}, started {when}); wait for it to "
            "finish or cancel it"
        )


def _holder_alive(host: str, pid: int, token: str) -> bool:
    if host != socket.gethostname():
        return True  # another machine sharing the folder: only it can say, so assume alive
    if pid == os.getpid():
        return token in _LIVE_CLAIMS
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class StoreNotice(msgspec.Struct):
    """What happened to an unusable database (shown once to the user)."""

    message: str
    moved_to: str


def kernel_key(file: str, kernel: str, source_hash: str) -> str:
    """Results belong to one kernel of one file at one version of its source."""
    return f"{file}::{kernel}@{source_hash}"


class Store:
    """A workspace's results database: candidates, outcomes, measurements, ceilings, searches,
    profiles and each running search's claim on its kernel.

    Long because the schema and every query live in one class: one process owns the SQL.
    """

    def __init__(self, root: str | Path):
        self.folder = Path(root) / FOLDER
        self.path = self.folder / FILENAME
        self.notice: StoreNotice | None = None
        self._lock = threading.RLock()
        self._claims: dict[int, str] = {}  # search id -> its claim's token
        if self.folder.is_symlink() or self.path.is_symlink():
            self._conn = self._in_memory(
                f"{self.path} is a link: KernelBrain never follows a workspace's store out of "
                "it (a cloned repository could point it at any database); this run keeps "
                "nothing"
            )
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        self._conn = self._open()

    # -- lifecycle ---------------------------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        try:
            conn = self._connect()
            version = self._version(conn)
            if version is None:
                self._create(conn)
            elif version != SCHEMA_VERSION:
                conn.close()
                return self._rebuild(
                    f"it has schema version {version}, this KernelBrain uses {SCHEMA_VERSION}"
                )
            else:
                conn.execute("PRAGMA quick_check").fetchone()
            conn.executescript(ADDITIVE)
            return conn
        except sqlite3.DatabaseError as exc:
            return self._rebuild(f"it is not a usable SQLite database ({exc})")

    def _in_memory(self, why: str) -> sqlite3.Connection:
        self.notice = StoreNotice(f"KernelBrain: {why}", "")
        conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._create(conn)
        conn.executescript(ADDITIVE)
        return conn

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=10, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    @staticmethod
    def _version(conn: sqlite3.Connection) -> int | None:
        has_meta = conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name='meta'"
        ).fetchone()
        if not has_meta:
            tables = conn.execute(
                "SELECT count(*) FROM sqlite_master WHERE type='table'"
            ).fetchone()[0]
            if tables:
                raise sqlite3.DatabaseError("tables from another program and no KernelBrain schema")
            return None
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return int(row[0]) if row else -1

    @staticmethod
    def _create(conn: sqlite3.Connection) -> None:
        conn.executescript(SCHEMA)
        conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    def _rebuild(self, why: str) -> sqlite3.Connection:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        aside = self.path.with_name(f"{FILENAME}.unusable-{stamp}")
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                p.replace(Path(str(aside) + suffix))
        self.notice = StoreNotice(
            f"KernelBrain moved its results database aside because {why}; "
            f"a new one was started (old file: {aside.name})",
            str(aside),
        )
        conn = self._connect()
        self._create(conn)
        conn.executescript(ADDITIVE)
        return conn

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _exec(self, sql: str, args: tuple = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._conn.execute(sql, args)

    # -- candidates and outcomes ---------------------------------------------------------------
    def add_candidate(
        self,
        key: str,
        cid: str,
        source: str,
        origin: str,
        parent: str | None,
        description: str,
        llm: bool,
    ) -> None:
        mark = seal(key, cid, source, origin, parent, description, bool(llm))
        self._exec(
            "INSERT OR IGNORE INTO candidates VALUES (?,?,?,?,?,?,?,?,?)",
            (cid, key, source, origin, parent, description, int(llm), time.time(), mark),
        )

    def candidate(self, key: str, cid: str) -> dict | None:
        row = self._exec(
            "SELECT id, source, origin, parent, description, llm, seal FROM candidates "
            "WHERE kernel_key=? AND id=?",
            (key, cid),
        ).fetchone()
        if row is None or not sealed(row[6], key, cid, *row[1:5], bool(row[5])):
            return None
        return dict(zip(("id", "source", "origin", "parent", "description", "llm"), row))

    def record_outcome(
        self,
        key: str,
        cid: str,
        device: str,
        rung: str,
        passed: bool,
        reason: str | None,
        message: str,
        details: Any = None,
    ) -> None:
        text = _dumps(details)
        mark = seal(key, cid, device, rung, bool(passed), reason, message, text)
        self._exec(
            "INSERT OR REPLACE INTO outcomes VALUES (?,?,?,?,?,?,?,?,?,?)",
            (key, cid, device, rung, int(passed), reason, message, text, time.time(), mark),
        )

    def outcomes(self, key: str, device: str) -> dict[str, dict[str, dict]]:
        """candidate id -> rung -> {passed, reason, message, details}; rows this machine did not
        write (their seal does not match) are left out."""
        out: dict[str, dict[str, dict]] = {}
        for cid, rung, passed, reason, message, details, mark in self._exec(
            "SELECT candidate_id, rung, passed, reason, message, details, seal FROM outcomes "
            "WHERE kernel_key=? AND device=?",
            (key, device),
        ):
            if not sealed(mark, key, cid, device, rung, bool(passed), reason, message, details):
                continue
            out.setdefault(cid, {})[rung] = {
                "passed": bool(passed),
                "reason": reason,
                "message": message,
                "details": json.loads(details),
            }
        return out

    def record_measurement(
        self,
        key: str,
        cid: str,
        device: str,
        case: str,
        measured: bool,
        baseline: float | None,
        value: float,
        speedup: float | None,
        details: Any = None,
    ) -> None:
        self._exec(
            "INSERT OR REPLACE INTO measurements VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                key,
                cid,
                device,
                case,
                int(measured),
                baseline,
                value,
                speedup,
                _dumps(details),
                time.time(),
            ),
        )

    def measurements(self, key: str, cid: str, device: str) -> list[dict]:
        cols = ("case_label", "measured", "baseline", "value", "speedup", "details")
        return [
            dict(zip(cols, r)) | {"details": json.loads(r[5]), "measured": bool(r[1])}
            for r in self._exec(
                f"SELECT {', '.join(cols)} FROM measurements WHERE kernel_key=? AND candidate_id=? AND device=? "
                "ORDER BY rowid",
                (key, cid, device),
            )
        ]

    # -- ceilings ------------------------------------------------------------------------------
    def save_ceilings(
        self, device_key: str, copy_gbps: float, bf16_tflops: float, measured_at: str
    ) -> None:
        self._exec(
            "INSERT OR REPLACE INTO ceilings VALUES (?,?,?,?)",
            (device_key, copy_gbps, bf16_tflops, measured_at),
        )

    def ceilings(self, device_key: str) -> dict | None:
        row = self._exec(
            "SELECT copy_gbps, bf16_tflops, measured_at FROM ceilings WHERE device_key=?",
            (device_key,),
        ).fetchone()
        return dict(zip(("copy_gbps", "bf16_tflops", "measured_at"), row)) if row else None

    # -- search history --------------------------------------------------------------------------
    def start_search(self, key: str, file: str, kernel: str, device: str) -> int:
        """Record a search as running and claim its kernel: one search of a kernel at a time (two
        would compete for the device and for the results). A claim whose process is gone is taken
        over and its search marked `interrupted`; a live one raises `SearchBusy`. The claim ends
        with `finish_search`."""
        token = uuid.uuid4().hex
        now = time.time()
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                row = self._conn.execute(
                    "SELECT search_id, host, pid, token, started FROM search_locks "
                    "WHERE file=? AND kernel=?",
                    (file, kernel),
                ).fetchone()
                if row is not None:
                    old_id, host, pid, old_token, started = row
                    if _holder_alive(host, pid, old_token):
                        raise SearchBusy(
                            {"file": file, "kernel": kernel, "host": host, "pid": pid}
                            | {"started": started, "search_id": old_id}
                        )
                    self._conn.execute(
                        "UPDATE searches SET status='interrupted', finished=? "
                        "WHERE id=? AND status='running'",
                        (now, old_id),
                    )
                cur = self._conn.execute(
                    "INSERT INTO searches (kernel_key, file, kernel, device, started, status) "
                    "VALUES (?,?,?,?,?,?)",
                    (key, file, kernel, device, now, "running"),
                )
                search_id = int(cur.lastrowid)
                self._conn.execute(
                    "INSERT OR REPLACE INTO search_locks VALUES (?,?,?,?,?,?,?)",
                    (file, kernel, search_id, socket.gethostname(), os.getpid(), token, now),
                )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            _LIVE_CLAIMS.add(token)
            self._claims[search_id] = token
        return search_id

    def running_search(self, file: str, kernel: str) -> dict | None:
        """The live search holding `kernel`'s claim ({file, kernel, host, pid, started,
        search_id}), or None when no live process holds it."""
        row = self._exec(
            "SELECT search_id, host, pid, token, started FROM search_locks WHERE file=? AND kernel=?",
            (file, kernel),
        ).fetchone()
        if row is None or not _holder_alive(row[1], row[2], row[3]):
            return None
        return {"file": file, "kernel": kernel, "host": row[1], "pid": row[2]} | {
            "started": row[4],
            "search_id": row[0],
        }

    def finish_search(self, search_id: int, status: str, result: Any) -> None:
        """Record how a search ended and release its claim on the kernel."""
        text = _dumps(result)
        row = self._exec(
            "SELECT kernel_key, file, kernel, device FROM searches WHERE id=?", (search_id,)
        ).fetchone()
        mark = seal(search_id, *row, status, text) if row else ""
        self._exec(
            "UPDATE searches SET finished=?, status=?, result=?, seal=? WHERE id=?",
            (time.time(), status, text, mark, search_id),
        )
        token = self._claims.pop(search_id, None)
        if token is not None:
            _LIVE_CLAIMS.discard(token)
            self._exec("DELETE FROM search_locks WHERE token=?", (token,))

    def searches(self, file: str | None = None, kernel: str | None = None) -> Iterator[dict]:
        sql = (
            "SELECT id, kernel_key, file, kernel, device, started, finished, status, result, seal "
            "FROM searches"
        )
        args: tuple = ()
        if file is not None:
            sql += " WHERE file=?" + (" AND kernel=?" if kernel else "")
            args = (file, kernel) if kernel else (file,)
        cols = (
            "id",
            "kernel_key",
            "file",
            "kernel",
            "device",
            "started",
            "finished",
            "status",
            "result",
            "seal",
        )
        for row in self._exec(sql + " ORDER BY id", args):
            rec = dict(zip(cols, row))
            mark = rec.pop("seal")
            fields = (rec["id"], rec["kernel_key"], rec["file"], rec["kernel"], rec["device"])
            if rec["result"] and not sealed(mark, *fields, rec["status"], rec["result"]):
                rec["result"] = None  # not written on this machine: no evidence of anything
            rec["result"] = json.loads(rec["result"]) if rec["result"] else None
            yield rec

    # -- profiles (kernelbrain profile) --------------------------------------------------------
    def save_profile(self, script: str, total_us: float, rows: list[dict]) -> None:
        self._exec(
            "INSERT INTO profiles (script, created, total_us, rows) VALUES (?,?,?,?)",
            (script, time.time(), total_us, _dumps(rows)),
        )

    def kernel_profile(self, file: str, kernel: str) -> dict | None:
        """This kernel's row of the latest profile that ran it: {script, share, time_us, calls}."""
        for script, rows in self._exec("SELECT script, rows FROM profiles ORDER BY id DESC"):
            for r in json.loads(rows):
                if r.get("kernel") == kernel and r.get("file") == file:
                    return {"script": script} | r
        return None

    # -- torch.compile of a reference (search/lowering_cache.py) --------------------------------
    def save_lowering(self, key: str, result: Any) -> None:
        text = _dumps(result)
        self._exec(
            "INSERT OR REPLACE INTO lowerings VALUES (?,?,?,?)",
            (key, text, time.time(), seal("lowering", key, text)),
        )

    def lowering(self, key: str) -> tuple[dict, float] | None:
        """(what was stored under `key`, when), if this machine stored it (sealed)."""
        row = self._exec(
            "SELECT result, created, seal FROM lowerings WHERE key=?", (key,)
        ).fetchone()
        if row is None or not sealed(row[2], "lowering", key, row[0]):
            return None
        return json.loads(row[0]), row[1]

    def latest_result(self, file: str, kernel: str) -> dict | None:
        done = [
            s
            for s in self.searches(file, kernel)
            if s["status"] in ("finished", "cancelled") and s["result"]
        ]
        return done[-1] if done else None


def _dumps(value: Any) -> str:
    return msgspec.json.encode(value if value is not None else {}).decode()
