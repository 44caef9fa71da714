"""The static half of the policy gate: what a candidate may not do, checked before it runs.

A candidate must keep the kernel's runtime parameters and the entry's signature, import only
what the original imports or an allow-list, use no exec/eval/open/os/subprocess/network, not
call the reference, carry no state between calls, not hard-code a case's shape into a launch,
and not introduce float atomics. The run-time half (NaN-poisoned outputs, the audit of PyTorch
compute, fresh inputs per stage) lives in `audit.py` and `harness.py`, inside workers.
"""

from __future__ import annotations

import ast

import msgspec

from ..index import parse_module
from ..task.spec import Task

ALLOWED_IMPORTS = {
    "torch",
    "triton",
    "math",
    "functools",
    "typing",
    "typing_extensions",
    "dataclasses",
    "itertools",
    "operator",
    "numbers",
    "enum",
    "__future__",
}
FORBIDDEN_CALLS = {
    "exec",
    "eval",
    "compile",
    "open",
    "__import__",
    "input",
    "breakpoint",
    "globals",
    "locals",
    "vars",
    "delattr",
    "exit",
    "quit",
    "memoryview",
}
FORBIDDEN_ATTRS = {
    "__dict__",
    "__globals__",
    "__builtins__",
    "__code__",
    "__subclasses__",
    "__bases__",
    "__mro__",
    "__getattribute__",
    "__reduce__",
    "os",
    "sys",
    "subprocess",
    "ctypes",
    "socket",
    "builtins",
    "importlib",
    "_exit",
    "system",
    "popen",
    "environ",
    "spawn",
    "fork",
    "urlopen",
}
FORBIDDEN_NAMES = {"__builtins__", "__loader__", "__spec__"}
MUTATORS = {
    "append",
    "extend",
    "update",
    "setdefault",
    "insert",
    "add",
    "__setitem__",
    "pop",
    "clear",
}
CACHE_DECORATORS = {"cache", "lru_cache", "cached_property"}


class Rejection(msgspec.Struct, frozen=True):
    reason: str  # machine-readable, e.g. "forbidden-import"
    message: str  # for humans: what was found and why it is refused
    line: int | None = None  # 1-based, in the candidate


def _imports(tree: ast.Module) -> set[str]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            out |= {a.name.split(".")[0] for a in n.names}
        elif isinstance(n, ast.ImportFrom):
            out.add((n.module or "").split(".")[0] if n.level == 0 else ".")
    return out


def _top_functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def _args_sig(fn: ast.FunctionDef) -> str:
    a = fn.args
    return ast.dump(
        ast.arguments(
            posonlyargs=[ast.arg(x.arg) for x in a.posonlyargs],
            args=[ast.arg(x.arg) for x in a.args],
            vararg=ast.arg(a.vararg.arg) if a.vararg else None,
            kwonlyargs=[ast.arg(x.arg) for x in a.kwonlyargs],
            kw_defaults=a.kw_defaults,
            kwarg=ast.arg(a.kwarg.arg) if a.kwarg else None,
            defaults=a.defaults,
        )
    )


def _entry_function(tree: ast.Module, task: Task) -> ast.FunctionDef | None:
    if task.kind == "kernelbench":
        cls = next(
            (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == task.entry), None
        )
        return (
            next(
                (f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "forward"),
                None,
            )
            if cls
            else None
        )
    return _top_functions(tree).get(task.entry)


def _module_names(tree: ast.Module) -> set[str]:
    names = set()
    for n in tree.body:
        if isinstance(n, ast.Assign):
            names |= {t.id for t in n.targets if isinstance(t, ast.Name)}
        elif isinstance(n, (ast.AnnAssign, ast.AugAssign)) and isinstance(n.target, ast.Name):
            names.add(n.target.id)
    return names


