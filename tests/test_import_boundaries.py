"""The architecture's import boundaries, stated by package, on the static import graph (imports
inside functions included, so a lazy import cannot hide an edge):

- code that runs in the sandboxed workers (`engine.worker`) reaches only the engine's bottom
  floor: `engine.api`'s facts, `engine.protocol`, `engine.task`, `engine.index` (so never the
  search, the store, the LLM, the mutators or the server);
- the engine's own processes never import worker code (it imports torch and runs user code);
- the language server imports the engine only through `engine.api` and the agent's protocol,
  and never reaches torch, triton, the search, the mutators, the evaluation, the store or the LLM;
- `engine.api` and `engine.protocol` never reach the evaluation, the search or the worker;
- the engine never reaches the server;
- no two packages import each other, directly or through others.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"kernelbrain.engine": ROOT / "engine", "kernelbrain.server": ROOT / "server"}
E = "kernelbrain.engine"

WORKER = f"{E}.worker"
# Everything sandboxed code may import of KernelBrain (with the packages above them).
WORKER_FLOOR = (WORKER, f"{E}.api", f"{E}.protocol", f"{E}.task", f"{E}.index")
PACKAGE_ROOTS = ("kernelbrain", E)  # importing any module runs these (empty) package inits
# What the language server may import of the engine directly.
SERVER_DOORS = (f"{E}.api", f"{E}.agent.protocol", f"{E}.agent", E)
SERVER_MUST_NOT_REACH = (
    "torch",
    "triton",
    f"{E}.search",
    f"{E}.mutate",
    f"{E}.evaluate",
    f"{E}.worker",
    f"{E}.store",
    f"{E}.llm",
)
FLOOR_MUST_NOT_REACH = (f"{E}.evaluate", f"{E}.search", f"{E}.worker", f"{E}.mutate", f"{E}.llm")


def modules(packages: dict[str, Path]) -> dict[str, Path]:
    found = {}
    for package, folder in packages.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def runtime_nodes(tree: ast.AST):
    """Every node that can run: what sits under `if TYPE_CHECKING:` is for type checkers only
    and imports nothing at run time."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and ast.unparse(child.test) in (
                "TYPE_CHECKING",
                "typing.TYPE_CHECKING",
            ):
                stack.extend(child.orelse)
                continue
            stack.append(child)


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every module `name` imports anywhere in its body, with the packages that hold them (an
    import runs their `__init__`)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    targets: set[str] = set()
    for node in runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            targets.add(module)
            targets |= {f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in known}
    out = set()
    for target in targets:
        parts = target.split(".")
        out |= {
            ".".join(parts[:i])
            for i in range(1, len(parts) + 1)
            if ".".join(parts[:i]) in known or i == 1
        }
    return out


def graph(packages: dict[str, Path] = PACKAGES) -> dict[str, set[str]]:
    known = modules(packages)
    return {name: imports_of(name, path, known) for name, path in known.items()}


def closure(g: dict[str, set[str]], start: str) -> dict[str, str | None]:
    via: dict[str, str | None] = {start: None}
    stack = [start]
    while stack:
        here = stack.pop()
        for dep in sorted(g.get(here, ())):
            if dep not in via:
                via[dep] = here
                stack.append(dep)
    return via


def chain(via: dict[str, str | None], target: str) -> str:
    steps = [target]
    while via.get(steps[-1]):
        steps.append(via[steps[-1]])  # type: ignore[arg-type]
    return " <- ".join(steps)


def violations(g: dict[str, set[str]], roots, forbidden) -> list[str]:
    found = []
    for root in roots:
        via = closure(g, root)
        for module in sorted(via):
            if any(module == f or module.startswith(f + ".") for f in forbidden):
                found.append(chain(via, module))
    return found


def package_of(module: str) -> str | None:
    parts = module.split(".")
    return ".".join(parts[:3]) if parts[0] == "kernelbrain" and len(parts) >= 3 else None


def package_cycles(g: dict[str, set[str]]) -> list[str]:
    """Pairs of sibling packages (engine.search, server.features, ...) that reach each other."""
    edges: dict[str, set[str]] = {}
    for module, deps in g.items():
        for dep in deps:
            a, b = package_of(module), package_of(dep)
            if a and b and a != b:
                edges.setdefault(a, set()).add(b)
    cycles = []
    for a in sorted(edges):
        seen = closure(edges, a)
        cycles += [
            f"{a} <-> {b}" for b in sorted(seen) if b != a and a in closure(edges, b) and a < b
        ]
    return cycles


