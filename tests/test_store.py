"""The SQLite store: round trips, WAL mode, corrupt or foreign databases moved aside, and one
search of a kernel at a time."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from kernelbrain.engine.store import SCHEMA_VERSION, SearchBusy, Store, kernel_key


def test_round_trip_and_wal(tmp_path):
    s = Store(tmp_path)
    key = kernel_key("ops/a.py", "k", "abc")
    s.add_candidate(key, "c1", "src", "config", None, "BLOCK=1024", False)
    s.add_candidate(key, "c1", "other", "config", None, "dup", False)  # de-duplicated by id
    assert s.candidate(key, "c1")["source"] == "src"
    s.record_outcome(key, "c1", "cpu", "smoke", True, None, "ok", {"cases": 2})
    s.record_outcome(key, "c1", "cpu", "full", False, "mismatch", "bad", None)
    assert s.outcomes(key, "cpu")["c1"]["full"] == {
        "passed": False,
        "reason": "mismatch",
        "message": "bad",
        "details": {},
    }
    s.record_measurement(key, "c1", "cuda:0", "case 0", True, 1.0, 0.5, 2.0, {"p": 0.001})
    assert s.measurements(key, "c1", "cuda:0")[0]["speedup"] == 2.0
    sid = s.start_search(key, "ops/a.py", "k", "cpu")
    s.finish_search(sid, "finished", {"best": "c1"})
    assert s.latest_result("ops/a.py", "k")["result"] == {"best": "c1"}
    s.save_ceilings("H200", 4246.0, 687.0, "2026-11-29")
    assert s.ceilings("H200")["copy_gbps"] == 4246.0
    mode = s._conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal" and s.notice is None
    s.close()
    reopened = Store(tmp_path)
    assert reopened.candidate(key, "c1") is not None and reopened.notice is None


def test_corrupt_database_is_moved_aside_and_rebuilt(tmp_path):
    folder = tmp_path / ".kernelbrain"
    folder.mkdir()
    (folder / "kernelbrain.db").write_bytes(b"this is not sqlite at all" * 100)
    s = Store(tmp_path)
    assert s.notice is not None and "moved its results database aside" in s.notice.message
    assert (folder / s.notice.moved_to.split("/")[-1]).exists()
    s.add_candidate("k", "c", "src", "o", None, "", False)  # usable again
    assert s.candidate("k", "c")["source"] == "src"


def test_foreign_schema_version_is_moved_aside(tmp_path):
    s = Store(tmp_path)
    s._conn.execute(
        "UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 7),)
    )
    s.close()
    again = Store(tmp_path)
    assert (
        again.notice is not None and f"schema version {SCHEMA_VERSION + 7}" in again.notice.message
    )


def test_database_of_another_program_is_not_touched_in_place(tmp_path):
    folder = tmp_path / ".kernelbrain"
    folder.mkdir()
    other = sqlite3.connect(folder / "kernelbrain.db")
    other.execute("CREATE TABLE users (name TEXT)")
    other.commit()
    other.close()
    s = Store(tmp_path)
    assert s.notice is not None
    moved = sqlite3.connect(s.notice.moved_to)
    assert moved.execute("SELECT name FROM sqlite_master").fetchone()[0] == "users"


def test_one_search_of_a_kernel_at_a_time(tmp_path):
    """A live search holds its kernel: a second one (another store, this process or another)
    is refused with who holds it; finishing releases it; other kernels are not held."""
    first, second = Store(tmp_path), Store(tmp_path)
    sid = first.start_search("k1", "ops/a.py", "k", "cpu")
    with pytest.raises(SearchBusy, match=r"already running \(process \d+"):
        second.start_search("k1", "ops/a.py", "k", "cpu")
    assert second.running_search("ops/a.py", "k")["search_id"] == sid
    other = second.start_search("k1", "ops/a.py", "other_kernel", "cpu")
    second.finish_search(other, "finished", None)
    first.finish_search(sid, "cancelled", None)
    assert second.running_search("ops/a.py", "k") is None
    again = second.start_search("k1", "ops/a.py", "k", "cpu")
    second.finish_search(again, "finished", None)
    assert [s["status"] for s in second.searches("ops/a.py", "k")] == ["cancelled", "finished"]


def test_a_claim_whose_process_died_is_taken_over(tmp_path):
    """A search killed without finishing (kill -9, a crash) leaves its claim: the next search
    takes it over and marks the dead one interrupted."""
    script = (
        "import sys; from kernelbrain.engine.store import Store; "
        "Store(sys.argv[1]).start_search('k1', 'ops/a.py', 'k', 'cpu')"
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True)  # exits holding it
    store = Store(tmp_path)
    assert store.running_search("ops/a.py", "k") is None
    sid = store.start_search("k1", "ops/a.py", "k", "cpu")
    assert [s["status"] for s in store.searches("ops/a.py", "k")] == ["interrupted", "running"]
    store.finish_search(sid, "finished", None)


def test_rows_written_on_another_machine_are_not_evidence(tmp_path, monkeypatch):
    """A store shipped in a cloned repository (or edited by hand) claims verified variants: its
    rows carry no seal of this machine's key, so none of them is read back as a verdict."""
    from kernelbrain.engine.store import seal

    monkeypatch.setenv("KERNELBRAIN_STATE_DIR", str(tmp_path / "elsewhere"))
    theirs = Store(tmp_path)
    theirs.add_candidate("k", "c1", "src", "config", None, "forged", False)
    theirs.record_outcome("k", "c1", "cpu", "full", True, None, "", {"timing": {"speedup": 9}})
    sid = theirs.start_search("k", "f.py", "kern", "cpu")
    theirs.finish_search(sid, "finished", {"best": "c1"})
    theirs.save_lowering("L", {"compile_us": {"default": [0.1]}})  # "the compiler is slow"
    assert theirs.outcomes("k", "cpu") and theirs.candidate("k", "c1")  # theirs, to them
    assert theirs.lowering("L")[0] == {"compile_us": {"default": [0.1]}}
    theirs.close()
    monkeypatch.setenv("KERNELBRAIN_STATE_DIR", str(tmp_path / "here"))
    ours = Store(tmp_path)
    assert ours.candidate("k", "c1") is None
    assert ours.outcomes("k", "cpu") == {}
    assert ours.latest_result("f.py", "kern") is None
    assert ours.lowering("L") is None
    # an edited row loses its seal too, even on the machine that wrote it
    ours.add_candidate("k", "c2", "src", "config", None, "ours", False)
    ours.record_outcome("k", "c2", "cpu", "full", False, "mismatch", "wrong", {})
    ours._exec("UPDATE outcomes SET passed=1, reason=NULL WHERE candidate_id='c2'")
    assert ours.candidate("k", "c2") is not None and ours.outcomes("k", "cpu") == {}
    ours.save_lowering("M", {"compile_us": {"default": [50.0]}})
    assert ours.lowering("M")[0] == {"compile_us": {"default": [50.0]}}
    ours._exec("UPDATE lowerings SET result=replace(result, '50.0', '5.0') WHERE key='M'")
    assert ours.lowering("M") is None
    ours.close()
    assert seal.key_dir() == tmp_path / "here"


def test_a_store_that_is_a_link_is_not_followed(tmp_path):
    """`.kernelbrain` pointing out of the workspace (at a database elsewhere): nothing is read
    from it or written to it, and the user is told why this run keeps nothing."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = Store(elsewhere)
    target.add_candidate("k", "c1", "src", "config", None, "there", False)
    target.close()
    before = sorted(p.name for p in (elsewhere / ".kernelbrain").iterdir())
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".kernelbrain").symlink_to(elsewhere / ".kernelbrain")
    store = Store(ws)
    assert store.notice is not None and "link" in store.notice.message
    assert store.candidate("k", "c1") is None
    store.add_candidate("k", "c2", "src", "config", None, "here", False)
    store.close()
    assert sorted(p.name for p in (elsewhere / ".kernelbrain").iterdir()) == before
    check = Store(elsewhere)
    assert check.candidate("k", "c2") is None and check.candidate("k", "c1") is not None
    check.close()
