"""Find and statically validate the harness of a kernel.

Looks for `kernelbrain.toml` (`[[tasks]]`) or `pyproject.toml` (`[[tool.kernelbrain.tasks]]`)
in the kernel file's folder and its parents, or recognises a KernelBench-style task file.
Every missing or wrong piece raises `TaskError` with a message that says what to write.
Pure `ast` and TOML: no torch, no triton, nothing of the user's is executed.
"""

from __future__ import annotations

import ast
import difflib
import re
import tomllib
from pathlib import Path
from typing import Iterator

import msgspec

from ..index import parse_module, reach
from .spec import Task, TaskError, TaskSpec

CONFIG_NAMES = ("kernelbrain.toml", "pyproject.toml")
KERNELBENCH_NAMES = ("Model", "ModelNew", "get_inputs", "get_init_inputs")


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def config_files(start: Path) -> Iterator[Path]:
    """Config files from `start`'s folder upwards, nearest first; stops above a VCS root."""
    folder = start if start.is_dir() else start.parent
    for d in [folder, *folder.parents]:
        for name in CONFIG_NAMES:
            if (d / name).is_file():
                yield d / name
        if (d / ".git").exists() or (d / ".hg").exists():
            return


def load_tasks(config: Path) -> list[TaskSpec]:
    """The task tables of one config file (empty when it declares none)."""
    try:
        data = tomllib.loads(config.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"{_rel(config)}: cannot read: {exc}", "config") from exc
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(f"{_rel(config)}: invalid TOML: {exc}", "config") from exc
    if config.name == "pyproject.toml":
        raw = data.get("tool", {}).get("kernelbrain", {}).get("tasks", [])
        where = "[[tool.kernelbrain.tasks]]"
    else:
        raw = data.get("tasks", [])
        where = "[[tasks]]"
    if not isinstance(raw, list):
        raise TaskError(f"{_rel(config)}: {where} must be an array of tables", "config")
    specs = []
    for i, table in enumerate(raw):
        if not isinstance(table, dict):
            raise TaskError(f"{_rel(config)}: {where} entry {i + 1} is not a table", "config")
        unknown = sorted(set(table) - set(TaskSpec.__struct_fields__))
        if unknown:
            key = unknown[0]
            near = difflib.get_close_matches(key, TaskSpec.__struct_fields__, n=1, cutoff=0.6)
            hint = f"; did you mean `{near[0]}`?" if near else ""
            raise TaskError(
                f"{_rel(config)}:{_key_line(config, where, i, key)}: {where} entry {i + 1}: "
                f"unknown field `{key}`{hint} (the fields are: "
                f"{', '.join(TaskSpec.__struct_fields__)})",
                "config",
            )
        try:
            specs.append(msgspec.convert(table, TaskSpec))
        except msgspec.ValidationError as exc:
            field = re.search(r"at `\$\.(\w+)", str(exc))
            line = _key_line(config, where, i, field.group(1)) if field else None
            place = f":{line}" if line else ""
            raise TaskError(
                f"{_rel(config)}{place}: {where} entry {i + 1}: {exc}", "config"
            ) from exc
    return specs


