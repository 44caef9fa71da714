"""What a candidate reaches through module objects, past the gate's lists of names (gate part).

Why: the gate refuses attribute chains by name (`torch.hub`, `.sys`, `.builtins`) and follows
them through import aliases, which holds only while every chain starts at a name it knows. Two
ways around that, by class:
- an allowed standard module holding another module, or a refused builtin, under a name no list
  has (`enum.bltns` is `builtins`): the chain is resolved here, on the real standard modules
  (importing them runs nothing of the candidate's), and refused when a step is a module that is
  not allowed or a refused builtin;
- a module used as a value (`[torch][0].ops`, `m = torch if x else torch`, a module passed to a
  function) starts chains the gate cannot name: a module the candidate imports may only be the
  base of an attribute chain, as the original uses it.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import types
from collections.abc import Iterable

# The allowed imports that are the interpreter's own (their attributes are resolved here; torch
# and triton are not imported by the gate).
STANDARD = frozenset(
    {"math", "functools", "typing", "dataclasses", "itertools", "operator", "numbers", "enum"}
)


def _resolve(dotted: str) -> object | None:
    """The object a chain rooted at an allowed standard module names, stopping at the first
    module outside them; None when the root is not such a module or a step does not exist."""
    parts = dotted.split(".")
    if parts[0] not in STANDARD:
        return None
    value: object = importlib.import_module(parts[0])
    for part in parts[1:]:
        value = getattr(value, part, None)  # the interpreter's own objects: nothing runs
        if value is None:
            return None
        if type(value) is types.ModuleType and value.__name__ not in STANDARD:
            return value
    return value


def standard_escape(dotted: str | None, refused_builtins: Iterable[str]) -> str | None:
    """What `dotted` (an import or attribute chain, aliases resolved) reaches that the gate
    refuses by name: a module outside the allowed ones, or a refused builtin; else None."""
    if not dotted:
        return None
    value = _resolve(dotted)
    if value is None:
        return None
    if type(value) is types.ModuleType and value.__name__ not in STANDARD:
        return f"the module `{value.__name__}`"
    for name in refused_builtins:
        if value is getattr(builtins, name, object()):
            return f"the builtin `{name}`"
    return None


def imported_modules(tree: ast.Module) -> set[str]:
    """Names bound by `import x` / `import x.y as z`: each one is a module."""
    return {
        a.asname or a.name.split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, ast.Import)
        for a in n.names
    }


def modules_as_values(tree: ast.Module, original: ast.Module) -> list[ast.Name]:
    """Uses of an imported module's name that are not the base of an attribute chain (and not
    in the original as written): `[torch][0]`, `f(torch)`, `m = torch`."""
    modules, original_modules = imported_modules(tree), imported_modules(original)
    as_attribute_base = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    original_uses = {
        ast.dump(parent)
        for parent in ast.walk(original)
        for child in ast.iter_child_nodes(parent)
        if isinstance(child, ast.Name)
        and child.id in original_modules
        and not isinstance(parent, ast.Attribute)
    }
    found = []
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            if (
                isinstance(child, ast.Name)
                and isinstance(child.ctx, ast.Load)
                and child.id in modules
                and id(child) not in as_attribute_base
                and ast.dump(parent) not in original_uses
            ):
                found.append(child)
    return found
