"""Small, conservative data-flow helpers shared by the static rules.

Triton kernels are short straight-line functions with a few loops, so "which parameters does
this expression come from" is answered well enough by following local assignments by name.
Everything here works on `ast` nodes only.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

from ..index.builder import TRITON_DECORATORS, ParsedModule
from ..index.model import Kernel, LaunchSite

TL = "triton.language."
DEFAULT_NUM_WARPS = 4


def tl_name(pm: ParsedModule, call: ast.AST) -> str | None:
    """`tl.load(...)` -> "load"; `tl.math.exp(...)` -> "math.exp"; anything else -> None."""
    if not isinstance(call, ast.Call):
        return None
    name = pm.aliases.canonical(call.func)
    if name and name.startswith(TL):
        return name[len(TL) :]
    return None


def method_call(node: ast.AST, *names: str) -> bool:
    """`<expr>.name(...)` for one of `names`."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in names
    )


def kwarg(call: ast.Call, name: str, position: int | None = None) -> ast.expr | None:
    for k in call.keywords:
        if k.arg == name:
            return k.value
    if position is not None and len(call.args) > position:
        return call.args[position]
    return None


def assignments(nodes) -> dict[str, list[ast.expr]]:
    """Every value assigned to each local name (loop targets map to their iterables)."""
    out: dict[str, list[ast.expr]] = defaultdict(list)

    def bind(target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            out[target.id].append(value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                for t, v in zip(target.elts, value.elts):
                    bind(t, v)
            else:
                for t in target.elts:
                    bind(t, value)

    for node in nodes:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                bind(t, node.value)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            bind(node.target, node.value)
        elif isinstance(node, ast.For):
            bind(node.target, node.iter)
        elif isinstance(node, ast.NamedExpr):
            bind(node.target, node.value)
    return out


def _node_lines(node: ast.AST) -> tuple[int, int]:
    return node.lineno, getattr(node, "end_lineno", node.lineno) or node.lineno


class KernelView:
    """One `@triton.jit` function with the questions rules ask about it.

    Long because every rule's question about a kernel reads the same conservative data flow.
    """

    def __init__(self, pm: ParsedModule, kernel: Kernel, node: ast.FunctionDef):
        self.pm = pm
        self.kernel = kernel
        self.node = node
        self.name = kernel.name
        self.params = {p.name: p for p in kernel.params}
        self.nodes = list(ast.walk(node))  # walked once; every question below reuses it
        self.assigns = assignments(self.nodes)
        self._calls: list[tuple[str, ast.Call]] = [
            (n, c)
            for c in self.nodes
            if type(c) is ast.Call and (n := tl_name(pm, c)) is not None  # type: ignore[misc]
        ]
        self.loops = self._top_level_loops()
        # For each local name: the nodes of its assigned values and the names they mention.
        self._value_nodes = {
            k: [n for v in vs for n in ast.walk(v)] for k, vs in self.assigns.items()
        }
        self._refs = {
            k: {n.id for n in ns if type(n) is ast.Name} for k, ns in self._value_nodes.items()
        }
        self._closures: dict[str, set[str]] = {}
        self._roots: dict[str, frozenset[str]] = {}

    # -- calls -----------------------------------------------------------------------------
    def tl_calls(self, *names: str) -> list[ast.Call]:
        return [c for n, c in self._calls if n in names or n.split(".")[-1] in names]

    def uses(self, *names: str) -> bool:
        return bool(self.tl_calls(*names))

    def arg_node(self, name: str) -> ast.arg | None:
        a = self.node.args
        for arg in a.posonlyargs + a.args + a.kwonlyargs:
            if arg.arg == name:
                return arg
        return None

    def is_runtime_param(self, name: str) -> bool:
        p = self.params.get(name)
        return p is not None and not p.constexpr

    # -- data flow -------------------------------------------------------------------------
    def _name_roots(self, name: str) -> frozenset[str]:
        if name not in self._roots:
            seen = {name}
            todo = [name]
            while todo:
                for ref in self._refs.get(todo.pop(), ()):
                    if ref not in seen:
                        seen.add(ref)
                        todo.append(ref)
            self._roots[name] = frozenset(n for n in seen if n in self.params)
        return self._roots[name]

    def roots(self, expr: ast.AST) -> set[str]:
        """Parameters `expr` is computed from, following local assignments."""
        out: set[str] = set()
        for n in ast.walk(expr):
            if type(n) is ast.Name:
                out |= self._name_roots(n.id)
        return out

    def _additive_leaves(
        self, expr: ast.AST, seen: set[str], unwrap_hints: bool = False
    ) -> Iterator[ast.AST]:
        """The parameters and calls a pointer expression adds or subtracts (never multiplies):
        subscripts dropped, locals followed to their values; with `unwrap_hints`, through
        `tl.max_contiguous` / `tl.multiple_of` to the offsets they annotate."""
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
            yield from self._additive_leaves(expr.left, seen, unwrap_hints)
            yield from self._additive_leaves(expr.right, seen, unwrap_hints)
        elif isinstance(expr, ast.Subscript):
            yield from self._additive_leaves(expr.value, seen, unwrap_hints)
        elif isinstance(expr, ast.Call):
            if (
                unwrap_hints
                and expr.args
                and tl_name(self.pm, expr) in ("max_contiguous", "multiple_of")
            ):
                yield from self._additive_leaves(expr.args[0], seen, unwrap_hints)
            else:
                yield expr
        elif isinstance(expr, ast.Name) and expr.id not in seen:
            seen.add(expr.id)
            if expr.id in self.params:
                yield expr
            else:
                for value in self.assigns.get(expr.id, ()):
                    yield from self._additive_leaves(value, seen, unwrap_hints)

    def pointer_roots(self, expr: ast.AST) -> set[str]:
        """Parameters that appear as the base of pointer arithmetic (added, never multiplied)."""
        return {
            n.id
            for n in self._additive_leaves(expr, set())
            if isinstance(n, ast.Name) and self.is_runtime_param(n.id)
        }

    def unit_stride_bounds(self, expr: ast.AST) -> set[str]:
        """Bounds of the `tl.arange`s a pointer expression adds without a multiplier: the extent of
        its contiguous (unit-stride) run, e.g. `BLOCK_N` in `p + rows[:, None] * s + cols[None, :]`."""
        return {
            ast.unparse(c.args[1])
            for c in self._additive_leaves(expr, set(), unwrap_hints=True)
            if isinstance(c, ast.Call) and tl_name(self.pm, c) == "arange" and len(c.args) == 2
        }

    def _closure(self, key: str, predicate) -> set[str]:
        """Local names whose value (transitively, through other locals) contains a node
        satisfying `predicate`; computed once per kernel and predicate as a fixpoint."""
        if key not in self._closures:
            hit = {k for k, ns in self._value_nodes.items() if any(predicate(n) for n in ns)}
            changed = True
            while changed:
                changed = False
                for k, refs in self._refs.items():
                    if k not in hit and refs & hit:
                        hit.add(k)
                        changed = True
            self._closures[key] = hit
        return self._closures[key]

    def reaches(self, expr: ast.AST, key: str, predicate) -> bool:
        """Whether `expr`, or a local it uses, is computed from a node satisfying `predicate`."""
        names = self._closure(key, predicate)
        return any(predicate(n) or (type(n) is ast.Name and n.id in names) for n in ast.walk(expr))

    def depends_on_program_id(self, expr: ast.AST) -> bool:
        return self.reaches(expr, "program_id", lambda n: tl_name(self.pm, n) == "program_id")

    def axis_tiles(self, axis: int) -> set[str]:
        """Constexpr parameters that scale `tl.program_id(axis)` (`pid_n * BLOCK_N`): the tile of
        that grid axis, whatever the names say."""

        def is_pid(n: ast.AST) -> bool:
            if tl_name(self.pm, n) != "program_id":
                return False
            arg = kwarg(n, "axis", 0)  # type: ignore[arg-type]
            return isinstance(arg, ast.Constant) and arg.value == axis

        out = set()
        for n in self.nodes:
            if type(n) is ast.BinOp and isinstance(n.op, ast.Mult):
                for tile, other in ((n.left, n.right), (n.right, n.left)):
                    if (
                        isinstance(tile, ast.Name)
                        and (p := self.params.get(tile.id)) is not None
                        and p.constexpr
                        and self.reaches(other, f"program_id{axis}", is_pid)
                    ):
                        out.add(tile.id)
        return out

    def masked_tiles(self, size: str) -> set[str]:
        """Constexpr parameters whose `tl.arange(0, TILE)` offsets the kernel compares with the
        parameter `size` (`rm < M` or `rk < K - k`, `rm = pid_m * BLOCK_M + tl.arange(0,
        BLOCK_M)`): the tile that walks that dimension, whatever the names say."""

        def bounded_by_size(n: ast.expr) -> bool:
            while isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub):
                n = n.left
            return isinstance(n, ast.Name) and n.id == size

        out = set()
        tiles = [name for name, p in self.params.items() if p.constexpr]
        for n in self.nodes:
            if not (
                isinstance(n, ast.Compare)
                and len(n.ops) == 1
                and isinstance(n.ops[0], ast.Lt)
                and bounded_by_size(n.comparators[0])
            ):
                continue
            for tile in tiles:

                def is_arange(c: ast.AST, tile: str = tile) -> bool:
                    return tl_name(self.pm, c) == "arange" and any(
                        isinstance(a, ast.Name) and a.id == tile
                        for a in c.args  # type: ignore[attr-defined]
                    )

                if self.reaches(n.left, f"arange:{tile}", is_arange):
                    out.add(tile)
        return out

    def casts_to_int64(self, expr: ast.AST) -> bool:
        def is_cast(n: ast.AST) -> bool:
            if method_call(n, "to") or tl_name(self.pm, n) == "cast":
                return any(
                    "int64" in ast.unparse(a) for a in n.args + [k.value for k in n.keywords]
                )  # type: ignore[attr-defined]
            return False

        return self.reaches(expr, "int64", is_cast)

    def pointer_params_of(self, call: ast.Call) -> set[str]:
        """Pointer parameters a load/store/atomic call addresses."""
        ptr = kwarg(call, "pointer", 0)
        return self.pointer_roots(ptr) if ptr is not None else set()

    def loads_of(self, param: str) -> list[ast.Call]:
        return [c for c in self.tl_calls("load") if param in self.pointer_params_of(c)]

    def stores_to(self, param: str) -> list[ast.Call]:
        return [c for c in self.tl_calls("store") if param in self.pointer_params_of(c)]

    def unwritten_reason(self, param: str) -> str | None:
        """Why some element of the output behind `param` may be left unwritten on some path of
        the kernel (None when every path stores it, masked only by bounds): an early `return`,
        a store under a runtime condition, or a store mask computed from loaded data. A zero-fill
        the kernel leaves in place is then part of the result."""
        stores = self.stores_to(param)
        returns = [n for n in self.nodes if isinstance(n, ast.Return)]
        if returns:
            return f"`{self.name}` returns early (line {returns[0].lineno}) on some programs"
        for node in self.nodes:
            if isinstance(node, (ast.If, ast.While, ast.IfExp)) and not self._static_test(
                node.test
            ):
                inner = set(map(id, ast.walk(node)))
                if any(id(c) in inner for c in stores):
                    return f"its store to `{param}` runs under a condition (line {node.lineno})"
        loaded = lambda n: tl_name(self.pm, n) == "load"  # noqa: E731
        for c in stores:
            mask = kwarg(c, "mask", 2)
            if mask is not None and self.reaches(mask, "load", loaded):
                return f"its store to `{param}` is masked by loaded data (line {c.lineno})"
        return None

    def _static_test(self, test: ast.expr) -> bool:
        """A condition fixed when the kernel compiles: built from constexpr parameters only."""
        names = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)}
        return all(n in self.params and self.params[n].constexpr for n in names) and not any(
            isinstance(n, ast.Call) for n in ast.walk(test)
        )

    def atomics_on(self, param: str) -> list[ast.Call]:
        return [
            c
            for n, c in self._calls
            if n.startswith("atomic_") and param in self.pointer_params_of(c)
        ]

    # -- structure -------------------------------------------------------------------------
    def _top_level_loops(self) -> list[ast.stmt]:
        loops: list[ast.stmt] = []

        def visit(stmts: list[ast.stmt]) -> None:
            for s in stmts:
                if isinstance(s, (ast.For, ast.While)):
                    loops.append(s)
                    continue
                for field_name in ("body", "orelse", "finalbody", "handlers"):
                    inner = getattr(s, field_name, None)
                    if isinstance(inner, list):
                        visit([x for x in inner if isinstance(x, ast.stmt)])

        visit(self.node.body)
        return loops

    def pipelined_loops(self) -> list[ast.For]:
        """Loops Triton can software-pipeline: `range` and `tl.range`, not `tl.static_range`
        (unrolled by the frontend) nor `while`. Three col_sum configs that differed only in the
        stages of an unrolled loop took three of the best slots of three H200 searches, measured
        within 0.4% of each other. (The launch's stages reach only those feeding `tl.dot`:
        `config_space.launch_stages_matter`.)"""
        out = []
        for loop in self.loops:
            if isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call):
                f = loop.iter.func
                if (
                    f.attr
                    if isinstance(f, ast.Attribute)
                    else f.id
                    if isinstance(f, ast.Name)
                    else ""
                ) == "range":
                    out.append(loop)
        return out

    def loop_of(self, node: ast.AST) -> ast.stmt | None:
        line = node.lineno  # type: ignore[attr-defined]
        for loop in self.loops:
            start, end = _node_lines(loop)
            if start <= line <= end:
                return loop
        return None

    def tile_constexprs(self) -> list[str]:
        """Constexprs that size the tile: `tl.arange` bounds and steps of `range(0, N, STEP)` loops."""
        names = [d for d in self.arange_bounds() if d in self.kernel.constexprs]
        for loop in self.loops:
            if (
                isinstance(loop, ast.For)
                and isinstance(loop.iter, ast.Call)
                and len(loop.iter.args) == 3
            ):
                step = loop.iter.args[2]
                if (
                    isinstance(step, ast.Name)
                    and step.id in self.kernel.constexprs
                    and step.id not in names
                ):
                    names.append(step.id)
        return names

    def arange_bounds(self) -> list[str]:
        """Names used as `tl.arange(0, NAME)` upper bounds: the tile dimensions."""
        out: list[str] = []
        for c in self.tl_calls("arange"):
            end = kwarg(c, "end", 1)
            if isinstance(end, ast.Name) and end.id not in out:
                out.append(end.id)
        return out


