"""Dispatch across shape buckets: when the best variant differs between cases, one module that
calls each winner's launcher for the cases it wins, behind a size test in the entry.

The size test is one feature (a dimension or element count of an argument) and a threshold, chosen
with the two variants so that the pair's geomean speedup over all cases is the best; it is a
dispatch guard, so the policy gate allows it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..evaluate.messages import CaseLaunches
from ..evaluate.stats import geomean
from ..mutate.edits import Edits


@dataclass(frozen=True)
class Split:
    expr: str  # e.g. "x.shape[1]"
    threshold: int
    above: bool  # the second variant takes cases whose feature is above the threshold


def _features(case: CaseLaunches, params: list[str]) -> dict[str, int]:
    """Size features of the entry's tensor arguments: innermost dimension first (row length
    usually decides the regime), then outer ones, then element counts."""
    out: dict[str, int] = {}
    for i, a in enumerate(case.entry_args[: len(params)]):
        if a.kind != "ptr":
            continue
        for d in reversed(range(len(a.shape))):
            out[f"{{{i}}}.shape[{d}]"] = a.shape[d]
        out[f"{{{i}}}.numel()"] = a.numel
    return out


@dataclass(frozen=True)
class Choice:
    """Two variants and the split between them, with the geomean speedup the pair reaches."""

    a: str  # takes the cases on or below the threshold
    b: str  # takes the cases above it
    split: Split
    speedup: float


def _geomean(xs: list[float]) -> float:
    """Speedups of 0 (a case whose estimate is not finite) count as tiny, not as an error."""
    return geomean([max(x, 1e-9) for x in xs])


def best_split(cases: list[CaseLaunches], speedups: dict[str, list[float]], entry_params: list[str],
               margin: float = 0.01) -> Choice | None:
    """The pair of variants and the size split that together give the best geomean speedup, if
    that beats the best single variant by `margin`.

    Every (feature, threshold, low variant, high variant) is scored on the per-case speedups, so
    near-ties between variants cannot put a case in the wrong bucket. (Assigning each case to its
    own winner first and then looking for a separating size did: on an H200 softmax search a
    0.1% tie on one case moved the 4096-wide rows to the variant 21% slower there.)
    """
    n = len(cases)
    feats = [_features(c, entry_params) for c in cases]
    rows = {k: v for k, v in sorted(speedups.items()) if len(v) == n}
    if n < 2 or not all(feats) or len(rows) < 2:
        return None
    overall = {k: _geomean(v) for k, v in rows.items()}
    single = max(overall.values())

    def best_on(side: list[bool]) -> str:  # ties: the better variant overall, then the id
        return max(rows, key=lambda k: (_geomean([x for x, s in zip(rows[k], side) if s]), overall[k], k))

    best: Choice | None = None
    for name in feats[0]:
        values = [f.get(name) for f in feats]
        if any(v is None for v in values):
            continue
        for t in sorted(set(values))[:-1]:  # type: ignore[type-var]
            low = [v <= t for v in values]  # type: ignore[operator]
            best_low, best_high = best_on(low), best_on([not lo for lo in low])
            if best_low == best_high:
                continue
            g = _geomean([rows[best_low][i] if low[i] else rows[best_high][i] for i in range(n)])
            if best is None or g > best.speedup * (1 + 1e-9):  # the first feature wins a tie
                best = Choice(best_low, best_high, Split(name, int(t), True), g)  # type: ignore[arg-type]
    if best is None or best.speedup < single * (1 + margin):
        return None
    return best


def _top(tree: ast.Module) -> dict[str, ast.stmt]:
    return {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def build(source_a: str, source_b: str, kernel: str, entry: str, split: Split) -> str | None:
    """Module A with B's launcher (and kernel, when it differs) added under new names, and A's
    entry dispatching to it on one side of the split."""
    tree_a, tree_b = ast.parse(source_a), ast.parse(source_b)
    top_a, top_b = _top(tree_a), _top(tree_b)
    entry_a, entry_b = top_a.get(entry), top_b.get(entry)
    if not isinstance(entry_a, ast.FunctionDef) or not isinstance(entry_b, ast.FunctionDef):
        return None
    params = [a.arg for a in entry_a.args.args]
    feature = split.expr
    for i, p in enumerate(params):
        feature = feature.replace(f"{{{i}}}", p)
    if "{" in feature:
        return None
    bucket_entry = f"{entry}_bucket"
    bucket_kernel = f"{kernel}_bucket"
    same_kernel = ast.dump(top_a.get(kernel)) == ast.dump(top_b.get(kernel))  # type: ignore[arg-type]
    seg_b = source_b.splitlines()

    def text_of(node: ast.stmt) -> str:
        first = node.decorator_list[0].lineno if getattr(node, "decorator_list", None) else node.lineno
        return "\n".join(seg_b[first - 1: node.end_lineno])

    added = []
    if not same_kernel:
        added.append(text_of(top_b[kernel]).replace(f"def {kernel}(", f"def {bucket_kernel}(", 1))
    launcher = text_of(entry_b).replace(f"def {entry}(", f"def {bucket_entry}(", 1)
    if not same_kernel:
        launcher = launcher.replace(f"{kernel}[", f"{bucket_kernel}[")
    added.append(launcher)
    for name, node in top_b.items():  # helpers B needs that A lacks
        if name not in top_a and name not in (kernel, entry):
            added.append(text_of(node))
    op = ">" if split.above else "<="
    call_args = ", ".join(params)
    edits = Edits(source_a)
    first_stmt = entry_a.body[0]
    if isinstance(first_stmt, ast.Expr) and isinstance(first_stmt.value, ast.Constant) and len(entry_a.body) > 1:
        first_stmt = entry_a.body[1]  # after the docstring
    edits.insert_before(first_stmt, f"if {feature} {op} {split.threshold}:  # shape bucket: the other variant wins here\n"
                                    f"    return {bucket_entry}({call_args})")
    edits.insert_after(entry_a, "\n\n\n" + "\n\n\n".join(added))
    return edits.apply()
