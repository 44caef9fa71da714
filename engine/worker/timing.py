"""GPU timing inside a worker (imports torch and triton).

Timing the way a careful engineer would: warm-up first (compilation stays out), the L2
cache flushed before every run (a read pass over Triton's benchmark buffer), the GPU held by a
spin until the CPU has enqueued an eager run (so the host's launch time stays out), CUDA events
around each run, medians and spreads, CUDA graphs for short kernels (launch overhead would
dominate), and baseline and candidate interleaved (A B B A ...) so drift hits both alike; the
comparison is a sign test plus a bootstrap interval, against a noise floor measured by timing A
against A.
"""

from __future__ import annotations

import datetime as _dt
import time
from typing import Callable

import torch
import triton
import triton.language as tl

from ..api import stats
from ..api.facts import CaseBench, CaseTiming, Ceilings, TimingResult, WorkerError

GRAPH_BELOW_MS = 0.1  # kernels shorter than this are timed as CUDA-graph replays
STALE_SCALE = 10.0  # tolerance multiplier of the check after timing (it catches stale results)
GRAPH_CAPTURES = 3
MIN_REPS, MAX_REPS = 15, 2000
HOLD_MARGIN = 2.0  # the GPU is held this many times a launcher's host time (plus HOLD_PAD_MS)
HOLD_PAD_MS = 0.02
HOLD_MAX_MS = 2.0  # a longer host time is a host sync, which no hold can hide


def _syncs_with_host(fn: Callable[[], object]) -> bool:
    """Whether `fn` waits on the GPU from the host (`.item()`, `.cpu()`, ...), which no CUDA graph
    can capture. PyTorch's sync debug mode says so without trying: a capture that fails on a host
    sync leaves the CUDA random generator in capture state, and the worker's next `torch.randn`
    on the device raises "Offset increment outside graph capture" (H200, cross_entropy's `.item()`
    check: every candidate's harness then failed)."""
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        fn()
        return False
    except RuntimeError:
        return True
    finally:
        torch.cuda.set_sync_debug_mode(previous)
        torch.cuda.synchronize()


def _graphed(fn: Callable[[], object]) -> Callable[[], object] | None:
    """A replay of `fn` captured in a CUDA graph, or None when it cannot be captured (host syncs)."""
    if _syncs_with_host(fn):
        return None
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = fn()
        torch.cuda.synchronize()
        return _Replay(graph, out)
    except Exception:
        torch.cuda.synchronize()
        return None


class _Replay:
    """A captured graph: calling it replays; `output` is what the capture returned, the buffers
    every replay writes (what the timing checks after the last replay)."""

    def __init__(self, graph, output) -> None:
        self.graph, self.output = graph, output

    def __call__(self) -> object:
        self.graph.replay()
        return self.output


def l2_flush() -> Callable[[], object]:
    """What runs before each timed run: a read-only pass over Triton's 256 MB benchmark buffer.

    Why not Triton's own flush (a zero-fill of that buffer): it leaves the L2 full of dirty lines,
    and the timed kernel pays for writing them back, a fixed charge that weighs on a 40 us kernel
    and hardly on the 1 GiB copy behind the ceiling. A read pass evicts as thoroughly and leaves
    clean lines. H200, 2026-11-30 (`bench/flush_probe.py`): a 128 MB read stream 47.5 us after a
    zero-fill, 39.7 us after a read pass; col_sum 16384x4096 50.2 -> 42.3 us; the 1 GiB copy
    4,245 -> 4,271 GB/s.
    """
    cache = triton.runtime.driver.active.get_empty_cache_for_benchmark()
    return lambda: cache.max()


def _spin_cycles_per_ms() -> int:
    """Clock cycles of `torch.cuda._sleep` per millisecond at the GPU's highest SM clock (its
    `clock_rate`, in kHz): the spin counts SM cycles, so at any lower clock it lasts longer, never
    shorter. A measured rate is not safe: on an H200 short spins ran at 1.97 GHz and a 2 ms spin
    at 1.06 GHz (bench/hold_probe.py), and a rate measured on a long spin halved every hold."""
    return torch.cuda.get_device_properties(torch.cuda.current_device()).clock_rate


def _host_ms(fn: Callable[[], object]) -> float:
    """Median host time of one call of `fn` on an idle GPU: what the CPU needs to enqueue it."""
    seconds = []
    for _ in range(3):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return stats.median(seconds) * 1000


