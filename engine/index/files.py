"""The Python files of a workspace that may hold the user's kernels: what `check`, the language
server's workspace diagnostics and the whole-program profile's mapping all walk."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

# Folders that never hold the user's own kernels.
SKIP_DIRS = {
    ".git",
    ".hg",
    ".svn",
    "__pycache__",
    "node_modules",
    ".kernelbrain",
    ".venv",
    "venv",
    ".tox",
    ".nox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    "build",
    "dist",
    "site-packages",
}


def iter_python_files(root: Path) -> Iterator[Path]:
    """Python files under `root`, skipping VCS, caches, virtual environments and build output."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d
            for d in dirnames
            if d not in SKIP_DIRS
            and not d.startswith(".")
            and not (Path(dirpath, d, "pyvenv.cfg")).exists()
        )
        for name in sorted(filenames):
            if name.endswith(".py"):
                yield Path(dirpath, name)
