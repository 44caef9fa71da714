"""Inductor's Triton helpers (`triton_helpers.max2`, `welford_reduce`, …), inlined.

Inductor's kernels call `@triton.jit` helpers from `torch._inductor.runtime.triton_helpers`, a
private module whose functions change between PyTorch releases. A variant written into the
user's file must keep working after they upgrade PyTorch, so the helpers a kernel calls are
copied in (renamed `_inductor_<name>`) rather than imported; `libdevice` and `math` there are
Triton's own (`triton.language.extra.libdevice`, `tl.math`). The source is read from the
installed PyTorch's file, never imported: the engine does not import torch.
"""

from __future__ import annotations

import ast
import importlib.util
from functools import lru_cache
from pathlib import Path

from .output_code import NotTranslated

PREFIX = "_inductor_"


@lru_cache(maxsize=1)
def _helper_module() -> dict[str, ast.FunctionDef]:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise NotTranslated("PyTorch is not installed where the engine runs")
    path = Path(spec.submodule_search_locations[0]) / "_inductor" / "runtime" / "triton_helpers.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        n.name: n
        for n in tree.body
        if isinstance(n, ast.FunctionDef)
        and any(ast.unparse(d) == "triton.jit" for d in n.decorator_list)
    }


class _Rename(ast.NodeTransformer):
    """`triton_helpers.f` and a helper's bare calls of its siblings to `_inductor_f`;
    `tl_math.f` and `math.f` to `tl.math.f`."""

    def __init__(self, helpers: set[str], used: set[str]):
        self.helpers = helpers
        self.used = used

    def visit_Attribute(self, node: ast.Attribute):
        self.generic_visit(node)
        if isinstance(node.value, ast.Name):
            if node.value.id == "triton_helpers":
                if node.attr not in self.helpers:
                    raise NotTranslated(f"`triton_helpers.{node.attr}` is not a Triton helper")
                self.used.add(node.attr)
                return ast.copy_location(ast.Name(PREFIX + node.attr, ast.Load()), node)
            if node.value.id in ("tl_math", "math"):
                return ast.copy_location(
                    ast.Attribute(ast.Attribute(ast.Name("tl", ast.Load()), "math"), node.attr),
                    node,
                )
        return node

    def visit_Name(self, node: ast.Name):
        if node.id in self.helpers and isinstance(node.ctx, ast.Load):
            self.used.add(node.id)
            return ast.copy_location(ast.Name(PREFIX + node.id, node.ctx), node)
        return node


def rewrite(tree: ast.AST, used: set[str]) -> ast.AST:
    """`tree` (a kernel) with its helper calls renamed; the helpers it calls added to `used`."""
    helpers = set(_helper_module())
    fixed = _Rename(helpers, used).visit(tree)
    # a kernel's own names never clash with a helper's: only `triton_helpers.` ones are helpers
    return ast.fix_missing_locations(fixed)


def inlined(used: set[str]) -> list[str]:
    """The source of every helper in `used` and of each helper those call, in dependency order."""
    helpers = _helper_module()
    order: list[str] = []

    def visit(name: str, path: tuple[str, ...] = ()) -> None:
        if name in order or name in path:
            return
        fn = ast.parse(ast.unparse(helpers[name])).body[0]
        calls: set[str] = set()
        fn = _Rename(set(helpers), calls).visit(fn)
        for callee in sorted(calls - {name}):
            visit(callee, path + (name,))
        order.append(name)

    for name in sorted(used):
        visit(name)
    sources = []
    for name in order:
        fn = ast.parse(ast.unparse(helpers[name])).body[0]
        fn = _Rename(set(helpers), set()).visit(fn)
        fn.name = PREFIX + name
        sources.append(ast.unparse(ast.fix_missing_locations(fn)))
    return sources
