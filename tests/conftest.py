"""Shared test helpers: repository paths and a throwaway copy of the examples."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


@pytest.fixture
def examples_copy(tmp_path: Path) -> Path:
    """A private copy of examples/ so tests may edit files freely."""
    dest = tmp_path / "examples"
    shutil.copytree(EXAMPLES, dest, ignore=shutil.ignore_patterns("__pycache__", ".kernelbrain"))
    return dest
