"""The static half of the policy gate: what a candidate may not do, checked before it runs.

A first filter, not the wall: candidates run in the sandbox and are judged out of process
whatever this lets through (`sandbox.py`, `harness.py`). It rejects early, with a line number,
what an honest kernel never needs.

A candidate must keep the kernel's runtime parameters and the entry's signature, import only
what the original imports or an allow-list, and use none of: exec/eval/open/getattr-by-name and
the like (called or merely named, so `_ev = eval` is refused too); attribute chains or imports
that reach the interpreter, the operating system, serialisation or threads (`os`, `sys`,
`importlib`, `ctypes`, `pickle`, `marshal`, `subprocess`, `socket`, `threading`,
`multiprocessing`), private or dunder attributes, `torch.save/load`, `torch.hub`, `torch.utils`,
`.numpy()`; new code that runs at import (module statements, class bodies, decorators, default
values, annotations); calling the reference; state between calls (module-level, on functions,
on classes, on the arguments); hard-coding a case's shape into a launch; new float atomics;
`tl.inline_asm_elementwise`. Each of these is allowed where the original itself does it.
"""

from __future__ import annotations

import ast

import msgspec

from ..index import parse_module, reach
from ..task.spec import Task
from . import module_reach

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
# Methods Python calls while it makes a class (of a subclass, a descriptor set on one), that is
# at import time, and at garbage collection: a candidate adds none the original lacks.
CLASS_CREATION_HOOKS = {
    "__init_subclass__",
    "__set_name__",
    "__class_getitem__",
    "__mro_entries__",
    "__prepare__",
    "__del__",
}
# What evaluates a string as code: an annotation written as a string runs when these resolve it
# (`def f(v: "__import__('os')")` and `typing.get_type_hints(f)`).
EVALUATES_STRINGS = {
    "get_type_hints",
    "ForwardRef",
    "evaluate_forward_ref",
    "singledispatch",
    "singledispatchmethod",
    "make_dataclass",
}
# Builtins refused whenever they are named, not only when called (`_ev = eval; _ev(...)`).
FORBIDDEN_BUILTINS = (
    FORBIDDEN_CALLS
    | EVALUATES_STRINGS
    | {
        "getattr",
        "setattr",
        "hasattr",
        "attrgetter",
        "methodcaller",
        "help",
        "object",
        "type",
        "super",
    }
)
# Modules no kernel needs, reached by any attribute chain or import (`torch.sys`, `x.os`).
FORBIDDEN_MODULES = {
    "os",
    "sys",
    "importlib",
    "ctypes",
    "pickle",
    "marshal",
    "subprocess",
    "socket",
    "threading",
    "multiprocessing",
    "builtins",
    "shutil",
    "pathlib",
    "io",
    "signal",
    "inspect",
    "gc",
    "code",
    "runpy",
    "urllib",
    "http",
    "requests",
    "numpy",
}
# Dotted prefixes of torch and triton refused for a candidate (serialisation, downloads, dispatch
# tricks, native code).
FORBIDDEN_PREFIXES = (
    "torch.save",
    "torch.load",
    "torch.hub",
    "torch.from_file",
    "torch.utils",
    "torch.ops",
    "torch.library",
    "torch.serialization",
    "torch.multiprocessing",
    "torch.distributed",
    "torch.overrides",
    "torch.package",
    "torch.jit",
    "torch.compile",
    "torch.fx",
    # native code of the candidate's own: a C extension built and loaded through Triton's build
    # helpers (gcc + dlopen), a backend's module compiler, a library loaded into torch
    "torch.classes",
    "triton.runtime.build",
    "triton.backends",
)
# Reached as attributes of anything (`operator.attrgetter(...)`, `UntypedStorage.from_file`):
# getters by name give any attribute of any object, builtins included; a file mapped in.
FORBIDDEN_METHODS = EVALUATES_STRINGS | {
    # set attributes named by a string on any object (`functools.update_wrapper(tl.tensor, f,
    # assigned=("__truediv__",))` patched a class every later kernel of the runner uses)
    "update_wrapper",
    "wraps",
    "numpy",
    "tolist",
    "__setattr__",
    "data_ptr",
    "attrgetter",
    "methodcaller",
    "getattr",
    "setattr",
    "delattr",
    "from_file",
    "exec",
    "eval",
    "__import__",
}
INLINE_ASM = "inline_asm_elementwise"
# Private torch names an honest launcher uses (the host-sync mutators' device-side check).
ALLOWED_PRIVATE = {"_assert_async"}
HARMLESS_CALLS = {
    "Config",
    "constexpr",
    "dict",
    "tuple",
    "list",
    "range",
    "next_power_of_2",
    "cdiv",
}
# Decorators whose application runs nothing of the candidate's (by their last name).
KNOWN_DECORATORS = {"jit", "autotune", "heuristics", "staticmethod", "classmethod", "property"}
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
    # the rest of the mutating methods of lists, dicts, sets and deques
    "popitem",
    "remove",
    "discard",
    "sort",
    "reverse",
    "difference_update",
    "intersection_update",
    "symmetric_difference_update",
    "appendleft",
    "extendleft",
    "popleft",
    "rotate",
}
# `operator`'s in-place functions, and the mutators above called unbound (`dict.update(M, ...)`),
# change their first argument as a method call on it would.
MUTATING_FUNCTIONS = MUTATORS | {
    "setitem",
    "delitem",
    "iadd",
    "iand",
    "iconcat",
    "ifloordiv",
    "ilshift",
    "imatmul",
    "imod",
    "imul",
    "ior",
    "ipow",
    "irshift",
    "isub",
    "itruediv",
    "ixor",
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
    found = reach.resolve(tree, task.entry)  # a function, or an alias such as `f = Fn.apply`
    return found[1] if found is not None else None


def _module_names(tree: ast.Module) -> set[str]:
    """Every name bound at module level: what a function may not write into (state that
    survives between calls lives on module variables, functions, classes and modules)."""
    names = set()
    for n in tree.body:
        if isinstance(n, ast.Assign):
            names |= {t.id for t in n.targets if isinstance(t, ast.Name)}
        elif isinstance(n, (ast.AnnAssign, ast.AugAssign)) and isinstance(n.target, ast.Name):
            names.add(n.target.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in n.names}
    return names


def _parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    a = fn.args
    names = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    return names | {x.arg for x in (a.vararg, a.kwarg) if x is not None} - {"self"}


def _imported(tree: ast.Module) -> set[str]:
    """The names module-level imports bind."""
    names = set()
    for n in tree.body:
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in n.names}
    return names


