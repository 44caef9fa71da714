"""Candidate generators: configuration space, structural playbook rewrites (and, later, LLM)."""

from __future__ import annotations

import importlib
import pkgutil

from .registry import MUTATORS, Mutation, MutationContext, Mutator, mutator

_loaded = False


def load_mutators() -> dict[str, Mutator]:
    """Import every mutator module of this package once; each registers itself."""
    global _loaded
    if not _loaded:
        for info in pkgutil.iter_modules(__path__):
            if info.name not in ("base", "edits", "dataflow"):
                importlib.import_module(f"{__name__}.{info.name}")
        _loaded = True
    return MUTATORS


__all__ = ["MUTATORS", "Mutation", "MutationContext", "Mutator", "load_mutators", "mutator"]
