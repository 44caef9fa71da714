"""Rewrites on kernel bodies: de-looping single-iteration loops and removing repeated loads.

Value numbering over straight-line statements: each assignment gets a key (its expression with
names replaced by their current keys, loads stamped with a memory epoch that every store or
atomic advances). An assignment whose value a variable already holds is dropped; this removes
a row re-read once the passes over it sit in one block.
"""

from __future__ import annotations

import ast
import copy
import itertools

_counter = itertools.count()


class _Keyer(ast.NodeTransformer):
    def __init__(self, env: dict[str, str]):
        self.env = env

    def visit_Name(self, node: ast.Name):
        return ast.Name(id=self.env.get(node.id, node.id), ctx=node.ctx)


def _key(expr: ast.expr, env: dict[str, str], epoch: int) -> str:
    text = ast.unparse(_Keyer(env).visit(copy.deepcopy(expr)))
    return f"{text}@{epoch}" if "load(" in text else text


def _assigned(stmt: ast.stmt) -> set[str]:
    out = set()
    for n in ast.walk(stmt):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
    return out


def _writes_memory(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and (n.func.attr == "store" or n.func.attr.startswith("atomic_"))
        ):
            return True
    return False


def remove_repeated_values(body: list[ast.stmt]) -> tuple[list[ast.stmt], int]:
    """Drop `x = <expr>` statements whose value `x` already holds; returns (body, loads removed)."""
    env: dict[str, str] = {}
    epoch = 0
    out: list[ast.stmt] = []
    removed = 0
    for stmt in body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
        ):
            name = stmt.targets[0].id
            key = _key(stmt.value, env, epoch)
            if env.get(name) == key:
                removed += "load(" in key
                continue
            if _writes_memory(stmt.value):
                epoch += 1
            out.append(stmt)
            env[name] = key if name not in _names(stmt.value) else f"{key}#{next(_counter)}"
            continue
        if _writes_memory(stmt):
            epoch += 1
        for name in _assigned(
            stmt
        ):  # anything else (augmented, branches, loops) gets a fresh value
            env[name] = f"{name}#{next(_counter)}"
        out.append(stmt)
    return out, removed


def _names(expr: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}


def row_loops(fn: ast.FunctionDef, constexprs: set[str], runtime: set[str]) -> list[ast.For]:
    """Top-level `for v in range(0, N, B)` loops, N a runtime parameter, B a constexpr."""
    loops = []
    for stmt in fn.body:
        if (
            isinstance(stmt, ast.For)
            and isinstance(stmt.target, ast.Name)
            and isinstance(stmt.iter, ast.Call)
            and isinstance(stmt.iter.func, ast.Name)
            and stmt.iter.func.id in ("range", "tl.range")
            and len(stmt.iter.args) == 3
            and not stmt.orelse
        ):
            start, stop, step = stmt.iter.args
            if (
                isinstance(start, ast.Constant)
                and start.value == 0
                and isinstance(stop, ast.Name)
                and stop.id in runtime
                and isinstance(step, ast.Name)
                and step.id in constexprs
            ):
                loops.append(stmt)
    return loops


def deloop(body: list[ast.stmt], loops: list[ast.For]) -> list[ast.stmt]:
    """Each given loop replaced by `v = 0` and its body (valid when it runs exactly once)."""
    out: list[ast.stmt] = []
    for stmt in body:
        if any(stmt is lp for lp in loops):
            out.append(
                ast.Assign(
                    targets=[ast.Name(id=stmt.target.id, ctx=ast.Store())],
                    value=ast.Constant(0),  # type: ignore[attr-defined]
                    lineno=0,
                )
            )
            out.extend(copy.deepcopy(stmt.body))
        else:
            out.append(copy.deepcopy(stmt))
    return out


def unique_name(base: str, taken: set[str]) -> str:
    name, i = base, 2
    while name in taken:
        name, i = f"{base}_{i}", i + 1
    return name


def fix(node: ast.AST) -> ast.AST:
    return ast.fix_missing_locations(node)