def _module_variables(tree: ast.Module) -> set[str]:
    """The names module-level assignments bind: the module's data, where state lives."""
    names = set()
    for n in tree.body:
        if isinstance(n, ast.Assign):
            names |= {t.id for t in n.targets if isinstance(t, ast.Name)}
        elif isinstance(n, (ast.AnnAssign, ast.AugAssign)) and isinstance(n.target, ast.Name):
            names.add(n.target.id)
    return names


def _state_getters(tree: ast.Module, variables: set[str]) -> set[str]:
    """Top-level functions that return module data (`def _memo(): return _MEMO`), or what
    another such function returns: calling one hands out the module's state."""
    functions = {
        n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    getters: set[str] = set()
    grew = True
    while grew:
        grew = False
        for name, fn in functions.items():
            if name in getters:
                continue
            returns = [r.value for r in ast.walk(fn) if isinstance(r, ast.Return) and r.value]
            if any(_mentions_state(v, variables, getters) for v in returns):
                getters.add(name)
                grew = True
    return getters


def _mentions_state(expr: ast.AST, state: set[str], getters: set[str] = frozenset()) -> bool:
    """`expr` may evaluate to module data: it names some (`(_MEMO,)[0]`,
    `next(iter([_MEMO]))`, `_MEMO if c else None`) or calls a getter of it."""
    for n in ast.walk(expr):
        if isinstance(n, ast.Name) and n.id in state:
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in getters:
            return True
    return False


def _aliases_of(
    fn: ast.FunctionDef,
    names: set[str],
    variables: set[str] = frozenset(),
    getters=frozenset(),
    imported: set[str] = frozenset(),
) -> set[str]:
    """`names` and every local of `fn` bound to one of them or to an attribute chain from one
    (`t = torch`, `m = torch.nn`): writing through an alias writes the module itself; and
    every local bound to an expression that may evaluate to module data (`variables`, reached
    through a subscript, a container, a call or a getter: `memo = (_MEMO,)[0]`), except calls
    into imported libraries, which return new objects (`torch.empty(_SHAPE)`)."""
    out = set(names)
    data = set(variables)
    assigns = [n for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.NamedExpr))]
    grew = True
    while grew:
        grew = False
        for n in assigns:
            value = n.value
            follows = isinstance(value, (ast.Name, ast.Attribute)) and _root(value) in out
            library_call = isinstance(value, ast.Call) and _root(value.func) in imported
            if not follows and not library_call and _mentions_state(value, data, getters):
                follows = True
            if not follows:
                continue
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            for t in targets:
                for name in ast.walk(t):
                    if isinstance(name, ast.Name) and name.id not in out:
                        out.add(name.id)
                        data.add(name.id)
                        grew = True
    return out


