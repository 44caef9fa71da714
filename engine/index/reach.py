"""Which functions of a module an entry reaches: the launchers real projects write.

An entry is whatever the harness calls by name: a function, a module-level alias of one
(`layer_norm = _layer_norm_fwd`), or an autograd.Function's `apply` (`layer_norm =
LayerNorm.apply`, whose body is `LayerNorm.forward`). From it, calls by name to module-level
functions, `Class.apply` and `Class.method`, and `self.`/`cls.` calls inside a class lead on to
every function whose launches the entry makes. Static and within the file: a call through a
variable or another module is not followed.
"""

from __future__ import annotations

import ast


def _classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def aliases(tree: ast.Module) -> dict[str, ast.expr]:
    """Module-level `name = <name or attribute>` assignments (the last one wins, as at run time)."""
    out: dict[str, ast.expr] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, (ast.Name, ast.Attribute))
        ):
            out[node.targets[0].id] = node.value
    return out


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next(
        (
            n
            for n in cls.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name
        ),
        None,
    )


def _bindings(tree: ast.Module) -> dict[str, ast.AST | None]:
    """What each module-level name is bound to last, as at run time: a def, the value of an
    alias (`name = <name or attribute>`), or None for anything else (`name = make()`)."""
    out: dict[str, ast.AST | None] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    aliased = isinstance(node, ast.Assign) and isinstance(
                        node.value, (ast.Name, ast.Attribute)
                    )
                    out[t.id] = node.value if aliased and len(targets) == 1 else None
    return out


def resolve(tree: ast.Module, name: str) -> tuple[str, ast.FunctionDef, bool] | None:
    """What calling module-level `name` runs, by its last binding: (qualified name, its def,
    whether its first parameter is bound: `ctx` of an autograd.Function's forward), or None
    when it is not a function the module defines."""
    bindings, classes = _bindings(tree), _classes(tree)
    seen: set[str] = set()
    while name in bindings and name not in seen:
        seen.add(name)
        bound = bindings[name]
        if isinstance(bound, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return name, bound, False  # type: ignore[return-value]
        if isinstance(bound, ast.Name):
            name = bound.id
            continue
        if isinstance(bound, ast.Attribute) and isinstance(bound.value, ast.Name):
            owner = classes.get(bound.value.id)
            if owner is not None and bindings.get(owner.name) is owner:
                method = "forward" if bound.attr == "apply" else bound.attr
                fn = _method(owner, method)
                if fn is not None:
                    return f"{owner.name}.{method}", fn, bound.attr == "apply"
        return None
    return None


def signature_of(tree: ast.Module, name: str) -> tuple[list[str], int] | None:
    """(parameter names, required count) of calling `name`, its bound `ctx` left out."""
    found = resolve(tree, name)
    if found is None:
        return None
    _, fn, bound = found
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    required = len(params) - len(fn.args.defaults)
    if bound and params:
        params, required = params[1:], max(0, required - 1)
    return params, required


def reachable(tree: ast.Module, entry: str) -> set[str]:
    """Qualified names (`f`, `Class.method`) of the module's functions that calling `entry`
    may run, the entry's own body included."""
    functions, classes = _functions(tree), _classes(tree)
    start = resolve(tree, entry)
    if start is None:
        return set()
    out: set[str] = set()
    todo = [start[0]]
    while todo:
        qual = todo.pop()
        if qual in out:
            continue
        owner_name, _, method = qual.rpartition(".")
        if owner_name:
            owner = classes.get(owner_name)
            fn = _method(owner, method) if owner is not None else None
        else:
            owner, fn = None, functions.get(qual)
        if fn is None:
            continue
        out.add(qual)
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Name):
                hit = resolve(tree, f.id)
                if hit is not None:
                    todo.append(hit[0])
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                base = f.value.id
                if base in ("self", "cls") and owner is not None:
                    todo.append(f"{owner.name}.{f.attr}")
                elif base in classes:
                    todo.append(f"{base}.{'forward' if f.attr == 'apply' else f.attr}")
    return out
