"""GPU timing inside a worker (imports torch and triton).

Timing the way a careful engineer would (brief §4): warm-up first (compilation stays out), the L2
cache flushed before every run with Triton's own benchmark buffer, CUDA events around each run,
medians and spreads, CUDA graphs for short kernels (launch overhead would dominate), and
baseline and candidate interleaved (A B B A ...) so drift hits both alike; the comparison is a
sign test plus a bootstrap interval, against a noise floor measured by timing A against A.
"""

from __future__ import annotations

import datetime as _dt
import itertools
from typing import Callable

import torch
import triton

from . import stats
from .messages import CaseBench, CaseTiming, Ceilings, TimingResult

GRAPH_BELOW_MS = 0.1  # kernels shorter than this are timed as CUDA-graph replays
MIN_REPS, MAX_REPS = 15, 2000


def _graphed(fn: Callable[[], object]) -> Callable[[], object] | None:
    """A replay of `fn` captured in a CUDA graph, or None when it cannot be captured (host syncs)."""
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        torch.cuda.synchronize()
        return graph.replay
    except Exception:
        torch.cuda.synchronize()
        return None


def _estimate_ms(fn: Callable[[], object], clear, cache) -> float:
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        clear(cache)
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 5


def interleaved(fns: list[Callable[[], object]], rep_ms: float) -> tuple[list[list[float]], bool]:
    """Times (ms) of each function, run in alternating order with the L2 flushed before each run."""
    driver = triton.runtime.driver.active
    cache = driver.get_empty_cache_for_benchmark()
    clear = driver.clear_cache
    for fn in fns:  # warm-up: JIT compilation and autotuning happen here
        fn()
        fn()
    est = max(_estimate_ms(f, clear, cache) for f in fns)
    use_graph = est < GRAPH_BELOW_MS
    if use_graph:
        graphed = [_graphed(f) for f in fns]
        if all(g is not None for g in graphed):
            fns = graphed  # type: ignore[assignment]
        else:
            use_graph = False
    reps = int(min(MAX_REPS, max(MIN_REPS, rep_ms / max(est, 1e-3))))
    starts = [[torch.cuda.Event(enable_timing=True) for _ in range(reps)] for _ in fns]
    ends = [[torch.cuda.Event(enable_timing=True) for _ in range(reps)] for _ in fns]
    # Every function takes every position equally often: with a plain A B A' / A' B A alternation
    # B always ran second, and an identical copy timed 1.6% "slower" (p < 1e-100) on an H200.
    orders = list(itertools.permutations(range(len(fns))))
    for r in range(reps):
        for i in orders[r % len(orders)]:
            clear(cache)
            starts[i][r].record()
            fns[i]()
            ends[i][r].record()
    torch.cuda.synchronize()
    return [[s.elapsed_time(e) for s, e in zip(starts[i], ends[i])] for i in range(len(fns))], use_graph


def compare_cases(base: Callable, cand: Callable, cases: list[tuple], labels: list[str], rep_ms: float,
                  noise_check: bool, seed: int) -> TimingResult:
    out = []
    for label, args in zip(labels, cases):
        fa = lambda: base(*args)  # noqa: E731
        fb = lambda: cand(*args)  # noqa: E731
        if noise_check:
            (a, b, a2), graph = interleaved([fa, fb, fa], rep_ms)
            noise = stats.noise_floor(a, a2, seed)
        else:
            (a, b), graph = interleaved([fa, fb], rep_ms)
            noise = stats.MIN_NOISE_FLOOR
        speedup = stats.median(a) / stats.median(b)
        lo, hi = stats.bootstrap_speedup(a, b, seed=seed)
        p = stats.sign_test(a, b)
        out.append(CaseTiming(label, stats.median(a), stats.median(b), speedup, lo, hi, p, noise,
                              stats.verdict(speedup, p, noise), len(a), graph,
                              stats.relative_spread(a), stats.relative_spread(b)))
    geo = stats.geomean([c.speedup for c in out])
    return TimingResult(out, geo, stats.overall_verdict([c.verdict for c in out], geo))


def _bytes(args, out) -> int:
    seen, total = set(), 0
    for t in list(args) + (list(out) if isinstance(out, (tuple, list)) else [out]):
        if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in seen:
            seen.add(t.untyped_storage().data_ptr())
            total += t.numel() * t.element_size()
    return total


def matmul_flops(args) -> int | None:
    mats = [a for a in args if isinstance(a, torch.Tensor) and a.dim() >= 2]
    if len(mats) >= 2 and mats[0].shape[-1] == mats[1].shape[-2]:
        batch = mats[0].numel() // (mats[0].shape[-2] * mats[0].shape[-1])
        return 2 * batch * mats[0].shape[-2] * mats[0].shape[-1] * mats[1].shape[-1]
    return None


def bench_cases(fn: Callable, cases: list[tuple], labels: list[str], rep_ms: float, uses_dot: bool,
                ceilings: Ceilings | None) -> list[CaseBench]:
    out = []
    for label, args in zip(labels, cases):
        result = fn(*args)
        (times,), graph = interleaved([lambda: fn(*args)], rep_ms)
        ms = stats.median(times)
        nbytes = _bytes(args, result)
        flops = matmul_flops(args) if uses_dot else None
        gbps = nbytes / ms / 1e6
        tflops = flops / ms / 1e9 if flops else None
        bound, fraction = "memory", None
        if ceilings is not None:
            mem_frac = gbps / ceilings.copy_gbps
            if tflops is not None and tflops / ceilings.bf16_tflops > mem_frac:
                bound, fraction = "compute", tflops / ceilings.bf16_tflops
            else:
                fraction = mem_frac
        out.append(CaseBench(label, ms, stats.relative_spread(times), nbytes, flops, gbps, tflops, fraction, bound, graph))
    return out


def measure_ceilings() -> Ceilings:
    """Device-to-device copy bandwidth (bytes read + written) and cuBLAS bf16 matmul rate at 8192^3."""
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    (times,), _ = interleaved([lambda: dst.copy_(src)], 500)
    copy_gbps = 2 * n / stats.median(times) / 1e6
    del src, dst
    m = 8192
    a = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    (times,), _ = interleaved([lambda: a @ b], 1000)
    tflops = 2 * m ** 3 / stats.median(times) / 1e9
    del a, b
    torch.cuda.empty_cache()
    return Ceilings(torch.cuda.get_device_name(), copy_gbps, tflops,
                    _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
