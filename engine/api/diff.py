"""Unified diffs of a kernel file, as variants carry them and previews show them."""

from __future__ import annotations

import difflib
import os


def unified_diff(original: str, new: str, path: str, root: str | None = None) -> str:
    """A unified diff with paths relative to the workspace root (`git apply` / `patch -p1` there)."""
    rel = os.path.relpath(path, root) if root else os.path.relpath(path)
    return "".join(
        difflib.unified_diff(
            original.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"a/{rel}",
            tofile=f"b/{rel}",
        )
    )


def diff_counts(diff: str) -> tuple[int, int]:
    """(lines added, lines removed) of a unified diff."""
    lines = diff.splitlines()
    added = sum(1 for l in lines if l.startswith("+") and not l.startswith("+++"))
    removed = sum(1 for l in lines if l.startswith("-") and not l.startswith("---"))
    return added, removed
