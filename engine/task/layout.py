"""Where a workspace keeps what KernelBrain learns about its kernels: `.kernelbrain/kernelbrain.db`
in the folder of the nearest harness config (else the file's own folder). Paths only: the store
(`engine/store`) opens the database, and a front end can ask whether there is one with a `stat`."""

from __future__ import annotations

from pathlib import Path

from .discover import config_files

FOLDER = ".kernelbrain"
FILENAME = "kernelbrain.db"


def results_database(root: Path) -> Path:
    """The database a store rooted at `root` keeps (it may not exist yet)."""
    return Path(root) / FOLDER / FILENAME


def store_root(path: Path) -> Path:
    """Where a file's results live: the folder of the nearest harness config above it, else its own."""
    config = next(config_files(path), None)
    return config.parent if config is not None else (path if path.is_dir() else path.parent)
