"""Mutators: candidate generators. A mutator looks at a parent candidate and proposes variants.

Each variant is a whole module source (the kernel and, where needed, the launcher rewritten)
plus a description of what changed and why. Mutators check their own preconditions and
propose nothing where a rewrite would be wrong; the policy gate and the correctness harness
verify every variant anyway. Adding a mutator is one module with a `@mutator(...)` function.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Callable, Iterable

from ..index import ParsedModule, parse_module, reach
from ..rules.analysis import KernelView, LaunchView, kernel_views, launch_views
from ..task.spec import Task


@dataclass(frozen=True)
class Mutation:
    source: str
    origin: str  # the mutator's name
    description: str  # what changed, for the explanation
    knobs: dict = field(default_factory=dict)  # the configuration it set, if any


@dataclass
class MutationContext:
    """The parent candidate, parsed, with views of the target kernel and its launches.
    `previous`: the source the parent was made from, where that step paid (the parent is faster
    on some case), so a walk through a space can repeat a step that paid. `suggested`: see the
    field."""

    task: Task
    source: str
    seed: int = 0
    previous: str | None = None
    # Configurations to try first, where they map onto the launch: what torch.compile chose for
    # the reference's kernels (block sizes by name, `num_warps`, `num_stages`).
    suggested: list[dict[str, int]] = field(default_factory=list)
    module: ParsedModule = field(init=False)
    kernel: KernelView | None = field(init=False)
    launches: list[LaunchView] = field(init=False)
    tree: ast.Module = field(init=False)

    def __post_init__(self) -> None:
        self.module = parse_module(self.source, self.task.file)
        self.tree = (
            self.module.tree
            if self.module.tree is not None
            else ast.Module(body=[], type_ignores=[])
        )
        views = kernel_views(self.module)
        self.kernel = next((k for k in views if k.name == self.task.kernel), None)
        self.launches = [lv for lv in launch_views(self.module, views) if lv.kernel is self.kernel]

    def entry_launches(self) -> list[LaunchView]:
        """Launches the entry makes (the ones a rewrite may touch), wherever they are written:
        in the entry, a helper it calls, an autograd.Function's forward (`reach.py`), or a
        function nested in one of those."""
        reached = reach.reachable(self.tree, self.task.entry)
        return [
            lv
            for lv in self.launches
            if lv.site.launcher
            and any(lv.site.launcher == q or lv.site.launcher.startswith(q + ".") for q in reached)
        ]

    def entry_function(self) -> ast.FunctionDef | None:
        """The function calling the entry runs: the entry itself, or what its alias names
        (`Fn.apply` runs `Fn.forward`)."""
        found = reach.resolve(self.tree, self.task.entry)
        return found[1] if found is not None else None

    def torch_name(self) -> str | None:
        """The name `torch` is imported as at module level (a rewrite that adds torch calls needs it)."""
        return next(
            (
                a.asname or a.name
                for n in self.tree.body
                if isinstance(n, ast.Import)
                for a in n.names
                if a.name == "torch"
            ),
            None,
        )


@dataclass(frozen=True)
class Mutator:
    name: str
    summary: str
    propose: Callable[[MutationContext], Iterable[Mutation]]


MUTATORS: dict[str, Mutator] = {}


def mutator(name: str, summary: str):
    def register(fn: Callable[[MutationContext], Iterable[Mutation]]):
        MUTATORS[name] = Mutator(name, summary, fn)
        return fn

    return register