def server_roots(g: dict[str, set[str]]) -> list[str]:
    # `server.command` only registers `kernelbrain serve` with the engine's CLI; the process it
    # starts runs `server.app`, and every other server module is the server itself.
    return [m for m in g if m.startswith("kernelbrain.server")]


def within(module: str, packages) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def worker_violations(g: dict[str, set[str]]) -> list[str]:
    roots = [m for m in g if within(m, (WORKER,))]
    found = []
    for root in roots:
        via = closure(g, root)
        found += [
            chain(via, m)
            for m in sorted(via)
            if (
                m.startswith("kernelbrain")
                and m not in PACKAGE_ROOTS
                and not within(m, WORKER_FLOOR)
            )
            # the API's front-end doors reach the rules and the store
            or m in (f"{E}.api.analysis", f"{E}.api.tasks")
        ]
    return sorted(set(found))


def engine_imports_worker(g: dict[str, set[str]]) -> list[str]:
    return [
        f"{m} -> {d}"
        for m, deps in sorted(g.items())
        if m.startswith(E) and not within(m, (WORKER,))
        for d in sorted(deps)
        if within(d, (WORKER,))
    ]


def server_violations(g: dict[str, set[str]]) -> list[str]:
    direct = [
        f"{m} -> {d}"
        for m in server_roots(g)
        for d in sorted(g[m])
        if within(d, (E,)) and not within(d, SERVER_DOORS[:2]) and d not in SERVER_DOORS[2:]
    ]
    return direct + violations(g, server_roots(g), SERVER_MUST_NOT_REACH)


def floor_violations(g: dict[str, set[str]]) -> list[str]:
    roots = [m for m in g if within(m, (f"{E}.api", f"{E}.protocol"))]
    return violations(g, roots, FLOOR_MUST_NOT_REACH)


def engine_violations(g: dict[str, set[str]]) -> list[str]:
    return violations(g, [m for m in g if m.startswith(E)], ("kernelbrain.server",))


RULES = {
    "worker": worker_violations,
    "engine-imports-worker": engine_imports_worker,
    "server": server_violations,
    "floor": floor_violations,
    "engine": engine_violations,
    "cycle": package_cycles,
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_the_tree_keeps_its_boundaries(rule):
    assert RULES[rule](graph()) == []


@pytest.mark.parametrize(
    "where, line, rule",
    [
        ("server/hover_extra.py", "from kernelbrain.engine.search.driver import Search", "server"),
        ("server/lazy_extra.py", "def f():\n    import torch\n", "server"),
        ("server/store_extra.py", "from kernelbrain.engine.store import Store", "server"),
        ("server/index_extra.py", "from kernelbrain.engine.index import parse_module", "server"),
        ("engine/worker/extra.py", "from ..store import Store", "worker"),
        ("engine/worker/extra.py", "def f():\n    from ..llm import client\n", "worker"),
        ("engine/worker/extra.py", "from ..api.tasks import find_task", "worker"),
        ("engine/search/extra.py", "from ..worker import harness", "engine-imports-worker"),
        ("engine/api/extra.py", "from ..evaluate import pool", "floor"),
        ("engine/extra_cli.py", "from kernelbrain.server.app import serve", "engine"),
        ("engine/store/extra.py", "from ..search import driver", "cycle"),
    ],
)
def test_a_forbidden_import_is_caught(tmp_path, where, line, rule):
    """Each rule fails on a tree with one forbidden edge added (a copy of this one)."""
    import shutil

    packages = {}
    for name, folder in PACKAGES.items():
        shutil.copytree(
            folder, tmp_path / folder.name, ignore=shutil.ignore_patterns("__pycache__")
        )
        packages[name] = tmp_path / folder.name
    (tmp_path / where).write_text(line + "\n")
    if rule == "cycle":  # search already reaches the store; the store now reaches the search
        (tmp_path / "engine/store/__init__.py").write_text(
            (tmp_path / "engine/store/__init__.py").read_text() + "\nfrom . import extra  # noqa\n"
        )
    g = graph(packages)
    assert RULES[rule](g), f"{line!r} in {where} went unnoticed"
    g_clean = graph()
    assert not RULES[rule](g_clean)