def _key_line(config: Path, header: str, index: int, key: str) -> int | None:
    """The 1-based line of `key = ...` in the `index`-th `header` table of `config`."""
    seen = -1
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for n, line in enumerate(config.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip().replace(" ", "") == header:
            seen += 1
        elif seen == index and pattern.match(line):
            return n
    return None


_SPEC_CACHE: dict[Path, tuple[float, list[TaskSpec]]] = {}


def _cached_specs(config: Path) -> list[TaskSpec]:
    """A config's tasks, re-read only when the file changes (broken configs read as none)."""
    try:
        mtime = config.stat().st_mtime
    except OSError:
        return []
    hit = _SPEC_CACHE.get(config)
    if hit is None or hit[0] != mtime:
        try:
            specs = load_tasks(config)
        except TaskError:
            specs = []
        _SPEC_CACHE[config] = hit = (mtime, specs)
    return hit[1]


def harness_config(file: str | Path, kernel: str, source: str | None = None) -> Path | None:
    """The config declaring a task for `file::kernel` (or the file itself for a KernelBench
    task), without parsing the file: cheap enough for the editor to ask on every analysis."""
    path = Path(file).resolve()
    for config in config_files(path):
        if any(
            (config.parent / s.file).resolve() == path and s.kernel == kernel
            for s in _cached_specs(config)
        ):
            return config
    if source is not None and all(
        f"{kw} {name}" in source
        for kw, name in (
            ("class", "Model"),
            ("class", "ModelNew"),
            ("def", "get_inputs"),
            ("def", "get_init_inputs"),
        )
    ):
        return path
    return None


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def _classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _signature(fn: ast.FunctionDef, drop_self: bool = False) -> tuple[list[str], int]:
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    if drop_self and params and params[0] == "self":
        params = params[1:]
    required = len(params) - len(fn.args.defaults)
    return params, required


def _parse_file(path: Path) -> ast.Module:
    if not path.is_file():
        raise TaskError(f"file not found: {_rel(path)}", "file-not-found")
    try:
        return ast.parse(path.read_text(encoding="utf-8"), str(path))
    except SyntaxError as exc:
        raise TaskError(
            f"{_rel(path)}:{exc.lineno}: syntax error: {exc.msg}", "syntax-error"
        ) from exc
    except (UnicodeDecodeError, ValueError) as exc:
        raise TaskError(
            f"{_rel(path)}: cannot read as Python source: {exc}", "syntax-error"
        ) from exc


def _resolve_ref(ref: str, file: Path, root: Path) -> tuple[Path, str]:
    """`name` (in the kernel's file) or `module:name` (a path or dotted module from the config's folder)."""
    if ":" not in ref:
        return file, ref
    module, name = ref.rsplit(":", 1)
    candidates = [root / module, root / (module.replace(".", "/") + ".py"), file.parent / module]
    for c in candidates:
        if c.suffix == ".py" and c.is_file():
            return c.resolve(), name
    raise TaskError(
        f"module `{module}` of `{ref}` not found (looked for {', '.join(_rel(c) for c in candidates[:2])})",
        "reference-not-found",
    )


def entries_launching(tree: ast.Module, launchers: list[str]) -> list[str]:
    """The module-level callables (functions and aliases such as `f = Fn.apply`) whose calls
    reach a launch of the kernel, leaving out those another of them reaches (helpers)."""
    names = sorted(set(_functions(tree)) | set(reach.aliases(tree)))
    reached = {n: reach.reachable(tree, n) for n in names}
    launching = [n for n in names if reached[n] & set(launchers)]
    return [
        n
        for n in launching
        if not any(reach.resolve(tree, n)[0] in reached[o] for o in launching if o != n)
    ]


def _require_function(path: Path, name: str, role: str) -> ast.FunctionDef:
    fns = _functions(_parse_file(path))
    if name not in fns:
        near = ", ".join(sorted(fns)) or "none"
        raise TaskError(
            f"{role} `{name}` not found in {_rel(path)} (top-level functions there: {near})",
            f"{role.replace(' ', '-')}-not-found",
        )
    return fns[name]


def is_kernelbench(tree: ast.Module) -> bool:
    names = set(_functions(tree)) | set(_classes(tree))
    return all(n in names for n in KERNELBENCH_NAMES)


def find_task(file: str | Path, kernel: str | None = None) -> Task:
    """The validated harness of `file::kernel` (kernel may be omitted when the file has one)."""
    path = Path(file).resolve()
    tree = _parse_file(path)
    index = parse_module(path.read_text(encoding="utf-8"), str(path)).index
    if kernel is not None:
        _check_kernel(index, kernel, path)
    for config in config_files(path):
        specs = load_tasks(config)
        matches = [
            s
            for s in specs
            if (config.parent / s.file).resolve() == path and (kernel is None or s.kernel == kernel)
        ]
        if len(matches) > 1 and kernel is None:
            names = ", ".join(s.kernel for s in matches)
            raise TaskError(
                f"{_rel(path)} has several harnessed kernels ({names}): say which with FILE::KERNEL",
                "ambiguous",
            )
        if matches:
            return _validate(matches[0], path, tree, index, config)
    if is_kernelbench(tree):
        return _kernelbench_task(path, tree, index, kernel)
    target = f"{_rel(path)}::{kernel}" if kernel else _rel(path)
    raise TaskError(
        f"no harness for {target}: add a [[tasks]] entry (file, kernel, entry, reference, inputs) to a "
        f"kernelbrain.toml beside it, or run `kernelbrain init {target}` to scaffold one",
        "no-harness",
    )


def _check_kernel(index, name: str, path: Path) -> None:
    if index.kernel(name) is None:
        found = ", ".join(k.name for k in index.kernels) or "none"
        raise TaskError(
            f"kernel `{name}` not found in {_rel(path)} (Triton kernels there: {found})",
            "kernel-not-found",
        )


def _validate(spec: TaskSpec, path: Path, tree: ast.Module, index, config: Path) -> Task:
    root = config.parent.resolve()
    _check_kernel(index, spec.kernel, path)
    entry = spec.entry
    if entry is None:
        top = entries_launching(tree, index.kernel(spec.kernel).launchers)
        if len(top) != 1:
            why = (
                "nothing callable at module level launches it"
                if not top
                else f"{len(top)} module-level callables launch it ({', '.join(top)})"
            )
            raise TaskError(
                f'entry omitted for `{spec.kernel}` and {why}: set `entry = "..."` in {_rel(config)}',
                "entry-not-found",
            )
        entry = top[0]
    e_sig = reach.signature_of(tree, entry)
    if e_sig is None:
        callables = sorted(set(_functions(tree)) | set(reach.aliases(tree))) or ["none"]
        raise TaskError(
            f"entry `{entry}` not found in {_rel(path)} (a function, or an alias such as "
            f"`{entry} = MyFunction.apply`; module-level callables there: {', '.join(callables)})",
            "entry-not-found",
        )
    if spec.reference is None:
        raise TaskError(
            f"{_rel(config)}: task for `{spec.kernel}` has no `reference` (a PyTorch function with the entry's signature)",
            "reference-not-found",
        )
    if spec.inputs is None:
        raise TaskError(
            f"{_rel(config)}: task for `{spec.kernel}` has no `inputs` (a function returning a list of argument tuples)",
            "inputs-not-found",
        )
    ref_path, ref_name = _resolve_ref(spec.reference, path, root)
    ref_fn = _require_function(ref_path, ref_name, "reference")
    (e_params, e_req), (r_params, r_req) = e_sig, _signature(ref_fn)
    if len(e_params) != len(r_params) or e_req != r_req:
        raise TaskError(
            f"reference `{ref_name}({', '.join(r_params)})` does not take the same arguments as entry "
            f"`{entry}({', '.join(e_params)})`: the engine calls both with each input tuple",
            "signature-mismatch",
        )
    for name in spec.outputs or ():
        if name != "return" and name not in e_params:
            raise TaskError(
                f"{_rel(config)}: task for `{spec.kernel}` names `{name}` in `outputs`, which is "
                f'not an argument of `{entry}({", ".join(e_params)})` ("return" stands for '
                "its returned value)",
                "outputs-not-arguments",
            )
    in_path, in_name = _resolve_ref(spec.inputs, path, root)
    _require_function(in_path, in_name, "inputs")
    small = None
    if spec.small_inputs is not None:
        s_path, s_name = _resolve_ref(spec.small_inputs, path, root)
        _require_function(s_path, s_name, "small inputs")
        small = f"{s_path}:{s_name}"
    return Task(
        kind="config",
        file=str(path),
        kernel=spec.kernel,
        entry=entry,
        reference_module=str(ref_path),
        reference=ref_name,
        inputs=f"{in_path}:{in_name}",
        small_inputs=small,
        rtol=spec.rtol,
        atol=spec.atol,
        device=spec.device,
        shapes=spec.shapes,
        config=str(config),
        root=str(root),
        outputs=spec.outputs,
    )


def _kernelbench_task(path: Path, tree: ast.Module, index, kernel: str | None) -> Task:
    launchable = [k.name for k in index.launchable]
    if kernel is None:
        if len(launchable) != 1:
            raise TaskError(
                f"{_rel(path)} is a KernelBench task with {len(launchable)} kernels ({', '.join(launchable)}): "
                "say which with FILE::KERNEL",
                "ambiguous",
            )
        kernel = launchable[0]
    _check_kernel(index, kernel, path)
    classes = _classes(tree)
    fwd = {
        c: next(
            (f for f in classes[c].body if isinstance(f, ast.FunctionDef) and f.name == "forward"),
            None,
        )
        for c in ("Model", "ModelNew")
    }
    for c, f in fwd.items():
        if f is None:
            raise TaskError(
                f"KernelBench task {_rel(path)}: class `{c}` has no `forward`", "entry-not-found"
            )
    if len(_signature(fwd["Model"], True)[0]) != len(_signature(fwd["ModelNew"], True)[0]):
        raise TaskError(
            f"KernelBench task {_rel(path)}: `ModelNew.forward` and `Model.forward` take different arguments",
            "signature-mismatch",
        )
    return Task(
        kind="kernelbench",
        file=str(path),
        kernel=kernel,
        entry="ModelNew",
        reference_module=str(path),
        reference="Model",
        inputs=f"{path}:get_inputs",
        small_inputs=None,
        root=str(path.parent),
    )


def split_target(target: str) -> tuple[Path, str | None]:
    """`ops/x.py::kernel` -> (path, kernel); `ops/x.py` -> (path, None). `ops/x.py:kernel`
    (one colon, as in `module:function` elsewhere) is a usage error that says what was meant,
    not a missing file."""
    if "::" in target:
        file, kernel = target.split("::", 1)
        return Path(file), kernel or None
    file, colon, name = target.rpartition(":")
    if colon and file.endswith(".py") and name.isidentifier() and not Path(target).exists():
        raise TaskError(f"{target}: a kernel is named after two colons: {file}::{name}", "usage")
    return Path(target), None
