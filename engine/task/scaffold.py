"""`kernelbrain init FILE::KERNEL`: write a harness skeleton for a kernel.

Adds a `[[tasks]]` entry to the nearest `kernelbrain.toml` (creating one beside the file if
there is none) with the detected entry, and writes `<stem>_harness.py` beside the kernel file
with a reference and input stubs that raise a clear `NotImplementedError` until filled in.
The kernel's own file is never modified.
"""

from __future__ import annotations

import ast
import copy
import os
from dataclasses import dataclass
from pathlib import Path

from ..index import parse_module, reach
from .discover import config_files, entries_launching, find_task, load_tasks
from .spec import TaskError

STUB_MARK = "KernelBrain harness stub"


@dataclass
class Scaffold:
    config: Path
    harness: Path
    entry: str
    created_config: bool
    config_text: str = ""  # the config's full new text
    harness_text: str = ""


def _entry_for(path: Path, kernel: str) -> tuple[str, str]:
    """The entry's name and its parameter list as written: the module-level callable (a
    function, or an alias such as `f = Fn.apply`, whose `ctx` is left out) that reaches the
    kernel's launch."""
    source = path.read_text(encoding="utf-8")
    index = parse_module(source, str(path)).index
    k = index.kernel(kernel)
    if k is None:
        found = ", ".join(x.name for x in index.kernels) or "none"
        raise TaskError(
            f"kernel `{kernel}` not found in {path} (Triton kernels there: {found})",
            "kernel-not-found",
        )
    tree = ast.parse(source)
    entries = entries_launching(tree, k.launchers)
    if not entries:
        raise TaskError(
            f"nothing callable at module level in {path.name} launches `{kernel}`: write the "
            f"launcher (a function, or an alias such as `f = MyFunction.apply`, whose calls reach "
            f"`{kernel}[grid](...)`) first",
            "entry-not-found",
        )
    name = entries[0]
    _, fn, bound = reach.resolve(tree, name)  # type: ignore[misc]
    returns = _returns_value(fn)
    args = copy.deepcopy(fn.args)
    if bound:
        if args.posonlyargs:
            args.posonlyargs = args.posonlyargs[1:]
        elif args.args:
            args.args = args.args[1:]
    return name, ast.unparse(args), returns


def _returns_value(fn: ast.AST) -> bool:
    """Whether the function itself (not a function nested in it) returns a value."""
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return) and node.value is not None:
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    return False


def _reference_doc(name: str, returns: bool) -> str:
    if returns:
        return f"Same arguments as `{name}`; the expected result, computed in PyTorch."
    return (
        f"Same arguments as `{name}`, which returns nothing: write the expected results into\n"
        f"    this call's copies of the arguments `{name}` writes (`out.copy_(...)`), or return\n"
        '    them and name them in the task (`outputs = ["out"]`; docs/harness.md).'
    )


def _stub_source(
    rel_file: str, kernel: str, name: str, args: str, harness_name: str, returns: bool = True
) -> str:
    msg = f"{STUB_MARK}: fill in `{{fn}}` in {harness_name} ({{what}})"
    return f'''"""KernelBrain harness for {rel_file}::{kernel}: fill in the three functions below.

`{name}_reference` must compute what `{name}` computes, in plain PyTorch. The input functions
return a list of argument tuples for `{name}`, one per case; `device` is where to allocate.
"""

import torch


def {name}_reference({args}):
    """{_reference_doc(name, returns)}"""
    raise NotImplementedError("{msg.format(fn=name + "_reference", what="a PyTorch reference for " + name)}")


def {name}_inputs(device="cuda"):
    """Benchmark cases at realistic shapes: a list of argument tuples for `{name}`."""
    raise NotImplementedError("{msg.format(fn=name + "_inputs", what="benchmark cases at realistic shapes")}")


def {name}_small_inputs(device="cpu"):
    """Tiny cases (a few hundred elements) for smoke tests and the CPU interpreter."""
    raise NotImplementedError("{msg.format(fn=name + "_small_inputs", what="tiny cases for the CPU interpreter")}")
'''


def plan(file: str | Path, kernel: str) -> Scaffold:
    """What `scaffold` would write, without writing it (the editor applies it as one edit)."""
    path = Path(file).resolve()
    try:
        find_task(path, kernel)
    except TaskError as exc:
        if exc.code != "no-harness":
            raise
    else:
        raise TaskError(f"{path.name}::{kernel} already has a harness", "exists")
    entry, args, returns = _entry_for(path, kernel)
    config = next((c for c in config_files(path) if c.name == "kernelbrain.toml"), None)
    created = config is None
    if config is None:
        config = path.parent / "kernelbrain.toml"
    else:
        load_tasks(config)  # refuse to append to a config that does not parse
    harness = path.with_name(f"{path.stem}_harness.py")
    if harness.exists():
        raise TaskError(
            f"{harness} already exists; remove it or point a [[tasks]] entry at it yourself",
            "exists",
        )
    root = config.parent
    rel_file = Path(os.path.relpath(path, root)).as_posix()
    rel_harness = Path(os.path.relpath(harness, root)).as_posix()
    block = (
        f'\n[[tasks]]\nfile = "{rel_file}"\nkernel = "{kernel}"\nentry = "{entry}"\n'
        f'reference = "{rel_harness}:{entry}_reference"\ninputs = "{rel_harness}:{entry}_inputs"\n'
        f'small_inputs = "{rel_harness}:{entry}_small_inputs"\n'
    )
    existing = (
        config.read_text(encoding="utf-8")
        if config.exists()
        else "# KernelBrain task harnesses (README: Task harness)\n"
    )
    return Scaffold(
        config,
        harness,
        entry,
        created,
        existing.rstrip("\n") + "\n" + block,
        _stub_source(rel_file, kernel, entry, args, harness.name, returns),
    )


def scaffold(file: str | Path, kernel: str) -> Scaffold:
    """Write the harness skeleton: the stub module and the config entry."""
    result = plan(file, kernel)
    result.harness.write_text(result.harness_text, encoding="utf-8")
    result.config.write_text(result.config_text, encoding="utf-8")
    return result
