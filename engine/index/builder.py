"""Build a `FileIndex` from Python source with the standard `ast` module.

Never imports triton (the language server depends on this) and never raises on bad input:
a file with syntax errors is parsed chunk by chunk, so the kernels in the intact parts are
still found, and the errors are returned alongside.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field

import msgspec

from .model import AutotuneConfig, FileIndex, Kernel, Launcher, LaunchSite, Param, ParseError, Span

TRITON_DECORATORS = ("triton.jit", "triton.autotune", "triton.heuristics")
_MAX_RECOVERY_ATTEMPTS = 25


@dataclass
class ImportAliases:
    """How this file spells `triton` and `triton.language` (aliases, from-imports)."""

    names: dict[str, str] = field(default_factory=dict)  # local name -> canonical dotted name

    def canonical(self, node: ast.AST) -> str | None:
        """`tl.constexpr` -> `triton.language.constexpr`, `jit` -> `triton.jit`, etc."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        # `tl` is so conventional that an unimported `tl` (a snippet, a broken file) still means it.
        head = self.names.get(node.id, "triton.language" if node.id == "tl" else node.id)
        return ".".join([head, *reversed(parts)])


@dataclass
class ParsedModule:
    """The index plus the syntax tree nodes the static rules need."""

    path: str
    source: str
    lines: list[str]
    tree: ast.Module | None
    index: FileIndex
    aliases: ImportAliases
    kernel_nodes: dict[str, ast.FunctionDef] = field(default_factory=dict)
    launch_nodes: list[tuple[LaunchSite, ast.Call]] = field(default_factory=list)
    function_nodes: dict[str, ast.FunctionDef] = field(default_factory=dict)
    module_constants: dict[str, ast.expr] = field(default_factory=dict)
    # `compiled = K.warmup(...)` then `compiled[grid](...)`: the warmup call (a launch node,
    # where the arguments and launch options are written) -> the compiled kernel's launch (where
    # the grid is), by id of the warmup call.
    compiled_launches: dict[int, ast.Call] = field(default_factory=dict)

    def span(self, node: ast.AST) -> Span:
        return node_span(self.lines, node)

    def text(self, node: ast.AST) -> str:
        return ast.unparse(node)


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def build_index(source: str, path: str = "<memory>") -> FileIndex:
    return parse_module(source, path).index


def parse_module(source: str, path: str = "<memory>") -> ParsedModule:
    lines = source.splitlines()
    tree, errors = parse_with_recovery(source)
    pm = ParsedModule(
        path=path,
        source=source,
        lines=lines,
        tree=tree,
        index=FileIndex(path, source_hash(source), [], [], errors, False),
        aliases=ImportAliases(),
    )
    if tree is None:
        return pm
    _Indexer(pm).run()
    return pm


def parse_with_recovery(source: str) -> tuple[ast.Module | None, list[ParseError]]:
    """Parse; on a syntax error blank out the top-level chunk holding it and try again."""
    errors: list[ParseError] = []
    lines = source.splitlines(keepends=True)
    text = source
    for _ in range(_MAX_RECOVERY_ATTEMPTS):
        try:
            return ast.parse(text), errors
        except SyntaxError as exc:
            line = max((exc.lineno or 1) - 1, 0)
            errors.append(ParseError(exc.msg, line, max((exc.offset or 1) - 1, 0)))
            start, end = _chunk_around(lines, min(line, max(len(lines) - 1, 0)))
            if start >= end:
                return None, errors
            lines = lines[:start] + ["\n"] * (end - start) + lines[end:]
            text = "".join(lines)
        except (ValueError, RecursionError, MemoryError) as exc:  # e.g. NUL bytes, absurd nesting
            errors.append(ParseError(f"{type(exc).__name__}: {exc}", 0, 0))
            return None, errors
    return None, errors


def _is_chunk_start(line: str) -> bool:
    if not line or line[0] in " \t\r\n#)]}":
        return False
    word = line.split(None, 1)[0].rstrip(":")
    return word not in ("else", "elif", "except", "finally", "case")


