"""The architecture's import boundaries, on the static import graph (imports inside functions
included, so a lazy import cannot hide an edge):

- the language server never reaches torch, triton, the search, the mutators or the evaluation pool;
- worker code never reaches the search, the mutators, the store or the server;
- the engine never reaches the server;
- no two packages import each other, directly or through others.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"kernelbrain.engine": ROOT / "engine", "kernelbrain.server": ROOT / "server"}

SERVER_MUST_NOT_REACH = (
    "torch",
    "triton",
    "kernelbrain.engine.search",
    "kernelbrain.engine.mutate",
    "kernelbrain.engine.evaluate.pool",
)
# What the worker process imports to run user and candidate code.
WORKER_ROOTS = ("kernelbrain.engine.worker.process",)
WORKER_MUST_NOT_REACH = (
    "kernelbrain.engine.search",
    "kernelbrain.engine.mutate",
    "kernelbrain.engine.store",
    "kernelbrain.server",
)


def modules(packages: dict[str, Path]) -> dict[str, Path]:
    found = {}
    for package, folder in packages.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every module `name` imports anywhere in its body, with the packages that hold them (an
    import runs their `__init__`)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
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


def test_the_language_server_never_reaches_torch_triton_or_the_search():
    g = graph()
    assert violations(g, server_roots(g), SERVER_MUST_NOT_REACH) == []


def test_worker_code_never_reaches_the_search_the_store_or_the_server():
    assert violations(graph(), WORKER_ROOTS, WORKER_MUST_NOT_REACH) == []


def test_the_engine_never_reaches_the_server():
    g = graph()
    engine = [m for m in g if m.startswith("kernelbrain.engine")]
    assert violations(g, engine, ("kernelbrain.server",)) == []


def test_no_package_cycles():
    assert package_cycles(graph()) == []


@pytest.mark.parametrize(
    "where, line, rule",
    [
        ("server/hover_extra.py", "from kernelbrain.engine.search.driver import Search", "server"),
        ("server/lazy_extra.py", "def f():\n    import torch\n", "server"),
        ("engine/worker/worker_extra.py", "from ..store import Store", "worker"),
        ("engine/extra_cli.py", "from kernelbrain.server.app import serve", "engine"),
        ("engine/store/extra.py", "from ..search import engine", "cycle"),
    ],
)
def test_a_forbidden_import_is_caught(tmp_path, where, line, rule):
    """The checks above fail on a tree with one forbidden edge added (a copy of this one)."""
    import shutil

    packages = {}
    for name, folder in PACKAGES.items():
        shutil.copytree(
            folder, tmp_path / folder.name, ignore=shutil.ignore_patterns("__pycache__")
        )
        packages[name] = tmp_path / folder.name
    (tmp_path / where).write_text(line + "\n")
    if rule == "worker":  # the worker imports the new module
        worker = tmp_path / "engine/worker/process.py"
        worker.write_text(worker.read_text() + "\nfrom . import worker_extra  # noqa\n")
    if rule == "cycle":  # search already reaches the store; the store now reaches the search
        (tmp_path / "engine/store/__init__.py").write_text(
            (tmp_path / "engine/store/__init__.py").read_text() + "\nfrom . import extra  # noqa\n"
        )
    g = graph(packages)
    found = {
        "server": violations(g, server_roots(g), SERVER_MUST_NOT_REACH),
        "worker": violations(g, WORKER_ROOTS, WORKER_MUST_NOT_REACH),
        "engine": violations(
            g, [m for m in g if m.startswith("kernelbrain.engine")], ("kernelbrain.server",)
        ),
        "cycle": package_cycles(g),
    }
    assert found[rule], f"{line!r} in {where} went unnoticed"