MUTABLE_DEFAULTS = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)


def _immutable(value: ast.expr) -> bool:
    """A default that is one shared object no call can change: a constant, a name or an
    attribute (`torch.float16`), a negated constant, a tuple of those."""
    if isinstance(value, (ast.Constant, ast.Name, ast.Attribute)):
        return True
    if isinstance(value, ast.UnaryOp):
        return isinstance(value.operand, ast.Constant)
    return isinstance(value, ast.Tuple) and all(_immutable(e) for e in value.elts)


def _mutable_default(fn: ast.AST, orig_dump: str) -> Rejection | None:
    for default in fn.args.defaults + [d for d in fn.args.kw_defaults if d is not None]:
        # anything else may build a container (`[[]][0]`, `tuple([[]])`, `dict()`)
        mutable = isinstance(default, MUTABLE_DEFAULTS) or not _immutable(default)
        if mutable and ast.dump(default) not in orig_dump:
            return Rejection(
                "stateful",
                f"the default `{ast.unparse(default)}` is one object shared by every call: "
                "what a call puts in it survives to the next",
                default.lineno,
            )
    return None


def _cache_decorator(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, orig_dump: str
) -> Rejection | None:
    for deco in fn.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in CACHE_DECORATORS and ast.dump(deco) not in orig_dump:
            return Rejection(
                "stateful",
                f"`@{ast.unparse(deco)}` on `{fn.name}` caches results across calls",
                deco.lineno,
            )
    return None


def _state_write(
    fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda,
    n: ast.AST,
    module_names: set[str],
    orig_dump: str,
    data: set[str] = frozenset(),
) -> Rejection | None:
    """`n`, a node of `fn`, keeps state between calls: `global`, a write into module state or
    onto an argument, a mutating call on module state. `data`: the module's variables and the
    locals that may hold them (`_aliases_of`), reached through any expression too
    (`(_MEMO,)[0][k] = v`, `[_RING][0].append(out)`)."""
    name = getattr(fn, "name", "a lambda")
    if isinstance(n, (ast.Global, ast.Nonlocal)):
        return Rejection(
            "stateful", f"`{ast.unparse(n)}` in `{name}` keeps state between calls", n.lineno
        )
    if ast.dump(n) in orig_dump:
        return None
    why = (
        _call_keeps_state(fn, n, module_names, data)
        if isinstance(n, ast.Call)
        else _assignment_keeps_state(fn, n, module_names, data)
    )
    return Rejection("stateful", f"`{why[0]}` in `{name}` {why[1]}", n.lineno) if why else None