def _flush_ms(flush: Callable[[], object]) -> float:
    """One flush's time, warm: a cold first call (7.7 ms on an H200: loading the reduction) made
    the flush look long enough to cover any launcher, and the hold was left out."""
    flush()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(3):
        flush()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 3


def _no_hold() -> None:
    return None


def hold(groups: list[Callable[[], object]], flush: Callable[[], object]) -> Callable[[], object]:
    """What runs before each eagerly timed run's flush: a spin on the GPU long enough for the CPU to
    enqueue the whole launcher behind it (nvbench's blocking kernel, as a fixed-length spin).
    Without it a launcher whose host time outlasts the flush (cross_entropy's range check: seven
    small PyTorch ops) leaves the GPU idle inside the timed window, and the measurement is of the
    host: on an H200 the same cross_entropy variant timed 1.17x in one search and 1.41x in the
    next, and an unchanged copy of a 95 us case anywhere from 0.9x to 1.95x. Nothing when the
    flush alone covers the host time. A launcher that syncs with the host still pays its sync."""
    host = max(_host_ms(f) for f in groups)
    spin = min(HOLD_MAX_MS, HOLD_MARGIN * host + HOLD_PAD_MS) - _flush_ms(flush)
    if spin <= 0:
        return _no_hold
    cycles = int(spin * _spin_cycles_per_ms())
    return lambda: torch.cuda._sleep(cycles)


def _rough_ms(
    fn: Callable[[], object], flush: Callable[[], object], spin: Callable[[], object]
) -> tuple[float, float]:
    """Median time of one held and flushed run of `fn` alone (whether to replay it from a CUDA
    graph), and the mean of hold, flush and run (for sizing the repetitions). Deciding on flush
    plus run put a 16 us kernel past the 0.1 ms threshold once the read-pass flush (93 us on an
    H200, the zero-fill 72 us) came in, and timed it eagerly: launch-bound, spread 95%."""
    torch.cuda.synchronize()
    marks = [
        (
            torch.cuda.Event(enable_timing=True),
            torch.cuda.Event(enable_timing=True),
            torch.cuda.Event(enable_timing=True),
        )
        for _ in range(5)
    ]
    for before, start, end in marks:
        before.record()
        spin()
        flush()
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    alone = stats.median([start.elapsed_time(end) for _, start, end in marks])
    return alone, marks[0][0].elapsed_time(marks[-1][2]) / len(marks)


def measure(
    groups: list[Callable[[], object]],
    rep_ms: float,
    captures: int = GRAPH_CAPTURES,
    timed: list | None = None,
):
    """Times (ms) of each function, all interleaved, the L2 flushed before every run and, when
    timed eagerly, the GPU held while the CPU enqueues the run (`hold`).

    Returns, per group, a list of per-capture time lists, and whether CUDA graphs were used.
    Short kernels are replayed from CUDA graphs, `captures` independent captures per group:
    each capture has its own memory pool, and where a graph's buffers land moves a 12 us kernel
    by 1-2% on an H200 (an identical copy measured "1.6% slower", p < 1e-100, with one capture
    per side). Pooling captures averages that out; their spread enters the noise floor.
    """
    flush = l2_flush()
    for fn in groups:  # warm-up: JIT compilation and autotuning happen here
        fn()
        fn()
    spin = hold(groups, flush)
    estimates = [_rough_ms(f, flush, spin) for f in groups]
    est = max(total for _, total in estimates)
    runners: list[tuple[int, Callable[[], object]]] = [(g, f) for g, f in enumerate(groups)]
    use_graph = max(alone for alone, _ in estimates) < GRAPH_BELOW_MS
    if use_graph:
        graphed = [(g, _graphed(f)) for g, f in enumerate(groups) for _ in range(captures)]
        if all(r is not None for _, r in graphed):
            runners = graphed  # type: ignore[assignment]
            spin = _no_hold  # a replay is one launch, which the flush covers
        else:
            use_graph = False
    reps = int(min(MAX_REPS, max(MIN_REPS, rep_ms * len(groups) / (est * len(runners)))))
    starts = [[torch.cuda.Event(enable_timing=True) for _ in range(reps)] for _ in runners]
    ends = [[torch.cuda.Event(enable_timing=True) for _ in range(reps)] for _ in runners]
    # Every runner takes every position equally often (rotations and their reverses).
    base = list(range(len(runners)))
    orders = [base[k:] + base[:k] for k in range(len(base))]
    orders += [o[::-1] for o in orders]
    for r in range(reps):
        for i in orders[r % len(orders)]:
            spin()
            flush()
            starts[i][r].record()
            runners[i][1]()
            ends[i][r].record()
    torch.cuda.synchronize()
    times = [[s.elapsed_time(e) for s, e in zip(starts[i], ends[i])] for i in range(len(runners))]
    per_group = [
        [times[i] for i, (g, _) in enumerate(runners) if g == group] for group in range(len(groups))
    ]
    if timed is not None:
        timed.extend(runners)
    return per_group, use_graph


