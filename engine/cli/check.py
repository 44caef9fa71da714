"""`kernelbrain check`: run the static rules over files and folders, print ruff-style output."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import msgspec

from ..index.files import iter_python_files
from ..index.findings import Finding
from ..index.model import Span
from ..rules import RULE_CRASH, SYNTAX_ERROR, check_source, load_rules


@dataclass
class CheckResult:
    findings: list[Finding] = field(default_factory=list)
    files_checked: int = 0
    missing: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def check_file(path: Path) -> list[Finding]:
    try:
        source = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        return [
            Finding(
                SYNTAX_ERROR,
                f"cannot decode as UTF-8: {exc.reason} at byte {exc.start}",
                Span(0, 0, 0, 0),
                "error",
                None,
                str(path),
            )
        ]
    except OSError as exc:
        return [
            Finding(
                SYNTAX_ERROR,
                f"cannot read file: {exc.strerror}",
                Span(0, 0, 0, 0),
                "error",
                None,
                str(path),
            )
        ]
    return check_source(source, str(path))


def known_codes() -> list[str]:
    """Every code `check` can report: the rules' and its own (a syntax error, a rule that failed)."""
    return sorted([*load_rules(), SYNTAX_ERROR, RULE_CRASH])


def unknown_selectors(selectors: Iterable[str]) -> list[str]:
    """The `--select`/`--ignore` values that no code starts with (a typo selects nothing and
    would report a clean file)."""
    codes = known_codes()
    return [s for s in selectors if not any(code.startswith(s) for code in codes)]


def check_paths(paths: Iterable[Path], select=None, ignore=None) -> CheckResult:
    result = CheckResult()
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files.extend(iter_python_files(p))
        elif p.is_file():
            if p.suffix in (".py", ".pyi"):
                files.append(p)
            else:
                result.skipped.append(f"{p}: skipped, not a Python file")
        else:
            result.missing.append(p)
    for f in files:
        result.files_checked += 1
        found = check_file(f)
        if select or ignore:
            sel, ign = tuple(select or ()), tuple(ignore or ())
            found = [
                x
                for x in found
                if (not sel or x.code.startswith(sel)) and not (ign and x.code.startswith(ign))
            ]
        result.findings.extend(found)
    return result


def format_text(findings: list[Finding]) -> str:
    return "\n".join(
        f"{f.path}:{f.span.line + 1}:{f.span.col + 1}: {f.code} {f.message}" for f in findings
    )


class FindingRecord(msgspec.Struct):
    """The documented JSON shape of one finding (1-based lines and columns)."""

    path: str | None
    line: int
    column: int
    end_line: int
    end_column: int
    code: str
    severity: str
    message: str
    kernel: str | None


def to_record(f: Finding) -> FindingRecord:
    s = f.span
    return FindingRecord(
        f.path,
        s.line + 1,
        s.col + 1,
        s.end_line + 1,
        s.end_col + 1,
        f.code,
        f.severity,
        f.message,
        f.kernel,
    )


def format_json(findings: list[Finding]) -> str:
    return msgspec.json.format(
        msgspec.json.encode([to_record(f) for f in findings]), indent=2
    ).decode()