def _chunk_around(lines: list[str], line: int) -> tuple[int, int]:
    start = line
    while start > 0 and not _is_chunk_start(lines[start]):
        start -= 1
    while start > 0 and lines[start - 1].startswith("@"):
        start -= 1
    end = line + 1
    while end < len(lines) and not _is_chunk_start(lines[end]):
        end += 1
    return start, max(end, start + 1)


def _collect_aliases(imports: list[ast.stmt]) -> ImportAliases:
    names: dict[str, str] = {}
    for node in imports:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "triton" or a.name.startswith("triton."):
                    names[a.asname or a.name.split(".")[0]] = (
                        a.name if a.asname else a.name.split(".")[0]
                    )
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.split(".")[0] == "triton"
        ):
            for a in node.names:
                names[a.asname or a.name] = f"{node.module}.{a.name}"
    return ImportAliases(names)


def _to_char_col(line: str, byte_col: int) -> int:
    if line.isascii():
        return byte_col
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", "ignore"))


def node_span(lines: list[str], node: ast.AST) -> Span:
    line = getattr(node, "lineno", 1) - 1
    end_line = (getattr(node, "end_lineno", None) or line + 1) - 1
    col = getattr(node, "col_offset", 0)
    end_col = getattr(node, "end_col_offset", None) or col
    if 0 <= line < len(lines):
        col = _to_char_col(lines[line], col)
    if 0 <= end_line < len(lines):
        end_col = _to_char_col(lines[end_line], end_col)
    return Span(line, col, end_line, end_col)


def literal(node: ast.AST | None):
    """The Python value of a literal expression, or its source text when it is not one."""
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return ast.unparse(node)


