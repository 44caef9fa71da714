"""Dispatch across shape buckets: when the best variant differs between cases, one module that
calls each winner's launcher for the cases it wins, behind a size test in the entry.

The size test is one feature (a dimension or element count of an argument) and one threshold
per boundary between buckets, chosen with each bucket's variant so that the geomean speedup
over all cases is the best; it is a dispatch guard, so the policy gate allows it.
"""

from __future__ import annotations

import ast
import itertools
import re
from dataclasses import dataclass

from ..api.facts import CaseLaunches
from ..api.stats import geomean
from ..mutate.edits import Edits


def _features(case: CaseLaunches, params: list[str]) -> dict[str, int]:
    """Size features of the entry's tensor arguments, in terms that hold for an input of any
    rank: the innermost size (row length usually decides the regime), the rows (elements over
    the innermost size) and the element count. A guard on `x.shape[1]` sent 1-D inputs the
    original accepted to an IndexError, and 3-D ones to the bucket of their sequence length."""
    out: dict[str, int] = {}
    for i, a in enumerate(case.entry_args[: len(params)]):
        if a.kind != "ptr" or not a.shape:
            continue
        inner = a.shape[-1]
        out[f"{{{i}}}.shape[-1]"] = inner
        if len(a.shape) >= 2:
            out[f"({{{i}}}.numel() // max({{{i}}}.shape[-1], 1))"] = a.numel // max(inner, 1)
        out[f"{{{i}}}.numel()"] = a.numel
    return out


@dataclass(frozen=True)
class Choice:
    """Variants per shape bucket along one size feature, with the geomean speedup they reach.
    Bucket i < len(thresholds) takes the cases whose feature is at most thresholds[i] (and above
    the threshold before it); the last bucket takes the rest. Neighbouring buckets differ."""

    variants: tuple[str, ...]
    feature: str  # e.g. "{0}.shape[-1]": the entry's first argument's innermost dimension
    thresholds: tuple[int, ...]
    speedup: float


def bucket_index(value: int, thresholds: tuple[int, ...] | list[int]) -> int:
    """The bucket a feature value falls in (see `Choice`)."""
    return next((i for i, t in enumerate(thresholds) if value <= t), len(thresholds))


def condition(feature: str, thresholds: tuple[int, ...], i: int) -> str:
    """The test that selects bucket i, as Python source (see `Choice`)."""
    if i == 0:
        return f"{feature} <= {thresholds[0]}"
    if i == len(thresholds):
        return f"{feature} > {thresholds[-1]}"
    return f"{thresholds[i - 1]} < {feature} <= {thresholds[i]}"


def _geomean(xs: list[float]) -> float:
    """Speedups of 0 (a case whose estimate is not finite) count as tiny, not as an error."""
    return geomean([max(x, 1e-9) for x in xs])


def best_split(
    cases: list[CaseLaunches],
    speedups: dict[str, list[float]],
    entry_params: list[str],
    margin: float = 0.01,
) -> Choice | None:
    """The shape buckets along one size feature, and the variant for each, that together give
    the best geomean speedup, if that beats the best single variant by `margin`; each further
    bucket must pay for itself by `margin` too.

    Every (feature, cut points) is scored with each bucket's best variant on the per-case
    speedups of that bucket, so near-ties between variants cannot put a case in the wrong bucket.
    (Assigning each case to its own winner first and then looking for a separating size did: on
    an H200 softmax search a 0.1% tie on one case moved the 4096-wide rows to the variant 21%
    slower there.) More than two buckets because a middle size can want its own structure: H200
    col_sum, one program per column strip wins 16384x4096 and loses 65536x1024 (16 programs)
    and 1024x65536 to the coarsened atomics.
    """
    n = len(cases)
    feats = [_features(c, entry_params) for c in cases]
    rows = {k: v for k, v in sorted(speedups.items()) if len(v) == n}
    if n < 2 or not all(feats) or len(rows) < 2:
        return None
    overall = {k: _geomean(v) for k, v in rows.items()}
    single = max(overall.values())

    def best_on(side: list[bool]) -> str:  # ties: the better variant overall, then the id
        return max(
            rows, key=lambda k: (_geomean([x for x, s in zip(rows[k], side) if s]), overall[k], k)
        )

    by_count: dict[int, Choice] = {}  # the best choice with this many buckets
    for name in feats[0]:
        values = [f.get(name) for f in feats]
        if any(v is None for v in values):
            continue
        cuts = sorted(set(values))[:-1]  # type: ignore[type-var]
        for r in range(1, len(cuts) + 1):
            for chosen in itertools.combinations(cuts, r):
                bounds = list(chosen)
                bucket = [bucket_index(v, bounds) for v in values]
                names = [best_on([b == i for b in bucket]) for i in range(len(bounds) + 1)]
                # neighbouring buckets with one variant are one bucket
                merged_names, merged_bounds = [names[0]], []
                for t, nm in zip(bounds, names[1:]):
                    if nm != merged_names[-1]:
                        merged_bounds.append(t)
                        merged_names.append(nm)
                if len(merged_names) < 2:
                    continue
                g = _geomean([rows[names[b]][i] for i, b in enumerate(bucket)])
                k = len(merged_names)
                if k not in by_count or g > by_count[k].speedup * (
                    1 + 1e-9
                ):  # the first feature wins a tie
                    by_count[k] = Choice(
                        tuple(merged_names), name, tuple(int(t) for t in merged_bounds), g
                    )
    best, best_speedup = None, single
    for k in sorted(by_count):
        if by_count[k].speedup >= best_speedup * (1 + margin):
            best, best_speedup = by_count[k], by_count[k].speedup
    return best


