"""Task harness: how the engine knows how to run a kernel (entry, reference, inputs).

Discovery and validation here are static (config files and `ast`), so the language server can
use them; running the harness happens in evaluation workers.
"""

from .discover import find_task, load_tasks
from .spec import Task, TaskError, TaskSpec

__all__ = ["Task", "TaskError", "TaskSpec", "find_task", "load_tasks"]