def _assignment_keeps_state(fn, n: ast.AST, module_names: set[str], data: set[str]):
    """(what, why) where an assignment writes module state or into an argument."""
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
        what = f"{ast.unparse(t)} = ..."
        module_write = "writes module-level state that survives between calls"
        if not isinstance(base, ast.Name):
            if t is not base and _mentions_state(base, data):
                return what, module_write
            continue
        if t is not base and (base.id in module_names or base.id == getattr(fn, "name", None)):
            return what, module_write
        if isinstance(t, ast.Subscript) and base.id in _parameters(fn):
            return what, (
                "writes into an argument's items: module state passed in would keep it "
                "between calls"
            )
        if isinstance(t, ast.Attribute) and base.id in _parameters(fn):
            return (
                what,
                "stores on an argument, where it survives to the next call with the same tensor",
            )
    return None


def _call_keeps_state(fn, n: ast.Call, module_names: set[str], data: set[str]):
    """(what, why) where a call mutates module state: a mutating method on it, or a mutating
    function given it first. An argument may be module state passed in (`_tick(_CALLS)`): it
    counts as module state."""
    callee = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
    shared = module_names | _parameters(fn)

    def is_state(e: ast.AST | None) -> bool:
        if isinstance(e, ast.Name):
            return e.id in shared
        return e is not None and _mentions_state(e, data)

    receiver = n.func.value if isinstance(n.func, ast.Attribute) else None
    first = n.args[0] if n.args else None
    if (callee in MUTATORS and is_state(receiver)) or (
        callee in MUTATING_FUNCTIONS and is_state(first)
    ):
        return ast.unparse(n), "mutates module-level state"
    return None


def _shared_defaults(tree: ast.Module, original: ast.Module) -> Rejection | None:
    """A default that may be a container shared by every call (checked after the import-time
    rule, which tells a default that runs code at import for what it is)."""
    orig_dump = ast.dump(original)
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            found = _mutable_default(fn, orig_dump)
            if found:
                return found
    return None


def _stateful(tree: ast.Module, original: ast.Module) -> Rejection | None:
    orig_dump = ast.dump(original)
    variables = _module_variables(tree)
    getters = _state_getters(tree, variables)
    imported = _imported(tree)
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if not isinstance(fn, ast.Lambda):
            found = _cache_decorator(fn, orig_dump)
            if found:
                return found
        module_names = _aliases_of(fn, _module_names(tree), variables, getters, imported)
        for n in ast.walk(fn):
            found = _state_write(fn, n, module_names, orig_dump, module_names - imported)
            if found:
                return found
    return None


def static_gate(task: Task, original_source: str, candidate_source: str) -> Rejection | None:
    """The first rule a candidate breaks, or None when it may run.

    Long because the gate's rules run in one order, and the first one broken is the answer.
    """
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

    reached = _reaches_outside(tree, original)
    if reached is not None:
        return reached
    passed = module_reach.modules_as_values(tree, original)
    if passed:
        return Rejection(
            "forbidden-attribute",
            f"the module `{passed[0].id}` is used as a value: a candidate may only reach into a "
            "module it imports (`module.name`), so that the gate can read where it reaches",
            passed[0].lineno,
        )
    stateful = _stateful(tree, original) or _string_annotations(tree, original)
    if stateful is not None:
        return stateful
    at_import = _runs_at_import(tree, original) or _shared_defaults(tree, original)
    if at_import is not None:
        return at_import

    # The reference is the ground truth: a candidate may not call it (or, for KernelBench, use Model).
    if task.reference_module == task.file or task.kind == "kernelbench":
        ref = task.reference
        for n in ast.walk(tree):
            if isinstance(n, ast.Name) and n.id == ref:
                return Rejection(
                    "calls-reference", f"candidate uses the reference `{ref}`", n.lineno
                )

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


