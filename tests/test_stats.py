"""Timing statistics: the sign test, bootstrap intervals, noise floors and verdicts."""

from __future__ import annotations

import random

from kernelbrain.engine.api import stats


def noisy(center: float, n: int, rng: random.Random, spread: float = 0.02) -> list[float]:
    return [center * (1 + rng.gauss(0, spread)) for _ in range(n)]


def test_sign_test_extremes():
    assert stats.sign_test([1.0] * 10, [1.0] * 10) == 1.0
    assert stats.sign_test([2.0] * 20, [1.0] * 20) < 1e-5
    p = stats.sign_test([1, 2, 1, 2, 1, 2], [2, 1, 2, 1, 2, 1])
    assert p == 1.0


def test_same_code_is_same_and_ten_percent_is_detected():
    rng = random.Random(1)
    a, a2, b_same = noisy(1.0, 400, rng), noisy(1.0, 400, rng), noisy(1.0, 400, rng)
    noise = stats.noise_floor(a, a2)
    sp = stats.median(a) / stats.median(b_same)
    assert stats.verdict(sp, stats.sign_test(a, b_same), noise) == "same"
    b_slow = noisy(1.1, 400, rng)
    sp = stats.median(a) / stats.median(b_slow)
    assert 0.88 < sp < 0.93
    assert stats.verdict(sp, stats.sign_test(a, b_slow), noise) == "slower"
    lo, hi = stats.bootstrap_speedup(a, b_slow)
    assert lo < sp < hi and hi < 1


def test_tiny_but_significant_difference_stays_below_the_floor():
    # 0.2% faster with very low noise: significant, yet below the 0.5% minimum floor.
    rng = random.Random(2)
    a, b = noisy(1.0, 2000, rng, 0.001), noisy(0.998, 2000, rng, 0.001)
    sp = stats.median(a) / stats.median(b)
    assert stats.sign_test(a, b) < 0.01
    assert stats.verdict(sp, stats.sign_test(a, b), stats.MIN_NOISE_FLOOR) == "same"


def test_overall_verdict_and_geomean():
    assert stats.overall_verdict(["same", "same"], 1.001) == "same"
    assert stats.overall_verdict(["faster", "same"], 1.2) == "faster"
    assert stats.overall_verdict(["slower", "slower"], 0.8) == "slower"
    assert stats.overall_verdict(["faster", "slower"], 1.05) == "mixed"
    assert abs(stats.geomean([2.0, 0.5]) - 1.0) < 1e-12


def test_spearman():
    assert stats.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert stats.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    assert abs(stats.spearman([1, 2, 2, 3], [1, 2, 3, 4]) - 0.9486832980505138) < 1e-12
    # the same estimate summed in another order differs in its last bits: still a tie
    assert stats.spearman([1, 2, 2 + 4e-16, 3], [1, 2, 3, 4]) == stats.spearman(
        [1, 2, 2, 3], [1, 2, 3, 4]
    )
