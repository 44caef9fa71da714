"""Task harnesses as a front end sees them: find the harness of a kernel, the config file that
declares it, and the plan of a scaffolded one. Static: the harness's code is parsed, never run."""

from __future__ import annotations

from pathlib import Path

from ..task import TaskError, find_task
from ..task.discover import harness_config
from ..task.layout import results_database, store_root
from ..task.scaffold import plan

__all__ = ["TaskError", "find_task", "harness_config", "keeps_results", "plan"]


def keeps_results(path: str) -> bool:
    """Whether the workspace of this file keeps KernelBrain results (searches, profiles) at all:
    one `stat`, no database opened, so the editor asks the engine for them only where they are."""
    return results_database(store_root(Path(path))).exists()