def harness_gate(draft_source: str, stub_source: str, required: list[str]) -> Rejection | None:
    """The first rule a drafted harness module (an LLM's) breaks, or None when it may run in the
    judge: it parses, defines `required`, and reaches nothing outside (imports, calls and
    attributes) that the stub it replaces does not, nor runs code at import."""
    try:
        tree = ast.parse(draft_source)
    except SyntaxError as exc:
        return Rejection("syntax-error", f"the harness does not parse: {exc.msg}", exc.lineno)
    stub = ast.parse(stub_source)
    defined = _top_functions(tree)
    missing = [name for name in required if name not in defined]
    if missing:
        return Rejection("harness-incomplete", f"the harness does not define {', '.join(missing)}")
    return _reaches_outside(tree, stub) or _runs_at_import(tree, stub)


def _root(expr: ast.expr) -> str | None:
    """The name an expression's attribute chain starts from (`triton` of `triton.Config`)."""
    while isinstance(expr, (ast.Attribute, ast.Call, ast.Subscript)):
        expr = expr.func if isinstance(expr, ast.Call) else expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def _own_definitions(tree: ast.Module) -> set[str]:
    """Names the module binds itself (defs, classes, assignments), not by importing: a call or
    decorator reached through one runs the candidate's code, whatever it is called."""
    return _module_names(tree) - {
        (a.asname or a.name).split(".")[0]
        for n in tree.body
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
    }


def _harmless(value: ast.expr, kept=lambda n: False, own: frozenset | set = frozenset()) -> bool:
    """A value whose evaluation cannot do anything: literals, names, arithmetic,
    `triton.Config(...)` lists, lambdas (defined, not run: their bodies are not looked at), and
    parts for which `kept` holds (what the original already ran at import, unchanged). A call
    counts as harmless by its name only when that name is not one the module defines (`own`):
    a candidate's own `def Config(): ...` is its code."""
    stack = [value]
    while stack:
        n = stack.pop()
        if kept(n):
            continue
        if isinstance(n, ast.Lambda):
            stack.extend(n.args.defaults + [d for d in n.args.kw_defaults if d is not None])
            continue
        if isinstance(n, ast.Call):
            fn = n.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            if name not in HARMLESS_CALLS or _root(fn) in own:
                return False
        stack.extend(ast.iter_child_nodes(n))
    return True