def _stateful(tree: ast.Module, original: ast.Module) -> Rejection | None:
    module_names = _module_names(tree)
    orig_dump = ast.dump(original)
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for deco in fn.decorator_list:
            target = deco.func if isinstance(deco, ast.Call) else deco
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if name in CACHE_DECORATORS and ast.dump(deco) not in orig_dump:
                return Rejection(
                    "stateful",
                    f"`@{ast.unparse(deco)}` on `{fn.name}` caches results across calls",
                    deco.lineno,
                )
        for n in ast.walk(fn):
            if isinstance(n, (ast.Global, ast.Nonlocal)):
                return Rejection(
                    "stateful",
                    f"`{ast.unparse(n)}` in `{fn.name}` keeps state between calls",
                    n.lineno,
                )
            targets = (
                n.targets
                if isinstance(n, ast.Assign)
                else [n.target]
                if isinstance(n, (ast.AugAssign, ast.AnnAssign))
                else []
            )
            for t in targets:
                base = t
                while isinstance(base, (ast.Subscript, ast.Attribute)):
                    base = base.value
                if (
                    t is not base
                    and isinstance(base, ast.Name)
                    and (base.id in module_names or base.id == fn.name)
                ):
                    return Rejection(
                        "stateful",
                        f"`{ast.unparse(t)} = ...` in `{fn.name}` writes module-level state "
                        "that survives between calls",
                        n.lineno,
                    )
            if (
                isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute)
                and n.func.attr in MUTATORS
                and isinstance(n.func.value, ast.Name)
                and n.func.value.id in module_names
            ):
                return Rejection(
                    "stateful",
                    f"`{ast.unparse(n)}` in `{fn.name}` mutates module-level state",
                    n.lineno,
                )
    return None


