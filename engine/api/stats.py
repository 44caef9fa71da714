"""Statistics for timing comparisons (usable in workers, the engine and tests; numpy is imported
only by the bootstrap, so the language server never loads it)."""

from __future__ import annotations

import math
import statistics
from typing import Sequence

MIN_NOISE_FLOOR = 0.005  # never claim a difference below 0.5 %
SIGNIFICANCE = 0.01


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def relative_spread(xs: Sequence[float]) -> float:
    """Interquartile range over median."""
    if len(xs) < 4:
        return 0.0
    q = statistics.quantiles(xs, n=4)
    m = statistics.median(xs)
    return (q[2] - q[0]) / m if m else 0.0


def _binom_cdf(k: int, n: int) -> float:
    return sum(math.comb(n, i) for i in range(k + 1)) / 2**n


def sign_test(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided sign test p-value for paired samples (ties dropped)."""
    wins = sum(1 for x, y in zip(a, b) if y < x)
    losses = sum(1 for x, y in zip(a, b) if y > x)
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    return min(1.0, 2 * _binom_cdf(k, n))


def bootstrap_speedup(
    a: Sequence[float], b: Sequence[float], iters: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """95% bootstrap interval of median(a) / median(b), resampling the pairs.

    Vectorised: the GPU worker holds its GPU idle while this runs, two or three times per case of
    every A/B. On the H200 machine's host (`bench/host_cost_probe.py`, 2026-11-30) the former
    pure-Python loop took 0.45 s for 365 pairs (a precise timing) and 2.3 s for 1,333 (a final
    A/B); numpy takes 0.035 s and 0.15 s."""
    import numpy as np

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    rng = np.random.default_rng(seed)
    ratios = np.empty(iters)
    chunk = max(1, (1 << 22) // max(1, len(x)))  # bounds the index matrix at 32 MB
    for start in range(0, iters, chunk):
        idx = rng.integers(0, len(x), size=(min(chunk, iters - start), len(x)))
        ma, mb = np.median(x[idx], axis=1), np.median(y[idx], axis=1)
        ratios[start : start + len(idx)] = np.where(
            mb != 0, ma / np.where(mb != 0, mb, 1.0), np.inf
        )
    ratios.sort()
    return float(ratios[int(0.025 * iters)]), float(ratios[int(0.975 * iters) - 1])


def noise_floor(a1: Sequence[float], a2: Sequence[float], seed: int = 0) -> float:
    """Relative difference two timings of the *same* code show: |1 - ratio| plus the CI half-width."""
    ratio = median(a1) / median(a2)
    lo, hi = bootstrap_speedup(a1, a2, iters=1000, seed=seed)
    return max(MIN_NOISE_FLOOR, abs(1 - ratio) + (hi - lo) / 2)


def verdict(speedup: float, p_value: float, noise: float) -> str:
    if p_value < SIGNIFICANCE and speedup > 1 + noise:
        return "faster"
    if p_value < SIGNIFICANCE and speedup < 1 / (1 + noise):
        return "slower"
    return "same"


def geomean(xs: Sequence[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def overall_verdict(verdicts: Sequence[str], speedup: float) -> str:
    if all(v == "same" for v in verdicts):
        return "same"
    if speedup > 1 and "slower" not in verdicts:
        return "faster"
    if speedup < 1 and "faster" not in verdicts:
        return "slower"
    return "mixed"


def spearman(xs: Sequence[float], ys: Sequence[float], rel_tol: float = 1e-9) -> float:
    """Spearman rank correlation (average ranks for ties). Values within `rel_tol` of each other
    are ties: the same estimate summed in another order differs in its last bits, and an H200
    rmsnorm run's five tied single-pass variants ranked at 0.73 as ties, 0.63 in float noise."""

    def ranks(v: Sequence[float]) -> list[float]:
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and math.isclose(
                v[order[j + 1]], v[order[i]], rel_tol=rel_tol
            ):
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2 + 1
            i = j + 1
        return r

    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    var = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return cov / var if var else 0.0