@dataclass
class LaunchView:
    """One `kernel[grid](...)` call, with its arguments bound to the kernel's parameters."""

    pm: ParsedModule
    site: LaunchSite
    call: ast.Call
    kernel: KernelView
    launcher: ast.FunctionDef | None
    args: dict[str, ast.expr] = field(default_factory=dict)
    options: dict[str, ast.expr] = field(default_factory=dict)
    # `**expr` whose keys cannot be read (a helper's return value, a parameter): any option or
    # constexpr may come from it.
    opaque: bool = False
    spread: set[str] = field(default_factory=set)
    _local: dict[str, list[ast.expr]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.launcher is not None:
            # A warmup launch's grid is computed before its compiled kernel's launch, later on.
            launch = self.pm.compiled_launches.get(id(self.call), self.call)
            line = launch.lineno
            for name, values in assignments(ast.walk(self.launcher)).items():
                before = [v for v in values if v.lineno <= line]
                if before:
                    self._local[name] = before
        names = [p.name for p in self.kernel.kernel.params]
        for name, value in zip(names, self.call.args):
            self.args[name] = value
        for k in self.call.keywords:
            if k.arg in self.kernel.params:
                self.args[k.arg] = k.value
            elif k.arg and not (k.arg == "grid" and self.warmup):
                self.options[k.arg] = k.value
            elif k.arg is None:
                self._spread(k.value)

    def _spread(self, value: ast.expr) -> None:
        """`**name` of a dict literal (a launcher-local or module constant: `**LAUNCH`) adds its
        string keys to `spread` (read, never edited: the dict may serve other launches); any
        other `**expr` (a helper's return value, a parameter) makes the launch `opaque`."""
        d = self.resolve(value)
        if isinstance(d, ast.Dict) and all(
            isinstance(key, ast.Constant) and isinstance(key.value, str) for key in d.keys
        ):
            self.spread |= {key.value for key in d.keys}  # type: ignore[union-attr]
        else:
            self.opaque = True

    def may_set(self, option: str) -> bool:
        """Whether `option` (e.g. `num_warps`) may be chosen for this launch other than by its
        default: passed at the launch, possibly in an opaque `**dict`, or left to a wrapper of
        the kernel (an autotuner, Triton's or the project's own)."""
        return (
            option in self.options
            or option in self.spread
            or self.opaque
            or self.kernel.kernel.autotuned
            or any(d not in TRITON_DECORATORS for d in self.kernel.kernel.decorators)
        )

    @property
    def grid(self) -> ast.expr | None:
        """The grid expression: `kernel[grid]`, or for a warmup launch the compiled kernel's
        launch `compiled[grid]` (the warmup's own `grid=` when no launch follows)."""
        func = self.call.func
        if isinstance(func, ast.Subscript):
            return func.slice
        launch = self.pm.compiled_launches.get(id(self.call))
        if launch is not None:
            return launch.func.slice  # type: ignore[attr-defined]
        return next((k.value for k in self.call.keywords if k.arg == "grid"), None)

    @property
    def warmup(self) -> bool:
        """An ahead-of-time `kernel.warmup(...)` launch (compiled, then launched apart)."""
        return not isinstance(self.call.func, ast.Subscript)

    @property
    def statement(self) -> ast.stmt | None:
        """The simple statement of the launcher that holds the launch (where a rewrite inserts
        what the launch needs first); None outside a launcher."""
        if self.launcher is None:
            return None
        for stmt in ast.walk(self.launcher):
            if isinstance(stmt, ast.stmt) and not isinstance(
                stmt, (ast.FunctionDef, ast.If, ast.For, ast.While, ast.With)
            ):
                if any(n is self.call for n in ast.walk(stmt)):
                    return stmt
        return None

    def local(self, name: str) -> ast.expr | None:
        """The launcher-local value of `name` at the launch (its latest assignment before it)."""
        values = self._local.get(name)
        return values[-1] if values else None

    def resolve(self, expr: ast.expr | None, depth: int = 0) -> ast.expr | None:
        """Follow a launcher-local name (latest assignment before the launch) or module constant."""
        while isinstance(expr, ast.Name) and depth < 8:
            depth += 1
            if expr.id in self._local:
                expr = self._local[expr.id][-1]
            elif expr.id in self.pm.module_constants:
                expr = self.pm.module_constants[expr.id]
            else:
                break
        return expr

    def const_int(self, expr: ast.expr | None, depth: int = 0) -> int | None:
        expr = self.resolve(expr)
        if expr is None or depth > 8:
            return None
        if (
            isinstance(expr, ast.Constant)
            and isinstance(expr.value, int)
            and not isinstance(expr.value, bool)
        ):
            return expr.value
        if isinstance(expr, ast.BinOp):
            a, b = self.const_int(expr.left, depth + 1), self.const_int(expr.right, depth + 1)
            if a is None or b is None:
                return None
            ops = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}
            if type(expr.op) in ops:
                return ops[type(expr.op)]
            if isinstance(expr.op, ast.FloorDiv) and b:
                return a // b
            if isinstance(expr.op, ast.LShift) and 0 <= b < 64:
                return a << b
        return None

    def num_warps(self) -> int | None:
        return self.const_int(self.options.get("num_warps"))


def kernel_views(pm: ParsedModule) -> list[KernelView]:
    return [
        KernelView(pm, k, pm.kernel_nodes[k.name])
        for k in pm.index.kernels
        if k.name in pm.kernel_nodes
    ]


def launch_views(pm: ParsedModule, kernels: list[KernelView]) -> list[LaunchView]:
    by_name = {kv.name: kv for kv in kernels}
    out = []
    for site, call in pm.launch_nodes:
        kv = by_name.get(site.kernel)
        if kv is None:
            continue
        launcher = pm.function_nodes.get(site.launcher) if site.launcher else None
        out.append(LaunchView(pm, site, call, kv, launcher))
    return out