def static_gate(task: Task, original_source: str, candidate_source: str) -> Rejection | None:
    """The first rule a candidate breaks, or None when it may run."""
    try:
        tree = ast.parse(candidate_source)
    except SyntaxError as exc:
        return Rejection("syntax-error", f"candidate does not parse: {exc.msg}", exc.lineno)
    original = ast.parse(original_source)
    cand_index = parse_module(candidate_source).index
    orig_index = parse_module(original_source).index

    kernel = cand_index.kernel(task.kernel)
    orig_kernel = orig_index.kernel(task.kernel)
    if kernel is None:
        return Rejection("kernel-missing", f"candidate has no Triton kernel `{task.kernel}`")
    runtime = [p.name for p in kernel.params if not p.constexpr]
    orig_runtime = (
        [p.name for p in orig_kernel.params if not p.constexpr] if orig_kernel else runtime
    )
    if runtime != orig_runtime:
        return Rejection(
            "signature-changed",
            f"kernel `{task.kernel}` runtime parameters changed from "
            f"({', '.join(orig_runtime)}) to ({', '.join(runtime)})",
            kernel.span.line + 1,
        )
    entry, orig_entry = _entry_function(tree, task), _entry_function(original, task)
    if entry is None:
        return Rejection("signature-changed", f"candidate has no entry `{task.entry}`")
    if orig_entry is not None and _args_sig(entry) != _args_sig(orig_entry):
        return Rejection(
            "signature-changed",
            f"entry `{task.entry}` signature changed from "
            f"({ast.unparse(orig_entry.args)}) to ({ast.unparse(entry.args)})",
            entry.lineno,
        )

    allowed = ALLOWED_IMPORTS | _imports(original)
    for n in ast.walk(tree):
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            mods = (
                [a.name for a in n.names]
                if isinstance(n, ast.Import)
                else [n.module or "." * n.level]
            )
            for m in mods:
                root = m.split(".")[0] if not m.startswith(".") else "."
                if root not in allowed:
                    return Rejection(
                        "forbidden-import",
                        f"`import {m}`: candidates may import only "
                        f"{', '.join(sorted(ALLOWED_IMPORTS - {'__future__'}))} "
                        "and what the original imports",
                        n.lineno,
                    )
        elif (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id in FORBIDDEN_CALLS
        ):
            return Rejection(
                "forbidden-call", f"`{n.func.id}(...)` is not allowed in a candidate", n.lineno
            )
        elif isinstance(n, ast.Attribute) and n.attr in FORBIDDEN_ATTRS:
            return Rejection(
                "forbidden-attribute",
                f"`{ast.unparse(n)}` reaches outside the kernel's business "
                f"(`.{n.attr}` is not allowed)",
                n.lineno,
            )
        elif isinstance(n, ast.Name) and n.id in FORBIDDEN_NAMES:
            return Rejection(
                "forbidden-attribute", f"`{n.id}` is not allowed in a candidate", n.lineno
            )

    # New module-level statements run at import time: only definitions, imports and constants.
    orig_top = {ast.dump(s) for s in original.body}
    for s in tree.body:
        if ast.dump(s) in orig_top or isinstance(
            s, (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)
        ):
            continue
        if (
            isinstance(s, (ast.Assign, ast.AnnAssign))
            and s.value is not None
            and _harmless(s.value)
        ):
            continue
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
            continue
        return Rejection(
            "module-code",
            f"new module-level statement `{ast.unparse(s).splitlines()[0]}` would run at "
            "import time",
            s.lineno,
        )

    # The reference is the ground truth: a candidate may not call it (or, for KernelBench, use Model).
    if task.reference_module == task.file or task.kind == "kernelbench":
        ref = task.reference
        for n in ast.walk(tree):
            if isinstance(n, ast.Name) and n.id == ref:
                return Rejection(
                    "calls-reference", f"candidate uses the reference `{ref}`", n.lineno
                )

    stateful = _stateful(tree, original)
    if stateful is not None:
        return stateful

    # A runtime argument hard-coded to a literal where the original computed it.
    cand_sites = kernel.launch_sites
    orig_sites = orig_kernel.launch_sites if orig_kernel else []
    constexprs = set(kernel.constexprs)
    names = [p.name for p in kernel.params]
    for site in cand_sites:
        for i, arg in enumerate(site.args[: len(names)]):
            pname = names[i]
            if pname in constexprs or not _is_int_literal(arg):
                continue
            if not any(i < len(o.args) and _is_int_literal(o.args[i]) for o in orig_sites):
                return Rejection(
                    "hard-coded-shape",
                    f"launch passes `{pname}={arg}`, a constant where the original "
                    "computed it from the inputs: that only holds for one shape",
                    site.span.line + 1,
                )

    added = _atomic_adds(tree)
    if added and not _atomic_adds(original):
        return Rejection(
            "nondeterministic-atomics",
            "candidate adds `tl.atomic_add` where the original has none: "
            "float accumulation order would change from run to run",
            added[0],
        )
    return None


def _harmless(value: ast.expr) -> bool:
    """A module-level value whose evaluation cannot do anything: literals, names, arithmetic,
    `triton.Config(...)` lists, lambdas (defined, not run)."""
    for n in ast.walk(value):
        if isinstance(n, ast.Lambda):
            continue
        if isinstance(n, ast.Call):
            fn = n.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name not in ("Config", "constexpr", "dict", "tuple", "list", "range"):
                return False
    return True


def _atomic_adds(tree: ast.Module) -> list[int]:
    """Lines of `atomic_add` calls whose value is not an integer literal (order-dependent sums)."""
    lines = []
    for n in ast.walk(tree):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "atomic_add"
        ):
            val = (
                n.args[1]
                if len(n.args) > 1
                else next((k.value for k in n.keywords if k.arg == "val"), None)
            )
            if not (isinstance(val, ast.Constant) and isinstance(val.value, int)):
                lines.append(n.lineno)
    return lines


def _is_int_literal(text: str) -> bool:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return False
    return isinstance(value, int) and not isinstance(value, bool) and value > 1
