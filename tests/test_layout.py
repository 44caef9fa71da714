"""The tree stays readable: front doors stay small, ARCHITECTURE.md's code map matches the
folders, README.md stays a page for users whose links resolve, and comments point to nothing
outside the repository."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([*(ROOT / "engine").rglob("*.py"), *(ROOT / "server").rglob("*.py")])
MAX_CLASS_LINES = 300
MAX_FUNCTION_LINES = 80
# A longer class or function says why in one line of its docstring, starting so:
REASON = "Long because"


def oversized(path: Path) -> list[str]:
    """Classes over MAX_CLASS_LINES and functions over MAX_FUNCTION_LINES lines whose docstring
    gives no one-line reason."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef):
            limit = MAX_CLASS_LINES
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            limit = MAX_FUNCTION_LINES
        else:
            continue
        lines = node.end_lineno - node.lineno + 1
        doc = ast.get_docstring(node) or ""
        if lines > limit and not any(line.startswith(REASON) for line in doc.splitlines()):
            found.append(f"{path}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_class_or_function_grows_past_its_limit_without_a_reason():
    assert [o for path in SOURCES for o in oversized(path)] == []


def test_the_size_check_catches_a_long_function_and_accepts_a_reason(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES + 1))
    long = tmp_path / "long.py"
    long.write_text(f"def grown():\n{body}\n")
    assert oversized(long)
    long.write_text(f'def grown():\n    """{REASON} it is one table."""\n{body}\n')
    assert not oversized(long)


def test_comments_point_to_nothing_outside_the_repository():
    cited = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in SOURCES
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if "brief §" in line or re.search(r"\bbrief\b.*§", line)
    ]
    assert cited == []


def code_map_packages() -> set[str]:
    """The folders ARCHITECTURE.md's code map describes (its bold `folder/` headings)."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## Code map", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\*\*`([a-z_/.-]+)/`\*\*", section, re.M))


def packages() -> set[str]:
    """Every package of engine/ and server/ (a folder with an `__init__.py`)."""
    return {
        str(p.parent.relative_to(ROOT))
        for top in ("engine", "server")
        for p in (ROOT / top).rglob("__init__.py")
    }


def test_the_code_map_names_every_package_and_nothing_else():
    named = code_map_packages()
    assert named, "no code map found"
    assert sorted(packages() - named) == [], "packages the code map does not describe"
    assert sorted(named - packages() - {"bench", "tests", "docs", "vscode-extension"}) == []


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize(
    "document", ["README.md", *sorted(p.name for p in (ROOT / "docs").glob("*.md"))]
)
def test_every_relative_link_resolves(document):
    path = ROOT / document if document == "README.md" else ROOT / "docs" / document
    text = re.sub(r"`[^`]*`", "", path.read_text(encoding="utf-8"))  # code is not a link
    targets = [t for t in LINK.findall(text) if "://" not in t]
    assert [t for t in targets if not (path.parent / t).exists()] == []


def test_the_readme_is_a_page_with_the_two_quick_start_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    block = text.split("## Quick start", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line.split("#")[0].strip() for line in block.strip().splitlines()]
    assert commands == ["./scripts/demo.sh", "./scripts/test.sh"]
    assert all((ROOT / c).is_file() for c in commands)
