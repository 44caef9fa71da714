"""Minimal, position-exact source edits, so a variant's diff shows only what changed.

AST nodes give (line, byte column) positions; edits are applied from the end of the file
backwards so earlier offsets stay valid. Whole-function rewrites replace just that function.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field


@dataclass
class Edits:
    source: str
    _edits: list[tuple[int, int, str]] = field(default_factory=list)
    _new_keywords: dict[int, tuple[ast.Call, list[str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._line_starts = [0]
        for line in self.source.splitlines(keepends=True):
            self._line_starts.append(self._line_starts[-1] + len(line))

    def offset(self, line: int, byte_col: int) -> int:
        """Offset in `source` of a 1-based line and a UTF-8 byte column (as `ast` reports them)."""
        start = self._line_starts[line - 1]
        end = self._line_starts[line] if line < len(self._line_starts) else len(self.source)
        text = self.source[start:end]
        return start + len(text.encode("utf-8")[:byte_col].decode("utf-8", "ignore"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (
            self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
            self.offset(node.end_lineno, node.end_col_offset),
        )  # type: ignore[attr-defined]

    def text(self, node: ast.AST) -> str:
        a, b = self.span(node)
        return self.source[a:b]

    def replace(self, node: ast.AST, text: str) -> "Edits":
        a, b = self.span(node)
        self._edits.append((a, b, text))
        return self

    def replace_function(self, fn: ast.FunctionDef, new: ast.FunctionDef) -> "Edits":
        """Replace a function by a rewritten one. Statements the rewrite left unchanged keep
        their original text, comments included, so the diff shows only what changed."""
        lines = self.source.splitlines()
        originals = _Originals(fn, new, lines)
        if ast.dump(new.args) == ast.dump(fn.args):
            header = lines[
                (fn.decorator_list[0] if fn.decorator_list else fn).lineno - 1 : fn.body[0].lineno
                - 1
            ]
            while header and header[-1].strip().startswith("#"):
                header.pop()  # those belong to the first statement
        else:
            header = self._header_with_new_params(fn, new)
        body_indent = fn.body[0].col_offset
        body = _render(new.body, body_indent, originals)
        first = fn.decorator_list[0] if fn.decorator_list else fn
        start = self.offset(first.lineno, 0)
        end_col = fn.end_col_offset
        last = lines[fn.end_lineno - 1]  # type: ignore[operator]
        if last[end_col:].strip().startswith("#"):
            end_col = len(last)  # the body's text carries the last line's trailing comment
        end = self.offset(fn.end_lineno, end_col)  # type: ignore[arg-type]
        self._edits.append((start, end, "\n".join(header + body)))
        return self

    def _header_with_new_params(self, fn: ast.FunctionDef, new: ast.FunctionDef) -> list[str]:
        old, added = fn.args.args, new.args.args[len(fn.args.args) :]
        same_prefix = [a.arg for a in new.args.args[: len(old)]] == [a.arg for a in old]
        first = fn.decorator_list[0] if fn.decorator_list else fn
        if not (same_prefix and old and added and not fn.args.kwonlyargs and not fn.args.vararg):
            indent = " " * fn.col_offset
            decos = [indent + "@" + ast.unparse(d) for d in new.decorator_list]
            return decos + [indent + f"def {new.name}({ast.unparse(new.args)}):"]
        defaults = (
            dict(zip([a.arg for a in new.args.args][-len(new.args.defaults) :], new.args.defaults))
            if new.args.defaults
            else {}
        )
        extra = ", ".join(
            ast.unparse(a) + (f"={ast.unparse(defaults[a.arg])}" if a.arg in defaults else "")
            for a in added
        )
        header_end = self.offset(fn.body[0].lineno, 0)
        # after the last parameter's default where it has one (defaults belong to the last ones)
        last = fn.args.defaults[-1] if fn.args.defaults else old[-1]
        at = self.offset(last.end_lineno, last.end_col_offset)
        text = (
            self.source[self.offset(first.lineno, 0) : at]
            + ", "
            + extra
            + self.source[at:header_end]
        )
        lines = text.rstrip("\n").splitlines()
        while lines and lines[-1].strip().startswith("#"):
            lines.pop()
        return lines

    def insert_before(self, stmt: ast.stmt, code: str) -> "Edits":
        """Insert whole lines of `code` before a statement, at its indentation."""
        start = self.offset(stmt.lineno, 0)
        indent = " " * stmt.col_offset
        block = "".join(indent + line + "\n" for line in code.strip("\n").splitlines())
        self._edits.append((start, start, block))
        return self

    def insert_after(self, node: ast.AST, text: str) -> "Edits":
        """Insert `text` right after a node's last character."""
        at = self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        self._edits.append((at, at, text))
        return self

    def insert_line(self, lineno: int, text: str) -> "Edits":
        """Insert `text` (whole lines) at the start of a 1-based line."""
        at = self.offset(lineno, 0)
        self._edits.append((at, at, text if text.endswith("\n") else text + "\n"))
        return self

    def add_keyword(self, call: ast.Call, name: str, value: str) -> "Edits":
        """Add `name=value` to a call, or replace the value when the keyword exists."""
        for k in call.keywords:
            if k.arg == name:
                return self.replace(k.value, value)
        self._new_keywords.setdefault(id(call), (call, []))[1].append(f"{name}={value}")
        return self

    def _keyword_insertions(self) -> list[tuple[int, int, str]]:
        """New keywords after a call's last argument; where the call passes a dict it cannot see
        into (`**config`), merged into that dict instead (`**{**config, "num_warps": 8}`), which
        overrides what the dict holds rather than passing the keyword twice."""
        out = []
        for call, items in self._new_keywords.values():
            opaque = [k for k in call.keywords if k.arg is None]
            if opaque:
                value = opaque[-1].value
                a, b = self.span(value)
                merged = ", ".join(
                    f'"{name}": {val}' for name, val in (item.split("=", 1) for item in items)
                )
                out.append((a, b, f"{{**{self.source[a:b]}, {merged}}}"))
                continue
            args = list(call.args) + list(call.keywords)
            if args:  # right after the last argument, so a trailing comma stays where it was
                last = max(args, key=lambda a: (a.end_lineno, a.end_col_offset))
                at = self.offset(last.end_lineno, last.end_col_offset)
                out.append((at, at, ", " + ", ".join(items)))
            else:
                at = self.offset(call.end_lineno, call.end_col_offset) - 1
                out.append((at, at, ", ".join(items)))
        return out

    def remove_keyword(self, call: ast.Call, name: str) -> "Edits":
        for i, k in enumerate(call.keywords):
            if k.arg != name:
                continue
            a, b = self.offset(k.lineno, k.col_offset), self.offset(k.end_lineno, k.end_col_offset)
            # take the separating comma with it (the one before, else the one after)
            before = self.source[:a].rstrip()
            if before.endswith(","):
                a = len(before) - 1
            else:
                after = self.source[b:]
                stripped = after.lstrip()
                if stripped.startswith(","):
                    b += len(after) - len(stripped) + 1
            self._edits.append((a, b, ""))
            return self
        return self

    def apply(self) -> str:
        out = self.source
        for a, b, text in sorted(
            self._edits + self._keyword_insertions(), key=lambda e: (e[0], e[1]), reverse=True
        ):
            out = out[:a] + text + out[b:]
        return out


