"""Shared test helpers: repository paths and a throwaway copy of the examples."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"

# The experience memory is shared across searches: on in a user's home, off in the tests (their
# searches would teach each other, so a test's result would depend on the ones before it). The
# memory's own tests turn it on in a folder of their own.
os.environ["KERNELBRAIN_MEMORY"] = "off"
# The key that seals stored verdicts (`engine/store/seal.py`): this test run's own, never the
# user's (every process the tests start inherits it, so they are "this machine" to each other).
if "KERNELBRAIN_STATE_DIR" not in os.environ:
    import tempfile

    os.environ["KERNELBRAIN_STATE_DIR"] = tempfile.mkdtemp(prefix="kb-test-state-")


@pytest.fixture(scope="module")
def pool():
    """A worker pool for the module's tests (its workers start once, on first use)."""
    from kernelbrain.engine.evaluate.pool import WorkerPool

    with WorkerPool() as p:
        yield p


@pytest.fixture
def examples_copy(tmp_path: Path) -> Path:
    """A private copy of examples/ so tests may edit files freely."""
    dest = tmp_path / "examples"
    shutil.copytree(EXAMPLES, dest, ignore=shutil.ignore_patterns("__pycache__", ".kernelbrain"))
    return dest


def cache_entries(folder: Path) -> set[str]:
    """Triton's cache keeps one folder per compiled kernel specialisation (with its cubin), and
    others for the C launchers and driver helpers a GPU process builds once per signature."""
    return (
        {p.name for p in folder.iterdir() if any(p.glob("*.cubin"))} if folder.is_dir() else set()
    )


def pytest_collection_modifyitems(config, items):
    """Tests marked `gpu` need a CUDA device; without one they are skipped, visibly."""
    from kernelbrain.engine.evaluate.devices import gpu_count

    if gpu_count():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the GPU machine; see BENCHMARKS.md)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