def _top(tree: ast.Module) -> dict[str, ast.stmt]:
    return {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def build(
    sources: list[str], kernel: str, entry: str, feature: str, thresholds: tuple[int, ...]
) -> str | None:
    """The first bucket's module with every other bucket's launcher (and kernel, where it differs
    from the first's) added under numbered names, and its entry dispatching to them by
    `feature` (e.g. "{0}.shape[-1]") against `thresholds` (see `Choice`)."""
    base_tree = ast.parse(sources[0])
    top_a = _top(base_tree)
    entry_a = top_a.get(entry)
    if not isinstance(entry_a, ast.FunctionDef) or len(sources) != len(thresholds) + 1:
        return None
    params = [a.arg for a in entry_a.args.args]
    for i, p in enumerate(params):
        feature = feature.replace(f"{{{i}}}", p)
    if "{" in feature:
        return None
    call_args = ", ".join(params)
    known = set(top_a)
    added, guards = [], []
    for i, source in enumerate(sources[1:], start=1):
        top_b = _top(ast.parse(source))
        entry_b = top_b.get(entry)
        if not isinstance(entry_b, ast.FunctionDef):
            return None
        lines = source.splitlines()

        def text_of(node: ast.stmt, decorated: bool = True) -> str:
            first = (
                node.decorator_list[0].lineno
                if decorated and getattr(node, "decorator_list", None)
                else node.lineno
            )
            return "\n".join(lines[first - 1 : node.end_lineno])

        bucket_entry, bucket_kernel = f"{entry}_bucket{i}", f"{kernel}_bucket{i}"
        same_kernel = ast.dump(top_a.get(kernel)) == ast.dump(top_b.get(kernel))  # type: ignore[arg-type]
        # The bucket's launcher is called from inside the decorated entry, so the entry's
        # decorators already apply; copied, one that registers a name (a custom operator's
        # `@torch.library.triton_op("ns::op")`) would register it twice and fail the import.
        launcher = text_of(entry_b, decorated=False).replace(
            f"def {entry}(", f"def {bucket_entry}(", 1
        )
        if not same_kernel:
            added.append(
                text_of(top_b[kernel]).replace(f"def {kernel}(", f"def {bucket_kernel}(", 1)
            )
            # `kernel[grid](...)` and `wrap_triton(kernel)[grid](...)` launch the bucket's kernel
            launcher = re.sub(
                rf"\b{re.escape(kernel)}\b(?=\s*(\[|\)\s*\[))", bucket_kernel, launcher
            )
        added.append(launcher)
        for name, node in top_b.items():  # helpers this bucket needs that the module lacks
            if name not in known and name not in (kernel, entry):
                known.add(name)
                added.append(text_of(node))
        guards.append(
            f"if {condition(feature, thresholds, i)}:  # shape bucket {i}: another variant wins here\n"
            f"    return {bucket_entry}({call_args})"
        )
    edits = Edits(sources[0])
    first_stmt = entry_a.body[0]
    if (
        isinstance(first_stmt, ast.Expr)
        and isinstance(first_stmt.value, ast.Constant)
        and len(entry_a.body) > 1
    ):
        first_stmt = entry_a.body[1]  # after the docstring
    edits.insert_before(first_stmt, "\n".join(guards))
    edits.insert_after(entry_a, "\n\n\n" + "\n\n\n".join(added))
    return edits.apply()
