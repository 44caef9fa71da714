"""A candidate: the whole module source with the kernel (and, where needed, the launcher) rewritten."""

from __future__ import annotations

import ast
import hashlib


def normalise(source: str) -> str:
    """Source with comments and formatting removed, so cosmetic variants hash alike."""
    try:
        return ast.unparse(ast.parse(source))
    except (SyntaxError, ValueError, RecursionError):
        return "\n".join(line.rstrip() for line in source.strip().splitlines())


def candidate_id(source: str) -> str:
    return hashlib.sha256(normalise(source).encode("utf-8", "surrogatepass")).hexdigest()[:16]