class _Indexer:
    """Builds a file's `FileIndex`: kernels, parameters, autotune configs, helpers, launch sites.

    Long because one AST walk records every fact of the index, so a file is visited once.
    """

    def __init__(self, pm: ParsedModule):
        self.pm = pm
        self.tree = pm.tree
        self.aliases = pm.aliases
        self._subscript_calls: list[tuple[ast.Call, tuple[str, ...]]] = []
        self._warmup_calls: list[tuple[ast.Call, tuple[str, ...]]] = []

    def _scan(self) -> list[ast.stmt]:
        """One pass over the tree (it dominates indexing time on large files): records
        functions by qualified name, `x[...](...)` calls with their scope, and imports."""
        assert self.tree is not None
        imports: list[ast.stmt] = []
        functions = self.pm.function_nodes
        stack: list[tuple[ast.AST, tuple[str, ...]]] = [(self.tree, ())]
        while stack:
            node, scope = stack.pop()
            for child in ast.iter_child_nodes(node):
                kind = type(child)
                if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
                    inner = scope + (child.name,)
                    functions[".".join(inner)] = child  # type: ignore[assignment]
                    stack.append((child, inner))
                    continue
                if kind is ast.ClassDef:
                    stack.append((child, scope + (child.name,)))
                    continue
                if kind is ast.Import or kind is ast.ImportFrom:
                    imports.append(child)  # type: ignore[arg-type]
                elif kind is ast.Call and type(child.func) is ast.Subscript:  # type: ignore[attr-defined]
                    self._subscript_calls.append((child, scope))  # type: ignore[arg-type]
                elif (
                    kind is ast.Call
                    and type(child.func) is ast.Attribute  # type: ignore[attr-defined]
                    and child.func.attr == "warmup"  # type: ignore[attr-defined]
                ):
                    self._warmup_calls.append((child, scope))  # type: ignore[arg-type]
                stack.append((child, scope))
        return imports

    def run(self) -> None:
        pm = self.pm
        assert self.tree is not None
        for node in self.tree.body:
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                pm.module_constants[node.targets[0].id] = node.value
        pm.aliases = self.aliases = _collect_aliases(self._scan())
        kernel_defs: dict[str, tuple[ast.FunctionDef, list[str]]] = {}
        assigned = self._decorated_by_assignment()
        for qual, node in sorted(pm.function_nodes.items(), key=lambda q: q[1].lineno):
            wrappers = assigned.get(qual, [])
            if isinstance(node, ast.FunctionDef) and (node.decorator_list or wrappers):
                found = (self._decorator_name(x) for x in [*node.decorator_list, *wrappers])
                decos = [d for d in found if d]
                if any(d in TRITON_DECORATORS for d in decos):
                    kernel_defs.setdefault(node.name, (node, decos))
        launches = self._launch_sites(set(kernel_defs))
        kernels = []
        for name, (node, decos) in kernel_defs.items():
            pm.kernel_nodes[name] = node
            kernels.append(self._kernel(node, decos, set(kernel_defs), launches))
        # A jit function never launched here but called from another kernel is a helper.
        called = {h for k in kernels for h in k.helpers}
        kernels = [
            msgspec.structs.replace(k, is_helper=(k.name in called and not k.launch_sites))
            for k in kernels
        ]
        launchers: dict[str, list[str]] = {}
        for site, _ in launches:
            if site.launcher:
                launchers.setdefault(site.launcher, [])
                if site.kernel not in launchers[site.launcher]:
                    launchers[site.launcher].append(site.kernel)
        launcher_list = []
        for qual, knames in launchers.items():
            fn = pm.function_nodes[qual]
            launcher_list.append(
                Launcher(qual, node_span(pm.lines, fn), [a.arg for a in fn.args.args], knames)
            )
        pm.launch_nodes = launches
        pm.index = FileIndex(
            path=pm.path,
            source_hash=pm.index.source_hash,
            kernels=sorted(kernels, key=lambda k: k.span.line),
            launchers=launcher_list,
            errors=pm.index.errors,
            imports_triton=any(v.split(".")[0] == "triton" for v in self.aliases.names.values()),
        )

    def _decorated_by_assignment(self) -> dict[str, list[ast.expr]]:
        """Module functions wrapped by assignment, as some projects make kernels:
        `f = triton.jit(f)`, then `f = triton.heuristics({...})(f)`: the wrappers, outermost
        first, as the decorators they stand for."""
        out: dict[str, list[ast.expr]] = {}
        for stmt in self.tree.body:
            if not (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
            ):
                continue
            name, value, chain = stmt.targets[0].id, stmt.value, []
            while isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords:
                chain.append(value.func)
                value = value.args[0]
            if (
                isinstance(value, ast.Name)
                and value.id == name
                and chain
                and all(self._decorator_name(d) in TRITON_DECORATORS for d in chain)
            ):
                out[name] = chain + out.get(name, [])
        return out

    def _decorator_name(self, deco: ast.expr) -> str | None:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = self.aliases.canonical(target)
        if name in ("triton.runtime.jit", "triton.runtime.jit.jit", "triton.language.jit"):
            return "triton.jit"
        if name in ("triton.runtime.autotune", "triton.runtime.autotuner.autotune"):
            return "triton.autotune"
        if name in ("triton.runtime.heuristics", "triton.runtime.autotuner.heuristics"):
            return "triton.heuristics"
        return name

    def _is_constexpr(self, annotation: ast.expr | None) -> bool:
        if annotation is None:
            return False
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            return annotation.value.endswith("constexpr")
        name = self.aliases.canonical(annotation) or ""
        return name in (
            "triton.language.constexpr",
            "triton.language.core.constexpr",
            "triton.constexpr",
        ) or (name == "constexpr")

    def _params(self, fn: ast.FunctionDef) -> list[Param]:
        args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
        defaults: dict[str, ast.expr] = {}
        positional = fn.args.posonlyargs + fn.args.args
        for a, d in zip(positional[len(positional) - len(fn.args.defaults) :], fn.args.defaults):
            defaults[a.arg] = d
        for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults):
            if d is not None:
                defaults[a.arg] = d
        return [
            Param(
                name=a.arg,
                constexpr=self._is_constexpr(a.annotation),
                annotation=ast.unparse(a.annotation) if a.annotation is not None else None,
                default=ast.unparse(defaults[a.arg]) if a.arg in defaults else None,
            )
            for a in args
        ]

    def _resolve_list(self, node: ast.expr | None) -> list[ast.expr]:
        if isinstance(node, ast.Name) and node.id in self.pm.module_constants:
            node = self.pm.module_constants[node.id]
        if isinstance(node, (ast.List, ast.Tuple)):
            return list(node.elts)
        return []

    def _autotune(self, fn: ast.FunctionDef) -> tuple[list[AutotuneConfig], list[str]]:
        configs: list[AutotuneConfig] = []
        key: list[str] = []
        for deco in fn.decorator_list:
            if not (isinstance(deco, ast.Call) and self._decorator_name(deco) == "triton.autotune"):
                continue
            kw = {k.arg: k.value for k in deco.keywords if k.arg}
            cfg_node = kw.get("configs", deco.args[0] if deco.args else None)
            key_node = kw.get("key", deco.args[1] if len(deco.args) > 1 else None)
            for c in self._resolve_list(cfg_node):
                if isinstance(c, ast.Call) and (self.aliases.canonical(c.func) or "").endswith(
                    "Config"
                ):
                    configs.append(self._config(c))
            key = [
                k for k in (literal(e) for e in self._resolve_list(key_node)) if isinstance(k, str)
            ]
        return configs, key

    def _config(self, call: ast.Call) -> AutotuneConfig:
        kwargs: dict = {}
        meta = (
            call.args[0]
            if call.args
            else next((k.value for k in call.keywords if k.arg == "kwargs"), None)
        )
        if isinstance(meta, ast.Dict):
            for k, v in zip(meta.keys, meta.values):
                key = literal(k)
                if isinstance(key, str):
                    val = literal(v)
                    kwargs[key] = (
                        val if isinstance(val, (int, float, bool, str)) or val is None else str(val)
                    )
        extra = {
            k.arg: literal(k.value) for k in call.keywords if k.arg in ("num_warps", "num_stages")
        }
        nw, ns = extra.get("num_warps"), extra.get("num_stages")
        return AutotuneConfig(
            kwargs=kwargs,
            num_warps=nw if isinstance(nw, int) else None,
            num_stages=ns if isinstance(ns, int) else None,
            span=node_span(self.pm.lines, call),
        )

    def _heuristics(self, fn: ast.FunctionDef) -> dict[str, str]:
        out: dict[str, str] = {}
        for deco in fn.decorator_list:
            if isinstance(deco, ast.Call) and self._decorator_name(deco) == "triton.heuristics":
                values = deco.args[0] if deco.args else next((k.value for k in deco.keywords), None)
                if isinstance(values, ast.Dict):
                    for k, v in zip(values.keys, values.values):
                        key = literal(k)
                        if isinstance(key, str):
                            out[key] = ast.unparse(v)
        return out

    def _launch_sites(self, kernel_names: set[str]) -> list[tuple[LaunchSite, ast.Call]]:
        """Every launch of a kernel of this file: `kernel[grid](...)`, and `kernel.warmup(...)`
        (ahead-of-time compilation with the launch's arguments and options) whose compiled kernel
        the same function launches later (`compiled[grid](...)`): that pair is one launch, its
        node the warmup call, its grid the compiled launch's."""
        sites: list[tuple[LaunchSite, ast.Call]] = []
        compiled = self._compiled_launches(kernel_names)
        calls = [(c, scope, "launch") for c, scope in self._subscript_calls]
        calls += [(c, scope, "warmup") for c, scope in self._warmup_calls]
        for call, scope, how in sorted(calls, key=lambda c: (c[0].lineno, c[0].col_offset)):
            name = launched_name(call.func.value)  # type: ignore[attr-defined]
            if name not in kernel_names:
                continue
            keywords = [k for k in call.keywords if k.arg]
            if how == "warmup":
                launch = compiled.get(id(call))
                grid_kw = next((k.value for k in keywords if k.arg == "grid"), None)
                grid = launch.func.slice if launch is not None else grid_kw  # type: ignore[attr-defined]
                keywords = [k for k in keywords if k.arg != "grid"]
                if launch is not None:
                    self.pm.compiled_launches[id(call)] = launch
            else:
                grid = call.func.slice  # type: ignore[attr-defined]
            sites.append(
                (
                    LaunchSite(
                        kernel=name,
                        span=node_span(self.pm.lines, call),
                        grid=ast.unparse(grid) if grid is not None else "",
                        args=[ast.unparse(a) for a in call.args],
                        kwargs={k.arg: ast.unparse(k.value) for k in keywords},  # type: ignore[misc]
                        launcher=self._launcher_of(list(scope)),
                    ),
                    call,
                )
            )
        return sites

    def _compiled_launches(self, kernel_names: set[str]) -> dict[int, ast.Call]:
        """`c = K.warmup(...)` in a function, then `c[grid](...)` later in the same function:
        the warmup call's id -> that launch (the last one before `c` is bound again)."""
        out: dict[int, ast.Call] = {}
        for fn in self.pm.function_nodes.values():
            bound: dict[str, ast.Call] = {}
            nodes = sorted(
                (n for n in ast.walk(fn) if isinstance(n, (ast.Assign, ast.Call))),
                key=lambda n: (n.lineno, n.col_offset),
            )
            for n in nodes:
                if isinstance(n, ast.Assign):
                    v = n.value
                    names = [t.id for t in n.targets if isinstance(t, ast.Name)]
                    is_warmup = (
                        isinstance(v, ast.Call)
                        and isinstance(v.func, ast.Attribute)
                        and v.func.attr == "warmup"
                        and isinstance(v.func.value, ast.Name)
                        and v.func.value.id in kernel_names
                    )
                    for t in names:
                        if is_warmup:
                            bound[t] = v  # type: ignore[assignment]
                        else:
                            bound.pop(t, None)
                elif (
                    isinstance(n.func, ast.Subscript)
                    and isinstance(n.func.value, ast.Name)
                    and n.func.value.id in bound
                ):
                    out[id(bound[n.func.value.id])] = n
        return out

    def _launcher_of(self, scope: list[str]) -> str | None:
        """The qualified name of the innermost enclosing function (classes included in the name)."""
        for i in range(len(scope), 0, -1):
            qual = ".".join(scope[:i])
            if qual in self.pm.function_nodes:
                return qual
        return None

    def _kernel(
        self, fn: ast.FunctionDef, decos: list[str], kernel_names: set[str], launches
    ) -> Kernel:
        configs, key = self._autotune(fn)
        helpers: list[str] = []
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if (
                    node.func.id in kernel_names
                    and node.func.id != fn.name
                    and node.func.id not in helpers
                ):
                    helpers.append(node.func.id)
        sites = [s for s, _ in launches if s.kernel == fn.name]
        first = fn.decorator_list[0] if fn.decorator_list else fn
        whole = node_span(self.pm.lines, fn)
        start = node_span(self.pm.lines, first)
        if fn.decorator_list:  # the decorator node starts after its "@"
            start = Span(start.line, max(start.col - 1, 0), start.end_line, start.end_col)
        line = self.pm.lines[fn.lineno - 1] if fn.lineno - 1 < len(self.pm.lines) else ""
        name_col = line.find(fn.name, max(fn.col_offset, 0))
        name_col = _to_char_col(line, name_col) if name_col >= 0 else whole.col
        return Kernel(
            name=fn.name,
            span=Span(start.line, start.col, whole.end_line, whole.end_col),
            name_span=Span(fn.lineno - 1, name_col, fn.lineno - 1, name_col + len(fn.name)),
            params=self._params(fn),
            decorators=[d for d in decos if d],
            autotune_configs=configs,
            autotune_key=key,
            heuristics=self._heuristics(fn),
            helpers=helpers,
            launch_sites=sites,
            launchers=sorted({s.launcher for s in sites if s.launcher}),
            docstring=ast.get_docstring(fn),
        )


def launched_name(target: ast.expr) -> str | None:
    """The kernel a launch `target[grid](...)` names: `kernel`, `module.kernel`, or the kernel
    handed to `torch.library.wrap_triton(kernel)` (a custom operator's launch, traceable by
    torch.compile), which launches it unchanged when run eagerly."""
    if isinstance(target, ast.Call) and target.args and len(target.args) == 1:
        f = target.func
        wrapper = (
            f.id if isinstance(f, ast.Name) else (f.attr if isinstance(f, ast.Attribute) else "")
        )
        if wrapper == "wrap_triton":
            target = target.args[0]
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    return None
