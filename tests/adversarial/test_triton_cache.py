"""Triton's cache is no way out of the sandbox. Every Triton process of the user trusts the
user's cache and loads what it holds, native code included; so the workers never get it: each
pool has a private cache, removed with the pool. Candidates here run past the gate (straight to
the sandboxed harness), as if the gate had been bypassed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelbrain.engine.evaluate import sandbox
from kernelbrain.engine.evaluate.pool import WorkerPool
from kernelbrain.engine.evaluate.verify import run_harness

from .attacks import at_top, base_task

PLANTS = {
    # a native helper under the key Triton builds its driver utilities in
    "a native helper in the cache it was given": (
        "import os as kb_os",
        "from triton import knobs as kb_knobs",
        "kb_d = kb_os.path.join(kb_knobs.cache.dir, 'kbplant')",
        "kb_os.makedirs(kb_d, exist_ok=True)",
        "open(kb_os.path.join(kb_d, 'cuda_utils.cpython-312-x86_64-linux-gnu.so'), 'wb')"
        ".write(b'\\x7fELF planted')",
    ),
    # the user's own cache, by its path
    "a file in the user's cache, by path": (
        "import os as kb_os",
        "try:",
        "    kb_os.makedirs('@USER_CACHE@/kbplant', exist_ok=True)",
        "    open('@USER_CACHE@/kbplant/x.so', 'wb').write(b'planted')",
        "except OSError:",
        "    pass",
    ),
    # a link that a later writer of the cache would follow outside
    "a link out of the cache": (
        "import os as kb_os",
        "from triton import knobs as kb_knobs",
        "try:",
        "    kb_os.symlink('@OUTSIDE@', kb_os.path.join(kb_knobs.cache.dir, 'kblink'))",
        "except OSError:",
        "    pass",
    ),
    # state kept for the next run
    "state for a later run": (
        "import os as kb_os",
        "from triton import knobs as kb_knobs",
        "kb_p = kb_os.path.join(kb_knobs.cache.dir, 'kbstate')",
        "kb_n = int(open(kb_p).read()) if kb_os.path.exists(kb_p) else 0",
        "open(kb_p, 'w').write(str(kb_n + 1))",
    ),
}


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


@pytest.mark.slow
def test_a_candidate_leaves_nothing_in_any_cache_another_process_trusts(tmp_path, monkeypatch):
    assert sandbox.probe().available, sandbox.probe().describe()  # CI installs bubblewrap
    user_cache, outside = tmp_path / "user-triton-cache", tmp_path / "outside"
    user_cache.mkdir()
    outside.mkdir()
    (outside / "keep.txt").write_text("untouched")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(user_cache))  # what the user's Triton uses
    task = base_task(tmp_path / "ws")
    private = []
    for run in range(2):  # a second pool: nothing kept from the first
        with WorkerPool() as pool:
            private.append(Path(pool.triton_cache))
            assert private[-1] != user_cache and not str(private[-1]).startswith(str(user_cache))
            for name, lines in PLANTS.items():
                source = at_top(*lines).replace("@USER_CACHE@", str(user_cache))
                source = source.replace("@OUTSIDE@", str(outside))
                result = run_harness(pool, task, source, "cpu")
                assert result.stage != "load", f"{name}: {result.message[:300]}"
            planted = private[-1] / "kbstate"
            assert planted.read_text() == "1", "each pool starts from an empty cache"
        assert not private[-1].exists(), "the pool's cache is removed with it"
    assert _files(user_cache) == [], "the user's cache got something"
    assert _files(outside) == ["keep.txt"] and (outside / "keep.txt").read_text() == "untouched"
    assert os.environ["TRITON_CACHE_DIR"] == str(user_cache)


FILLS = {
    # its scratch folder (TMPDIR) and its home are capped tmpfs: past the cap, writes fail
    "the scratch folder": "kb_os.environ['TMPDIR']",
    "the home folder": "kb_os.path.expanduser('~')",
    # the one shared folder it may write: no file there may pass the file-size limit
    "the pool's Triton cache": "__import__('triton.knobs').knobs.cache.dir",
}


@pytest.mark.slow
@pytest.mark.parametrize("where", sorted(FILLS))
def test_a_candidate_cannot_fill_the_disk(tmp_path, where):
    """A candidate writes 700 MB in one file: it is stopped at the cap (512 MB), and if it were
    not, it raises to say so (the harness would reject it with that message)."""
    assert sandbox.probe().available, sandbox.probe().describe()
    task = base_task(tmp_path / "ws")
    lines = (
        "import os as kb_os",
        "kb_chunk = b'x' * (1 << 20)",
        "kb_n = 0",
        "try:",
        f"    with open(kb_os.path.join({FILLS[where]}, 'kb-fill'), 'wb') as kb_f:",
        "        for _ in range(700):",
        "            kb_f.write(kb_chunk)",
        "            kb_f.flush()",
        "            kb_n += 1",
        "except OSError:",
        "    pass",
        "if kb_n >= 700:",
        "    raise RuntimeError(f'wrote {kb_n} MB')",
    )
    with WorkerPool() as pool:
        result = run_harness(pool, task, at_top(*lines), "cpu")
        assert "wrote 700 MB" not in result.message, result.message
        assert result.accepted, f"{result.stage}/{result.reason}: {result.message[:300]}"
        workdirs = [w._workdir for w in pool._workers.values() if w._workdir]
        assert workdirs and all(_files(Path(d)) in ([], ["home"]) for d in workdirs)