def _dotted(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """`torch.hub.load` for an attribute chain on a name, through the file's import aliases."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(aliases.get(node.id, node.id))
    return ".".join(reversed(parts))


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local names bound to modules or attribute chains: imports and plain assignments."""
    out: dict[str, str] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
            for a in n.names:
                out[a.asname or a.name] = f"{n.module}.{a.name}"
    for _ in range(3):  # `t = torch; h = t.hub`: a few rounds of plain assignments
        for n in ast.walk(tree):
            if isinstance(n, ast.Assign) and isinstance(n.value, (ast.Name, ast.Attribute)):
                dotted = _dotted(n.value, out)
                for t in n.targets:
                    if isinstance(t, ast.Name) and dotted:
                        out[t.id] = dotted
    return out


def _forbidden_dotted(dotted: str | None) -> bool:
    if not dotted:
        return False
    parts = dotted.split(".")
    if any(p in FORBIDDEN_MODULES for p in parts[1:]) or parts[0] in FORBIDDEN_MODULES:
        return True
    return any(dotted == p or dotted.startswith(p + ".") for p in FORBIDDEN_PREFIXES)


def _reaches_outside(tree: ast.Module, original: ast.Module) -> Rejection | None:
    """Imports, names and attribute chains that reach past the kernel's business.

    Long because every route to builtins and modules (imports, names, chains) is one blocklist.
    """
    orig_names = {n.id for n in ast.walk(original) if isinstance(n, ast.Name)}
    orig_attrs = {n.attr for n in ast.walk(original) if isinstance(n, ast.Attribute)}
    orig_aliases = _aliases(original)
    orig_dotted = {
        _dotted(n, orig_aliases) for n in ast.walk(original) if isinstance(n, ast.Attribute)
    }
    orig_imports = {
        ast.dump(n) for n in ast.walk(original) if isinstance(n, ast.Import | ast.ImportFrom)
    }
    aliases = _aliases(tree)
    allowed = ALLOWED_IMPORTS | _imports(original)
    for n in ast.walk(tree):
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            if ast.dump(n) in orig_imports:
                continue  # the original's own import, relative ones included, as it wrote it
            if isinstance(n, ast.Import):
                mods = [a.name for a in n.names]
            else:
                base = n.module or "." * n.level
                mods = [f"{base}.{a.name}" for a in n.names] if n.level == 0 else [base]
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
                private = any(p.startswith("_") and p != "__future__" for p in m.split("."))
                escape = module_reach.standard_escape(m, FORBIDDEN_BUILTINS) or (
                    m.split(".")[-1] in FORBIDDEN_METHODS
                )
                if (_forbidden_dotted(m) or private or escape) and ast.dump(n) not in orig_imports:
                    return Rejection(
                        "forbidden-import",
                        f"`{ast.unparse(n)}` reaches outside the kernel's business",
                        n.lineno,
                    )
        elif (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id in FORBIDDEN_CALLS
            and n.func.id not in orig_names
        ):
            return Rejection(
                "forbidden-call", f"`{n.func.id}(...)` is not allowed in a candidate", n.lineno
            )
        elif isinstance(n, ast.Name) and n.id in FORBIDDEN_NAMES:
            return Rejection(
                "forbidden-attribute", f"`{n.id}` is not allowed in a candidate", n.lineno
            )
        elif isinstance(n, ast.Name) and n.id in FORBIDDEN_BUILTINS and n.id not in orig_names:
            return Rejection(
                "forbidden-call",
                f"`{n.id}` is not allowed in a candidate, called or not",
                n.lineno,
            )
        elif isinstance(n, ast.Attribute) and n.attr not in orig_attrs:
            if n.attr == INLINE_ASM:
                return Rejection(
                    "inline-asm",
                    f"`{ast.unparse(n)}`: inline assembly the original does not use",
                    n.lineno,
                )
            if (
                n.attr in FORBIDDEN_ATTRS
                or n.attr in FORBIDDEN_MODULES
                or n.attr in FORBIDDEN_METHODS
                or (n.attr.startswith("_") and n.attr not in ALLOWED_PRIVATE)
            ):
                return Rejection(
                    "forbidden-attribute",
                    f"`{ast.unparse(n)}` reaches outside the kernel's business "
                    f"(`.{n.attr}` is not allowed)",
                    n.lineno,
                )
            dotted = _dotted(n, aliases)
            if dotted in orig_dotted:
                continue
            escape = module_reach.standard_escape(dotted, FORBIDDEN_BUILTINS)
            if _forbidden_dotted(dotted) or escape:
                return Rejection(
                    "forbidden-attribute",
                    f"`{ast.unparse(n)}` is `{dotted}`"
                    + (f", {escape}" if escape else "")
                    + ", which a candidate may not use",
                    n.lineno,
                )
    return None


def _string_annotations(tree: ast.Module, original: ast.Module) -> Rejection | None:
    """An annotation holding a string is code `typing` evaluates, with the module's builtins,
    whenever something resolves the hints: refused where the original has none like it."""
    orig_nodes = {ast.dump(n) for n in ast.walk(original)}
    for n in ast.walk(tree):
        if isinstance(n, ast.arg) or isinstance(n, ast.AnnAssign):
            annotations = [n.annotation]
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            annotations = [n.returns]
        else:
            continue
        for annotation in annotations:
            if annotation is None or ast.dump(annotation) in orig_nodes:
                continue
            if any(
                isinstance(c, ast.Constant) and isinstance(c.value, str)
                for c in ast.walk(annotation)
            ):
                return Rejection(
                    "module-code",
                    f"the annotation `{ast.unparse(annotation)}` is a string, which `typing` "
                    "evaluates as code: write the type itself",
                    annotation.lineno,
                )
    return None


def _runs_at_import(tree: ast.Module, original: ast.Module) -> Rejection | None:
    """New code that would run when the module is imported: module statements, class bodies,
    decorators, default values and annotations must be definitions or harmless values.

    Long because each kind of import-time statement has its own harmless shapes.
    """
    orig_nodes = {ast.dump(n) for n in ast.walk(original)}
    own = _own_definitions(tree)
    lazy_annotations = any(
        isinstance(n, ast.ImportFrom) and n.module == "__future__" for n in tree.body
    )
    before = {n.name: ast.dump(n) for n in original.body if isinstance(n, ast.FunctionDef)}
    changed = {
        n.name
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and before.get(n.name) != ast.dump(n)
    }

    def kept(expr: ast.AST) -> bool:
        """Code the original ran at import, calling none of the module's functions the candidate
        changed (`configs=_configs() + [...]` with `_configs` as it was)."""
        return ast.dump(expr) in orig_nodes and not any(
            isinstance(c, ast.Call) and getattr(c.func, "id", None) in changed
            for c in ast.walk(expr)
        )

    def fine(expr: ast.expr | None) -> bool:
        return expr is None or kept(expr) or _harmless(expr, own=own)

    def decorator_fine(deco: ast.expr) -> bool:
        if kept(deco):
            return True
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name not in KNOWN_DECORATORS or _root(target) in own:
            return False
        return not isinstance(deco, ast.Call) or all(
            _harmless(a, kept, own) for a in deco.args + [k.value for k in deco.keywords]
        )

    def definition(node, where: str) -> Rejection | None:
        for deco in node.decorator_list:
            if not decorator_fine(deco):
                return Rejection(
                    "module-code",
                    f"decorator `@{ast.unparse(deco)}` on `{node.name}` runs at import time",
                    deco.lineno,
                )
        if isinstance(node, ast.ClassDef):
            for base in node.bases + [k.value for k in node.keywords]:
                if not fine(base):
                    return Rejection(
                        "module-code",
                        f"class `{node.name}`'s base `{ast.unparse(base)}` runs at import time",
                        node.lineno,
                    )
            for keyword in node.keywords:  # `metaclass=f` calls f at import, as does any
                if ast.dump(keyword) not in orig_nodes:  # keyword through `__init_subclass__`
                    return Rejection(
                        "module-code",
                        f"class `{node.name}`'s `{ast.unparse(keyword)}` runs at import time",
                        node.lineno,
                    )
            for stmt in node.body:  # hooks Python calls while it makes a class, def'd or bound
                names = [getattr(stmt, "name", None)] + [
                    t.id
                    for t in getattr(stmt, "targets", [getattr(stmt, "target", None)])
                    if isinstance(t, ast.Name)
                ]
                hook = next((n for n in names if n in CLASS_CREATION_HOOKS), None)
                if hook is not None and ast.dump(stmt) not in orig_nodes:
                    return Rejection(
                        "module-code",
                        f"`{node.name}.{hook}` runs when a class is made, at import time",
                        stmt.lineno,
                    )
            for stmt in node.body:
                found = statement(stmt, f"class `{node.name}`")
                if found is not None:
                    return found
            return None
        a = node.args
        values = a.defaults + [d for d in a.kw_defaults if d is not None]
        if not lazy_annotations:
            values += [x.annotation for x in a.posonlyargs + a.args + a.kwonlyargs if x.annotation]
            values += [node.returns] if node.returns else []
        for value in values:
            if not fine(value):
                return Rejection(
                    "module-code",
                    f"`{ast.unparse(value)}` in the signature of `{node.name}` runs at import time",
                    value.lineno,
                )
        return None

    def statement(stmt, where: str) -> Rejection | None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return definition(stmt, where)
        if kept(stmt) or isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Pass)):
            return None
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if _harmless(stmt.value, own=own) and all(isinstance(t, ast.Name) for t in targets):
                return None  # `torch.allclose = ...` patches a module: never harmless
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            return None
        return Rejection(
            "module-code",
            f"new statement `{ast.unparse(stmt).splitlines()[0]}` in {where} would run at "
            "import time",
            stmt.lineno,
        )

    for stmt in tree.body:
        found = statement(stmt, "the module")
        if found is not None:
            return found
    return None


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
