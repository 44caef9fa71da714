"""Compare an output with the expected one, with per-dtype tolerances (worker only)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .audit import unwritten

# The absolute tolerance is at most this fraction of the expected output's mean magnitude: an
# atol meant for values near 1 would otherwise let an all-zero answer pass for small outputs (a
# softmax over 32,768 columns holds values near 3e-5, well within atol 1e-2 of zero).
ATOL_MAGNITUDE_FRACTION = 0.1

# rtol, atol by the lower-precision dtype of the two sides, overridable per task.
TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1e-2, 1e-2),
}
_PRECISION_ORDER = [torch.bfloat16, torch.float16, torch.float32, torch.float64]


@dataclass
class Comparison:
    """The outcome of comparing one output; `reason` is None when it matches."""

    reason: str | None = (
        None  # "mismatch" | "unwritten-output" | "nan-output" | "shape" | "dtype" | "type"
    )
    message: str = ""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    mismatched: int = 0
    elements: int = 0

    @property
    def ok(self) -> bool:
        return self.reason is None


def Mismatch(
    reason, message, max_abs_err=None, max_rel_err=None, mismatched=0, elements=0
) -> Comparison:
    return Comparison(reason, message, max_abs_err, max_rel_err, mismatched, elements)


def tolerance(
    a: torch.dtype, b: torch.dtype, rtol: float | None, atol: float | None, scale: float = 1.0
):
    floats = [d for d in (a, b) if d in TOLERANCES]
    lowest = min(floats, key=_PRECISION_ORDER.index) if floats else torch.float32
    r, t = TOLERANCES[lowest]
    return (rtol if rtol is not None else r) * scale, (atol if atol is not None else t) * scale


class Results(dict):
    """What one call produced, by name: its returned value and each argument it writes
    (`results.py`). `flatten` names the leaves by these keys, so a mismatch says which result
    it is ("argument `out`: ...")."""


def flatten(x, path="out"):
    """(path, leaf) for every value of a nested output, in a stable order."""
    if isinstance(x, Results):
        for k in sorted(x):
            yield from flatten(x[k], k)
    elif isinstance(x, (tuple, list)):
        for i, item in enumerate(x):
            yield from flatten(item, f"{path}[{i}]")
    elif isinstance(x, dict):
        for k in sorted(x):
            yield from flatten(x[k], f"{path}[{k!r}]")
    else:
        yield path, x


def mean_magnitude(expected) -> float:
    """The mean absolute value of the finite elements of every floating-point tensor in
    `expected` (0.0 when there are none): the scale an output's rounding error is measured
    against."""
    total, count = 0.0, 0
    for _, w in flatten(expected):
        if isinstance(w, torch.Tensor) and w.dtype.is_floating_point and w.numel():
            wd = w.detach().to(torch.float64)
            finite = wd[torch.isfinite(wd)]
            total += float(finite.abs().sum())
            count += finite.numel()
    return total / count if count else 0.0


def compare(
    out, expected, rtol=None, atol=None, scale: float = 1.0, check_dtype_of=None
) -> Comparison:
    """Compare every value of `out` with `expected`. `check_dtype_of`: an output whose dtypes
    `out` must keep (the original kernel's), since the reference may compute in a wider type."""
    got, want = list(flatten(out)), list(flatten(expected))
    if len(got) != len(want):
        return Mismatch("type", f"returned {len(got)} values, expected {len(want)}")
    dtype_ref = dict(flatten(check_dtype_of)) if check_dtype_of is not None else {}
    total = Comparison()
    for (path, g), (_, w) in zip(got, want):
        if isinstance(w, torch.Tensor):
            if not isinstance(g, torch.Tensor):
                return Mismatch("type", f"{path}: returned {type(g).__name__}, expected a tensor")
            c = _compare_tensors(path, g, w, rtol, atol, scale, dtype_ref.get(path))
            if not c.ok:
                return c
            total.max_abs_err = max(total.max_abs_err or 0.0, c.max_abs_err or 0.0)
            total.max_rel_err = max(total.max_rel_err or 0.0, c.max_rel_err or 0.0)
            total.elements += c.elements
        elif isinstance(w, (int, float)) and not isinstance(w, bool):
            gv = float(g.item()) if isinstance(g, torch.Tensor) else g
            if not isinstance(gv, (int, float)) or abs(gv - w) > (atol or 1e-5) * scale + (
                rtol or 1e-4
            ) * scale * abs(w):
                return Mismatch("mismatch", f"{path}: {gv!r} != {w!r}")
            total.elements += 1
        elif g != w and not (g is None and w is None):
            return Mismatch("mismatch", f"{path}: {g!r} != {w!r}")
    return total


def _compare_tensors(
    path, g: torch.Tensor, w: torch.Tensor, rtol, atol, scale, orig: torch.Tensor | None
):
    if tuple(g.shape) != tuple(w.shape):
        return Mismatch("shape", f"{path}: shape {tuple(g.shape)}, expected {tuple(w.shape)}")
    if isinstance(orig, torch.Tensor) and g.dtype != orig.dtype:  # the reference may compute wider
        return Mismatch("dtype", f"{path}: dtype {g.dtype}, the original returns {orig.dtype}")
    n = g.numel()
    if n == 0:
        return Comparison()
    holes = unwritten(g)
    if holes is not None and bool(holes.any()):
        count = int(holes.sum())
        first = tuple(int(i) for i in torch.nonzero(holes.reshape(g.shape))[0].tolist())
        return Mismatch(
            "unwritten-output",
            f"{path}: {count} of {n} elements were never written (first at {first})",
            mismatched=count,
            elements=n,
        )
    if g.dtype.is_floating_point or w.dtype.is_floating_point:
        r, a = tolerance(g.dtype, w.dtype, rtol, atol, scale)
        # In float64 on the output's own device: comparing one 4096x4096 bf16 output on the H200
        # machine's 32-core host took 0.89 s, on the GPU 3.6 ms (`bench/host_cost_probe.py`),
        # several times per harness run while the GPU sat idle.
        gd, wd = g.detach().to(torch.float64), w.detach().to(g.device, torch.float64)
        magnitude = wd.abs()[torch.isfinite(wd)]
        if magnitude.numel():
            mean = float(magnitude.mean())
            if mean > 0:
                a = min(a, ATOL_MAGNITUDE_FRACTION * mean)
        gnan, wnan = torch.isnan(gd), torch.isnan(wd)
        bad_nan = gnan & ~wnan
        if bool(bad_nan.any()):
            count = int(bad_nan.sum())
            return Mismatch(
                "nan-output",
                f"{path}: {count} of {n} elements are NaN where the reference is finite",
                mismatched=count,
                elements=n,
            )
        both_inf = torch.isinf(gd) & torch.isinf(wd) & (torch.sign(gd) == torch.sign(wd))
        ok = (gd - wd).abs() <= a + r * wd.abs()
        ok |= (gnan & wnan) | both_inf
        diff = torch.where(ok, torch.zeros_like(gd), (gd - wd).abs())
        # A finite value where the reference is NaN is off by "everything": the worst place.
        diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
        finite = torch.isfinite(gd) & torch.isfinite(wd)
        abs_err = (gd - wd).abs()[finite]
        max_abs = float(abs_err.max()) if abs_err.numel() else 0.0
        rel = (abs_err / wd.abs()[finite].clamp_min(1e-12)) if abs_err.numel() else abs_err
        max_rel = float(rel.max()) if rel.numel() else 0.0
        if not bool(ok.all()):
            count = int((~ok).sum())
            idx = tuple(
                int(i) for i in torch.nonzero(diff.reshape(g.shape) == diff.max())[0].tolist()
            )
            return Mismatch(
                "mismatch",
                f"{path}: {count} of {n} elements differ beyond rtol={r:g}, atol={a:g}; "
                f"worst at {idx}: {float(gd.reshape(g.shape)[idx]):.6g} vs "
                f"{float(wd.reshape(g.shape)[idx]):.6g} (max abs err {max_abs:.3g})",
                max_abs,
                max_rel,
                count,
                n,
            )
        return Comparison(max_abs_err=max_abs, max_rel_err=max_rel, elements=n)
    w_same = w.to(g.device, g.dtype)
    if not torch.equal(g, w_same):
        count = int((g != w_same).sum())
        return Mismatch(
            "mismatch",
            f"{path}: {count} of {n} integer elements differ",
            mismatched=count,
            elements=n,
        )
    return Comparison(max_abs_err=0.0, max_rel_err=0.0, elements=n)


def identical(a, b) -> bool:
    """The same value in every respect a wire copy keeps: structure (tuple or list), and for
    each tensor its dtype, shape, strides, device, autograd flag and bits. One can stand for the
    other in a runner's answer (`messages.Unchanged`, `messages.SameOutput`)."""
    if isinstance(a, torch.Tensor):
        return (
            isinstance(b, torch.Tensor)
            and (a.dtype, a.shape, a.stride(), a.device, a.requires_grad)
            == (b.dtype, b.shape, b.stride(), b.device, b.requires_grad)
            and bitwise_equal(a, b)
        )
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(identical, a, b))
    return type(a) is type(b) and a == b


def bitwise_equal(a, b) -> bool:
    left, right = list(flatten(a)), list(flatten(b))
    if len(left) != len(right):
        return False
    for (_, x), (_, y) in zip(left, right):
        if isinstance(x, torch.Tensor):
            if not isinstance(y, torch.Tensor) or x.shape != y.shape or x.dtype != y.dtype:
                return False
            if x.dtype.is_floating_point:
                int_dtype = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.int8}[
                    x.element_size()
                ]
                if not torch.equal(x.contiguous().view(int_dtype), y.contiguous().view(int_dtype)):
                    return False
            elif not torch.equal(x, y):
                return False
        elif x != y:
            return False
    return True
