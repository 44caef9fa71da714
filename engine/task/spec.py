"""The task schema (`[[tasks]]` in kernelbrain.toml, `[[tool.kernelbrain.tasks]]` in pyproject.toml)."""

from __future__ import annotations

import msgspec


class TaskSpec(msgspec.Struct, forbid_unknown_fields=True):
    """One `[[tasks]]` table, as written by the user (paths relative to the config file)."""

    file: str
    kernel: str
    reference: str | None = None
    inputs: str | None = None
    entry: str | None = None
    small_inputs: str | None = None
    rtol: float | None = None
    atol: float | None = None
    device: str | None = None
    shapes: list[str] | None = None
    outputs: list[str] | None = None  # what the reference returns: launcher arguments, "return"


class Task(msgspec.Struct, frozen=True):
    """A resolved, statically validated task: absolute paths and names that exist.

    `kind` is "config" for the schema above and "kernelbench" for a KernelBench-style file
    (`Model`, `get_inputs`, `get_init_inputs`, `ModelNew`), where entry/reference/inputs name
    those pieces instead of functions.
    """

    kind: str
    file: str
    kernel: str
    entry: str
    reference_module: str  # absolute path of the file holding the reference
    reference: str
    inputs: str
    small_inputs: str | None = None
    rtol: float | None = None
    atol: float | None = None
    device: str | None = None
    shapes: list[str] | None = None
    config: str | None = None  # the config file it came from, if any
    # Results written into arguments that the reference returns, in its order (`results.py`).
    outputs: list[str] | None = None
    root: str | None = None  # directory added to sys.path in workers (the config's folder)


class TaskError(Exception):
    """A missing or wrong piece of the harness, with a message that says how to fix it."""

    def __init__(self, message: str, code: str = "harness"):
        super().__init__(message)
        self.code = code