class _Originals:
    """The original text of a function's statements, for rendering its rewrite.

    A statement the rewrite left unchanged keeps its lines, the comments above it included. A
    simple statement the rewrite changed (found by the first line it kept from the original,
    `ast` positions surviving `copy.deepcopy`) keeps the comment lines above it and its trailing
    comment: rewriting `t = 2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0  # tanh(inner)` must not
    drop the user's `# tanh(inner)`. A changed statement whose original also survives unchanged
    elsewhere (single-pass copies a loop body's load into a new branch) carries none: the
    unchanged copy keeps them, and a copy of "# second pass" above the new one would mislead."""

    def __init__(self, fn: ast.FunctionDef, new: ast.FunctionDef, lines: list[str]):
        self.lines = lines
        self.texts: dict[str, list[str]] = {}
        self.by_line: dict[
            int, tuple[ast.stmt, int]
        ] = {}  # first line -> (statement, first comment line)
        self._visit(fn.body)
        kept = {ast.dump(s) for s in ast.walk(new) if isinstance(s, ast.stmt)} & self.texts.keys()
        self.by_line = {
            line: entry for line, entry in self.by_line.items() if ast.dump(entry[0]) not in kept
        }

    def _visit(self, stmts: list[ast.stmt]) -> None:
        prev_end = None
        for st in stmts:
            start = st.lineno - 1
            while (
                start - 1 >= 0
                and (prev_end is None or start - 1 >= prev_end)
                and self.lines[start - 1].strip().startswith("#")
            ):
                start -= 1
            self.texts.setdefault(ast.dump(st), self.lines[start : st.end_lineno])  # type: ignore[misc]
            if not any(
                isinstance(getattr(st, f, None), list)
                for f in ("body", "orelse", "finalbody", "handlers")
            ):
                self.by_line.setdefault(st.lineno, (st, start))
            prev_end = st.end_lineno
            for field_name in ("body", "orelse", "finalbody"):
                inner = getattr(st, field_name, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    self._visit(inner)

    def comments_of(self, st: ast.stmt) -> tuple[list[str], str]:
        """(comment lines above, trailing comment) of the original a changed statement came from,
        each handed out once; nothing for a statement the rewrite made up."""
        entry = self.by_line.get(getattr(st, "lineno", -1))
        if entry is None or type(entry[0]) is not type(st):
            return [], ""
        original, start = self.by_line.pop(st.lineno)
        last = (
            self.lines[original.end_lineno - 1]
            .encode("utf-8")[original.end_col_offset :]
            .decode("utf-8", "ignore")
        )  # type: ignore[index, operator]
        trailing = last.strip()
        return self.lines[start : original.lineno - 1], (
            "  " + trailing if trailing.startswith("#") else ""
        )


def _reindent(text: list[str], indent: int) -> list[str]:
    current = min((len(l) - len(l.lstrip()) for l in text if l.strip()), default=0)
    return [(" " * indent + l[current:]) if l.strip() else "" for l in text]


def _render(stmts: list[ast.stmt], indent: int, originals: _Originals) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    for st in stmts:
        key = ast.dump(st)
        if key in originals.texts:
            out += _reindent(originals.texts[key], indent)
        elif isinstance(st, ast.If):
            out.append(f"{pad}if {ast.unparse(st.test)}:")
            out += _render(st.body, indent + 4, originals)
            if st.orelse:
                out.append(f"{pad}else:")
                out += _render(st.orelse, indent + 4, originals)
        elif isinstance(st, ast.For):
            out.append(f"{pad}for {ast.unparse(st.target)} in {ast.unparse(st.iter)}:")
            out += _render(st.body, indent + 4, originals)
        elif isinstance(st, ast.While):
            out.append(f"{pad}while {ast.unparse(st.test)}:")
            out += _render(st.body, indent + 4, originals)
        else:
            above, trailing = originals.comments_of(st)
            code = [pad + line for line in ast.unparse(st).splitlines()]
            code[-1] += trailing
            out += _reindent(above, indent) + code
    return out
