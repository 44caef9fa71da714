"""A candidate held to the original's accuracy on average, not only element by element (worker
only).

A tolerance bounds each element; it says nothing of a whole output that leans one way. Outputs
all 0.2-0.5% too large (rows of a softmax summing to 1.002-1.005) pass bf16's tolerance while
the original is exact to a few ulps: wrong for anything that sums them. So per floating-point
result, the candidate's mean signed error against the reference is compared with the
original's on the same inputs; the candidate is rejected (`bias`) when its mean error is
- significant: BIAS_SIGMAS standard errors away from zero (not the noise of rounding),
- well beyond the original's: BIAS_FACTOR times the original's mean error (plus its noise),
- and large enough to matter: more than the task's rtol / BIAS_RTOL_DIVISOR of the result's
  mean magnitude (another summation order moves the mean by far less).
"""

from __future__ import annotations

import torch

from .compare import flatten, tolerance

MIN_ELEMENTS = 64
SAMPLE = 1 << 20
BIAS_SIGMAS = 6.0
BIAS_FACTOR = 4.0
BIAS_RTOL_DIVISOR = 8.0


def _sample(t: torch.Tensor) -> torch.Tensor:
    """At most SAMPLE elements of `t`, evenly strided, in float64 (a benchmark case's output
    can hold 10^8 elements; a million is plenty for a mean and its standard error)."""
    flat = t.detach().reshape(-1)
    step = max(1, -(-flat.numel() // SAMPLE))
    return flat[::step].to(torch.float64)


def _stats(got: torch.Tensor, want: torch.Tensor) -> tuple[float, float, int]:
    """(mean signed error, its standard error, elements) over the finite elements of both."""
    d = _sample(got) - _sample(want)
    d = d[torch.isfinite(d)]
    n = d.numel()
    if n < 2:
        return 0.0, float("inf"), n
    return float(d.mean()), float(d.std()) / n**0.5, n


def systematic_bias(out, original_out, expected, rtol: float | None) -> str | None:
    """Why `out` leans off `expected` where the original does not (see the module), naming the
    result; None when it does not."""
    outs = dict(flatten(out))
    originals = dict(flatten(original_out)) if original_out is not None else {}
    for path, want in flatten(expected):
        got, orig = outs.get(path), originals.get(path)
        if not all(isinstance(t, torch.Tensor) for t in (got, want, orig)):
            continue
        if not want.dtype.is_floating_point or want.numel() < MIN_ELEMENTS:
            continue
        if got.shape != want.shape or orig.shape != want.shape:
            continue
        mean_c, se_c, n = _stats(got, want)
        mean_o, se_o, _ = _stats(orig, want)
        if n < MIN_ELEMENTS:
            continue
        w = _sample(want)
        magnitude = float(w[torch.isfinite(w)].abs().mean())
        r, _ = tolerance(got.dtype, want.dtype, rtol, None)
        if (
            abs(mean_c) > BIAS_SIGMAS * se_c
            and abs(mean_c) > BIAS_FACTOR * abs(mean_o) + BIAS_SIGMAS * se_o
            and abs(mean_c) > magnitude * r / BIAS_RTOL_DIVISOR
        ):
            name = path if path != "out" else "returned value"
            return (
                f"{name}: every element is within tolerance, but the whole leans "
                f"{'high' if mean_c > 0 else 'low'}: mean error {mean_c:+.3g} "
                f"({abs(mean_c) / magnitude:.2%} of the mean magnitude {magnitude:.3g}; "
                f"{abs(mean_c) / se_c:.0f} standard errors) where the original's is "
                f"{mean_o:+.3g}"
                if magnitude
                else f"{name}: the whole leans off the reference: mean error {mean_c:+.3g} "
                f"where the original's is {mean_o:+.3g}"
            )
    return None
