"""Candidate generators: the configuration space and the structural playbook rewrites, one module
each, registered by their `@mutator` decorator (the LLM mutator is `engine/llm`)."""

from __future__ import annotations

import importlib
import pkgutil

from .registry import MUTATORS, Mutation, MutationContext, Mutator, mutator

_loaded = False


def load_mutators() -> dict[str, Mutator]:
    """Import every module of this package once: each mutator registers itself, and the shared
    helpers (edits, data flow) define nothing that runs, so no list of exceptions is kept."""
    global _loaded
    if not _loaded:
        for info in pkgutil.iter_modules(__path__):
            importlib.import_module(f"{__name__}.{info.name}")
        _loaded = True
    return MUTATORS


__all__ = ["MUTATORS", "Mutation", "MutationContext", "Mutator", "load_mutators", "mutator"]