def _pooled(captures: list[list[float]]) -> list[float]:
    """Per repetition, the mean over the captures of one function."""
    return [sum(vals) / len(vals) for vals in zip(*captures)]


def _capture_spread(captures: list[list[float]]) -> float:
    meds = [stats.median(c) for c in captures]
    return max(meds) / min(meds) - 1 if len(meds) > 1 else 0.0


def compare_cases(
    base: Callable,
    cands: list[Callable],
    cases: list[tuple],
    labels: list[str],
    rep_ms: float,
    noise_check: bool,
    seed: int,
    tolerance: tuple[float | None, float | None] = (None, None),
) -> list[TimingResult]:
    """Each candidate against the baseline, all in one interleaving per case (A B1 B2 ... A'): the
    baseline's runs and the A/A noise floor are shared, so three contenders cost 5 groups of runs
    instead of 3 x 3, and drift hits them all alike."""
    per_cand: list[list[CaseTiming]] = [[] for _ in cands]
    rejections: list[WorkerError | None] = [None for _ in cands]
    for label, args in zip(labels, cases):
        fa = lambda: base(*args)  # noqa: E731
        fbs = [(lambda c=c: c(*args)) for c in cands]
        groups = [fa, *fbs, fa] if noise_check else [fa, *fbs]
        timed: list = []
        per_group, graph = measure(groups, rep_ms, timed=timed)
        problems = _does_the_work(base, args, timed, len(cands), tolerance)
        for k, problem in enumerate(problems):
            if problem is not None and rejections[k] is None:
                rejections[k] = WorkerError("stale-output", f"on {label}: {problem}")
        a = _pooled(per_group[0])
        floor = (
            stats.noise_floor(a, _pooled(per_group[-1]), seed)
            if noise_check
            else stats.MIN_NOISE_FLOOR
        )
        bases = [per_group[0], per_group[-1]] if noise_check else [per_group[0]]
        for k in range(len(cands)):
            b = _pooled(per_group[1 + k])
            noise = max(floor, *(_capture_spread(c) for c in bases + [per_group[1 + k]]))
            speedup = stats.median(a) / stats.median(b)
            lo, hi = stats.bootstrap_speedup(a, b, seed=seed)
            p = stats.sign_test(a, b)
            per_cand[k].append(
                CaseTiming(
                    label,
                    stats.median(a),
                    stats.median(b),
                    speedup,
                    lo,
                    hi,
                    p,
                    noise,
                    stats.verdict(speedup, p, noise),
                    len(a),
                    graph,
                    stats.relative_spread(a),
                    stats.relative_spread(b),
                )
            )
    results = []
    for out, rejection in zip(per_cand, rejections):
        geo = stats.geomean([c.speedup for c in out])
        verdict = stats.overall_verdict([c.verdict for c in out], geo)
        results.append(TimingResult(out, geo, verdict, rejection))
    return results


def _refresh(args) -> None:
    """New values in every floating-point argument, in place (the same buffers, so graph
    replays read them too): each tensor rolled by one along its first dimension of size > 1."""
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_floating_point() and a.numel() > 1:
            dim = next((d for d, n in enumerate(a.shape) if n > 1), None)
            if dim is not None:
                a.copy_(torch.roll(a, 1, dim))


def _does_the_work(base, args, timed, n_cands: int, tolerance) -> list[str | None]:
    """After timing: new input values, then each candidate's timed runner once more (the same
    graph replay or call that was timed); its output must match the original's on the new
    values. A result cached between calls, or captured once and replayed, does not."""
    from .compare import compare

    _refresh(args)
    expected = base(*args)
    torch.cuda.synchronize()
    problems: list[str | None] = [None] * n_cands
    for group, run in timed:
        k = group - 1
        if not 0 <= k < n_cands or problems[k] is not None:
            continue
        out = run()
        torch.cuda.synchronize()
        rtol, atol = tolerance
        result = compare(out, expected, rtol, atol, STALE_SCALE)
        if not result.ok:
            problems[k] = (
                "after its inputs changed, the timed candidate still returned results that do "
                "not follow them (outputs cached or replayed without the work): " + result.message
            )
    return problems


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


def bench_cases(
    fn: Callable,
    cases: list[tuple],
    labels: list[str],
    rep_ms: float,
    uses_dot: bool,
    ceilings: Ceilings | None,
) -> list[CaseBench]:
    out = []
    for label, args in zip(labels, cases):
        result = fn(*args)
        (captures,), graph = measure([lambda: fn(*args)], rep_ms, captures=1)
        times = captures[0]
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
        out.append(
            CaseBench(
                label,
                ms,
                stats.relative_spread(times),
                nbytes,
                flops,
                gbps,
                tflops,
                fraction,
                bound,
                graph,
            )
        )
    return out


@triton.jit
def _read_stream(x_ptr, part_ptr, n, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    """Reads ITERS consecutive blocks per program and writes one partial sum: a read-only stream
    (the writes are one word per ITERS * BLOCK read)."""
    pid = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.int32)
    for i in tl.static_range(ITERS):
        offs = (pid * ITERS + i).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


# (BLOCK, ITERS, warps) of the read streams tried: wide and narrow programs, one or several
# blocks each; the ceiling is the fastest, as a copy's is the one copy PyTorch has.
READ_STREAM_CONFIGS = ((1024, 1, 4), (2048, 1, 4), (4096, 1, 8), (1024, 4, 4), (2048, 4, 8))


def read_stream_gbps(src: torch.Tensor) -> float:
    """Bytes read per second by the fastest of a few read-only streams over `src` (int32 words):
    `torch.sum` and the Triton streams of READ_STREAM_CONFIGS. The roof of a reduction, which
    reads much and writes little: it is not held to a copy, which writes a byte per byte read."""
    words = src.view(torch.int32)
    n = words.numel()
    runs: list[Callable[[], object]] = [lambda: words.sum()]
    for block, iters, warps in READ_STREAM_CONFIGS:
        grid = triton.cdiv(n, block * iters)
        part = torch.empty(grid, dtype=torch.int32, device=src.device)

        def run(grid=grid, part=part, block=block, iters=iters, warps=warps):
            _read_stream[(grid,)](words, part, n, ITERS=iters, BLOCK=block, num_warps=warps)
            return part

        runs.append(run)
    timed, _ = measure(runs, 200, captures=1)
    return max(src.numel() * src.element_size() / stats.median(t) / 1e6 for (t,) in timed)


def measure_ceilings() -> Ceilings:
    """Device-to-device copy bandwidth (bytes read + written), the write bandwidth of a fill, the
    read bandwidth of a read-only stream, the L2's size and cuBLAS bf16 matmul rate at 8192^3.
    The judge measures them (it never imports a candidate, so none can have patched what they are
    measured with)."""
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    ((times,),), _ = measure([lambda: dst.copy_(src)], 500, captures=1)  # noqa: F821 (used before the del below)
    copy_gbps = 2 * n / stats.median(times) / 1e6
    ((times,),), _ = measure([lambda: dst.fill_(7)], 300, captures=1)  # noqa: F821 (used before the del below)
    write_gbps = n / min(times) / 1e6  # the fastest fill: the floor must not sit above any run
    del dst
    read_gbps = read_stream_gbps(src)
    del src
    m = 8192
    a = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    ((times,),), _ = measure([lambda: a @ b], 1000, captures=1)  # noqa: F821 (used before the del below)
    tflops = 2 * m**3 / stats.median(times) / 1e9
    del a, b
    torch.cuda.empty_cache()
    return Ceilings(
        torch.cuda.get_device_name(),
        copy_gbps,
        tflops,
        _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        write_gbps,
        torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size,
        read_gbps,
    )
