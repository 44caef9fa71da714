"""A static cost model: estimated time of a candidate on each benchmark case, without a GPU.

Inputs are what the dry run recorded (grid, argument sizes, constexprs, warps, stages, host-side
fills and syncs), what the compiler reported (registers, shared memory, spills, SASS
instructions) and the kernel's structure (how many passes read each tensor, runtime and unrolled
loops, unit-stride run lengths, atomics, whether it uses `tl.dot`). The estimate is the largest
of its floors plus launch overhead:

- bandwidth: bytes moved (compulsory bytes, plus re-reads priced by the share of the resident
  programs' slices L2 holds) over the bandwidth that the bytes in flight can sustain (Little's
  law: resident programs x bytes each has in flight / memory latency), less for runs shorter than
  a 128-byte line; a partial last wave streams at what its own programs keep in flight;
- latency: the dependent memory round trips each program makes, growing with the waves;
- compute (matmul): FLOPs over the tensor-core rate scaled by a tile-efficiency factor;
- atomics: programs ending in an atomic update retire at a bounded rate; below that rate, each
  wave of such programs still adds the atomic's tail to the bandwidth floor;
- special functions: exponentials, logarithms, roots computed on whole tiles, at the rate of the
  special-function units;
- instruction issue: each thread's SASS instructions (loop bodies once a pass), issued by the
  busiest SM at a rate that needs enough resident warps to hide each instruction's latency;
  memory and issue overlap only as far as the SM's other programs can stream while one computes.

The device constants were fitted against H200 measurements (bench/cost_model_fit.py).
Every figure it produces is an estimate and is labelled so (`measured: false`).
"""

from __future__ import annotations

import ast
import functools
import math
from dataclasses import dataclass

from ..evaluate.messages import CaseLaunches, CompiledFacts, LaunchRecord, SpecializeResult
from ..index import parse_module
from ..rules.analysis import kernel_views, kwarg


@dataclass(frozen=True)
class DeviceModel:
    """An H200 (sm_90) by default; bandwidth and matmul rate from measured ceilings when known."""

    sms: int = 132
    bandwidth_gbps: float = 4280.0  # device-to-device copy, brief §6
    bf16_tflops: float = 680.0
    l2_bytes: int = 50 * 1024 * 1024
    l2_reread_cost: float = 0.1  # of a DRAM read
    # A re-read hits L2 while the resident programs' slices fit, and almost never once they do
    # not (streaming data evicts itself before its second pass): the hit share falls as a smooth
    # step, 1 / (1 + (working set / (l2_bytes x share)) ** sharpness). H200 softmax 1024x32768,
    # two passes over 64 KB rows by 1,024 co-resident programs (64 MB): 47-50 us measured (runs
    # BD, AX, quick rung), every re-read missing (201 MB at 4.28 TB/s is 47 us), where the
    # proportional share min(1, 50 MB / 64 MB) estimated 36 us; cross_entropy's 64 KB rows with
    # 528 programs resident (34 MB) re-read from L2 (1.24x vs 1.08x over the first draft). With
    # the issue terms below (before the L1 spill term), Spearman rho over BD / AX softmax's
    # quick-timed candidates 0.63 / 0.62 -> 0.77 / 0.75, their verified variants 0.90 / 0.86 ->
    # 0.95 / 0.97 (30-45 MB and sharpness 4-16 rank alike; bench/cost_model_fit.py). It costs the
    # first draft's absolute estimate on that shape: three passes of 2 KB tiles, 124 us against 78
    # measured (85 without it).
    l2_reuse_share: float = 0.8
    l2_reuse_sharpness: float = 8.0
    # Fitted with bench/cost_model_fit.py. First on the variants of a 5-example H200 run
    # (early on 2026-11-30): 1.2 us and a re-read from L2 at a tenth of a DRAM read ranked them
    # best (mean rho 0.47 against 0.39 for 0.8 us and all-or-nothing L2 reuse). Refitted on the
    # 23 searches recorded since (runs B-X, this model): 0.9 us, mean rho 0.68 -> 0.70; rmsnorm
    # 0.51 -> 0.67 (S) and 0.20 -> 0.40 (W), over W's 58 quick-timed rmsnorm candidates 0.69 ->
    # 0.85; cross_entropy O 0.23 -> 0.35, S 0.77 -> 0.81, M 0.32 -> 0.26; the rest within 0.05.
    # At 1.2 us the model put rmsnorm's original (512 wide, 4 warps) at 84 us, measured 70 us.
    memory_latency_us: float = 0.9
    launch_us: float = 3.0
    # A host sync (`.item()`) drains the GPU, which then idles until Python has issued the next
    # launch. H200 cross_entropy: asserting its check on the GPU instead of two `.item()` syncs
    # saved 44-50 us per case while adding seven small launches (10-20 us, structure probe):
    # ~30 us a sync. At 15 us the model ranked those variants below the syncing ones' configs
    # (bench/cost_model_fit.py on runs B and C: rho 0.62 / 0.53; 0.89 / 0.86 at 30 us).
    host_sync_us: float = 30.0
    # A program's atomic update (acq_rel by default: it waits for the program's memory traffic)
    # bounds the rate programs retire, whatever its width. H200 col_sum, 128 MB each time: 32,768
    # programs with one 64-wide or one 16-wide update took 102 / 110 us (3.1 ns a program), 8,192
    # or 4,096 programs 49-51 us (memory-bound); the element count (2.1 M vs 0.5 M) did not matter.
    atomic_program_ns: float = 3.1
    # Each program ends on its atomic update, which waits for the program's loads: a tail per wave
    # of programs that the bandwidth floor does not see. H200 col_sum (run J), 128 MB summed by
    # bandwidth-bound coarsened programs: 2,048-4,096 programs 43.3-43.5 us, 8,192 44.7-46.0,
    # 16,384 46.9, about 0.5 us a wave. With it, Spearman rho on col_sum's runs H / J rose from
    # 0.50 / 0.40 to 0.66 / 0.69 (runs A / B, older flush: 0.16 / 0.18 -> 0.18 / 0.22), for any
    # value from 0.25 to 4 us: it orders variants the other floors tie.
    atomic_tail_us: float = 0.5
    # A program's atomic update, and its tail, cost more the more lanes issue it: num_warps x the
    # update's width, beyond 256 (4 warps x 64), by (lanes / 256) ** this. H200 col_sum (run Z,
    # 16384x4096, quick rung), uncoarsened tilings of equal program counts: 64 wide at 4 / 8 warps
    # 1.75x / 1.03x the first draft, 128 wide at 4 / 8 warps 1.08x / 0.61x; 32 x 64 at 8 warps
    # 0.55x (the draft is 32 x 64 at 4): per program 1.8-1.9x at 512 lanes, 3.3x at 1,024. Run J's
    # 16- and 64-wide updates at 4 warps (64 and 256 lanes) cost alike. Spearman rho over run Z's
    # 108 GPU-timed col_sum candidates 0.43 -> 0.63 (0.5-1.2 alike; 512 free lanes 0.58); the
    # verified variants of runs H, J, N, S, Z unchanged (bench/cost_model_fit.py). It ranks one
    # measured pair wrongly: 32 x 128 x 16 at 4 warps, 136 registers, 2.50x vs 16 x 64 x 16 2.30x.
    atomic_lanes_exponent: float = 0.85
    atomic_free_lanes: int = 256
    # Runs of fewer contiguous bytes than a 128-byte line per row cost bandwidth: col_sum tiles 16
    # wide (32 B) ran at 0.88x of the same tiles 64 wide (128 B) on an H200.
    line_bytes: int = 128
    short_run_exponent: float = 0.1
    # Special-function results (tl.exp, tl.log, ...) per second, x1e12. H200, cross_entropy
    # 4096x32768 (134 M logits) at 4 warps: two exponentials per logit (a per-lane running
    # maximum) took 122 us, one per logit 86-95 us (bench/structure_probe.py): ~2.2e12 a second
    # once the exponentials bound the loop (the units' peak is 132 SMs x 16 x 1.98 GHz = 4.2e12).
    special_tops: float = 2.2
    # Matmul pipelining: the K extent (elements) the stages prefetch ahead of the tensor cores,
    # BLOCK_K x (stages - 1), that saturates them. H200 4096^3 (128x256 tiles, 8 warps; runs C-F):
    # BLOCK_K 32 at 5 stages (depth 128) ran 1-2% faster than 64 at 3 or 4 and than 32 at 4 (96).
    dot_k_depth: float = 128.0
    dot_depth_exponent: float = 0.3
    # A matmul's operand tiles are re-read by a whole row or column of programs and mostly come
    # from L2: its loop's round trips wait less than a stream's. With the streaming 1.2 us the
    # latency floor exceeded the compute floor of 4-stage tilings; any value from 0.3 to 0.8 us
    # ranks the variants of five H200 runs alike (bench/cost_model_fit.py, mean rho 0.81 against
    # 0.78 at 1.2 us; fitted in sample).
    dot_operand_latency_us: float = 0.5
    # Whatever the K extent in flight, a matmul loop with one tile prefetched (2 stages) does not
    # hide the loads: H200 4096^3 (run Z, quick rung), 128x256 tiles at 8 warps: BLOCK_K 128 / 64
    # at 2 stages 1.32-1.48x / 1.16-1.42x the first draft, estimated 2.50-2.75x / 2.25x; BLOCK_K
    # 64 at 3 stages 2.11x, 32 at 4-5 stages 2.10-2.17x. The efficiency scales by
    # ((stages - 1) / this) ** dot_prefetch_exponent below this many prefetched tiles.
    dot_prefetch_stages: float = 2.0
    dot_prefetch_exponent: float = 0.5
    # Tiles taller than wide run slower than their transpose at the same warps and stages: run Z,
    # 256x128 against 128x256, 0.78-0.93x (median 0.87). With both terms Spearman rho over run
    # Z's 141 GPU-timed matmul candidates 0.61 -> 0.93 (in sample; 0.80 with either term alone;
    # stages 3 or exponent 1.0 fit worse); the verified variants of runs H, P, S, Z unchanged
    # (bench/cost_model_fit.py).
    dot_tall_tile_factor: float = 0.85
    # Register spills slow the memory stream by spilled registers / 256, at most this much. H200
    # softmax (run Z, quick rung): single-pass at 4 warps, which spills on the 32768-wide row,
    # measured 1.19-1.21x the first draft over the three cases, about as fast as at its default
    # warps (1.22x), where a charge of up to 2x estimated it at 1.05x. At 0.2, Spearman rho over
    # Z's 64 GPU-timed softmax candidates 0.61 -> 0.81 (0.3: 0.79; in sample), S's verified softmax
    # variants 0.88 -> 0.94; the other examples' quick-rung and verified sets unchanged
    # (bench/cost_model_fit.py over runs S, W, X, Y, Z).
    spill_max: float = 0.2
    # Beyond that bounded charge, heavy spills move their own bytes: every thread's spilled 4-byte
    # registers, this many times, streamed like the kernel's own bytes (a spill is stored and
    # loaded back; one of the two is charged, the other mostly hits L1/L2). H200 softmax on
    # 1024x32768 (run AU, quick rung), a single-pass row held by 1 / 2 warps: 4,960 / 2,848
    # spilled registers, 0.13x / 0.20x the first draft (estimated 1.67x with the bounded charge
    # alone); at 4 warps 56 spills, 0.93x against 1.29x at the default 16 warps. Spearman rho
    # over AU's 110 quick-timed softmax candidates 0.66 -> 0.77 (2.0: 0.73; in sample), over AI's
    # 93 0.75 -> 0.85 (out of sample); the verified sets of the latest runs of every example
    # unchanged (bench/cost_model_fit.py --grid "spill_traffic=0,1,2").
    spill_traffic: float = 1.0
    # Spilled registers live in local memory, which L1 caches: what the SM's resident programs
    # spill together (bytes a thread x threads x programs) reaches DRAM only beyond this much.
    # H200 softmax 1024x32768, single pass at 4 warps (255 registers, two programs an SM): 160
    # bytes a thread spilled (40 KB an SM), 53.2 us measured (run BF), estimated 64 us with the
    # traffic charged (41 us without); the 1- and 2-warp rows above spill 1.3 / 0.7 MB an SM and
    # stay charged. Spearman rho over BF's verified softmax variants 0.17 -> 0.98, its quick set
    # 0.77 -> 0.79, AU's quick set 0.76 -> 0.80; AU's verified set 0.27 -> -0.45 (its 4-warp
    # row, 192 bytes spilled and 4,448 instructions, measured 66.5 us; that set's order does not
    # reproduce between runs, see BENCHMARKS); 64-192 KB alike (bench/cost_model_fit.py).
    spill_l1_bytes: int = 128 * 1024
    # A grid smaller than one wave streams at what its own programs keep in flight, and its
    # memory time is charged waves ** this besides (it was 0.25 with every resident slot counted
    # as in flight; the tensor-core and special-function floors keep 0.25). H200 col_sum
    # 16384x4096 (run AG): one program per 64-column strip over every row, 64 programs, took
    # 35.7 us, and 0.25 estimated it at 89 us (now 40 us); softmax's first
    # draft on 1024x32768 (1,024 programs of 4 warps, half a wave) measured 79 us, estimated
    # 52 us before and 78 us now. Spearman rho over 19 verified sets (runs S-AE)
    # mean 0.68 -> 0.71 (gelu AD 0.70 -> 0.97, Z 0.41 -> 0.84; cross_entropy AA 0.73 -> 0.70),
    # over 8 quick-rung sets mean 0.80 -> 0.80 (gelu 0.78 -> 0.88, softmax AC 0.82 -> 0.70);
    # in sample (bench/cost_model_fit.py); in the GPU searches since run AH.
    under_wave_exponent: float = 0.0
    # A streaming loop pipelined S stages deep (`tl.range(..., num_stages=S)`) keeps S - 1 tiles
    # of loads in flight per program: the stream counts (S - 1) ** this tiles. Without it a loop
    # has one (the launch's stages do not reach loops without a dot: `loop-stages`). And what
    # one SM's programs stream is capped (GB/s): a grid of few programs is bound by it whatever
    # it keeps in flight. H200 col_sum, one program per column strip (run AG, 64 programs on
    # 16384x4096): 256 x 64 tiles at 8 warps took 159 / 45 / 37 / 36 us at 1 / 3 / 4 / 5 stages,
    # 56 GB/s a program at best; 16 programs (65536x1024) 67 GB/s. Spearman rho over AG's 135
    # tilings, 16384x4096, 0.32 -> 0.67 with these two, the loaded element size (below) and the
    # wide-program charge for grids over one wave only (exponent 0.5 / 0.75: 0.66-0.67, cap 50
    # GB/s 0.70); the verified and quick-rung sets of runs S-AH move by at most 0.02 but for
    # cross_entropy S, 0.99 -> 0.81 (n=6; its latest, AD, 0.81 either way; bench/cost_model_fit.py).
    loop_prefetch_exponent: float = 1.0
    sm_stream_gbps: float = 65.0
    # An SM streams its cap only with enough warps to issue the loads, unpack them and add them
    # up: below `sm_stream_warps` resident warps its cap scales by (warps / that) ** this. H200
    # col_sum 16384x4096, one program per 64-column strip (64 programs, one an SM): 128 x 64
    # tiles at 4 warps, 5 deep, 40.0 us (run AQ, quick rung); at 8 warps 35.5 us 8 deep, 256 x 64
    # 36.3 us 5 deep (run AS, engine timing, median of 3): 52 against 58-59 GB/s an SM, (4 / 8) **
    # 0.18. Without it the model tied the two, and the search's estimate rung kept the 4-warp one
    # (the first in geomean order) and never timed the 8-warp strips (runs AL-AQ). Out of sample,
    # over run AG's 135 strip tilings on 16384x4096, Spearman rho 0.67 -> 0.80 (0.5: 0.82;
    # bench/probe_entries.py, bench/cost_model_fit.py).
    sm_stream_warps: int = 8
    sm_stream_warp_exponent: float = 0.18
    # Instruction issue: a loop-free kernel's SASS is what each of its threads executes, once,
    # and the busiest SM issues its programs' warps x instructions at `issue_per_cycle` a cycle,
    # scaled by (resident warps / `issue_warps`) ** this below that many (too few warps to hide
    # each instruction's latency). H200 gelu on 2^20 elements (run BB, quick rung): 128 programs
    # of 4 warps and 1,413 instructions (64 elements a thread) measured 1.99-2.27x the first
    # draft, 1,024 programs of 2 warps and 363 instructions 2.59-2.77x; the model tied them.
    # Spearman rho over BB's 70 quick-timed gelu candidates 0.61 -> 0.90 (in sample), out of
    # sample over AD's 44 / Z's 51 0.78 / 0.81 -> 0.91 / 0.94; the other examples' latest quick
    # sets: rmsnorm BB / AE 0.81 / 0.84 -> 0.81 / 0.83, softmax AX 0.81 -> 0.83, cross_entropy AY
    # 0.84 -> 0.86, col_sum and matmul unchanged, every verified set unchanged. Added to the
    # latency floor instead of a floor of its own: rmsnorm's quick set 0.68 (grid: 16 or 32 warps,
    # exponent 0.5 or 1; bench/cost_model_fit.py).
    #
    # Loops count too (`executed_instructions`): the straight-line SASS once, the loop bodies once
    # a pass. H200 softmax 1024x32768 (run BD): the online softmax in 1024-wide tiles at 4 warps
    # (32 trips of 253 instructions) 69.8 us, 4096 wide at 8 warps (8 of 451) 50.4 us. This
    # replaces a charge of (warps / 4) ** 0.3 on row loops wider than 4 warps (cross_entropy,
    # structure probe run R: 16 warps 1.13-1.30x slower than 4 at the same elements a thread);
    # with both, col_sum BA's verified rho fell to 0.42. Neither reproduces run R's pair: the model
    # ties them at the exponential floor (see BENCHMARKS, "Offline after run BE").
    #
    # Memory and issue overlap only as far as other programs can stream while one computes: a
    # program's loads are in flight, then its warps compute on them. `needed` programs keep the
    # SM's share of the bandwidth busy (share x memory latency / the bytes one program loads at
    # once); with P programs on the SM, while one computes the other P - 1 stream, short by
    # 1 - (P - 1) / needed. That share of the smaller time adds to the larger: a lone program
    # (P = 1) loads, then computes; eight 8 KB rows an SM hide the issue entirely. H200 softmax
    # single-pass (runs BD, AX, quick rung): 16384x4096 at 8 warps (8 programs an SM, 8 KB each)
    # 63 us of which 37-52 us issue, at 16 warps (4 programs) 76-82 us (memory 64.5 + a quarter
    # of its 48-65 us issue); 1024x32768 at 16 warps (one 64 KB row an SM) 45-49 us, memory 31
    # plus all of its 15-18 us issue. rmsnorm 16384x4096 at 16 warps: 69-71 us, memory 64 plus
    # 6-7 of 36-38 issue (BD). With the loop count, the overlap, the L2 step and the L1 spills,
    # Spearman rho (verified / quick-timed) over softmax BD 0.95 / 0.77, AX 0.97 / 0.74 (-0.12 /
    # 0.76 and -0.06 / 0.82 before), rmsnorm BD 0.78 / 0.83, gelu BD 0.80 / 0.81, cross_entropy
    # AY 0.73 / 0.90, col_sum BA 0.80 / 0.82, matmul BA 0.81 / 0.92 (in sample); out of sample
    # softmax AU / AI -0.45 / 0.59 (0.45 / 0.09 before; orders that do not reproduce between
    # runs) and 0.80 / 0.80, rmsnorm AE 0.80 / 0.85, gelu AD 0.83 / 0.86, cross_entropy AV 0.74 /
    # 0.91, col_sum AT 0.90 / 0.82; softmax BG, searched with it on an H200, 0.85 / 0.75
    # (bench/cost_model_fit.py, BENCHMARKS "Offline after run BE").
    clock_mhz: float = 1980.0
    issue_per_cycle: float = 4.0
    issue_warps: float = 16.0
    issue_exponent: float = 1.0
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32
    regs_per_sm: int = 65536
    smem_per_sm: int = 228 * 1024


@dataclass(frozen=True)
class KernelShape:
    """Structure of the kernel that the cost depends on (from the candidate's source)."""

    passes: dict[str, int]  # pointer parameter -> passes that load it (per program)
    stores: set[str]
    atomics: set[str]
    uses_dot: bool
    loops: int  # runtime loops (a `tl.static_range` loop is unrolled: not one)
    loads_per_iteration: int
    trips: list[tuple[str, str]]  # per runtime `range` loop: (stop, step) expressions
    loop_stages: list[str]  # per runtime loop: its `num_stages` expression ("1": not pipelined)
    unrolled: list[
        tuple[str, int]
    ]  # per `tl.static_range` loop: (extent expression, loads in its body)
    grouped: bool
    atomic_calls: int  # atomic updates per program
    atomic_widths: list[
        str
    ]  # per atomic update: the constexpr bounding its unit-stride run (if known)
    contiguous: list[str]  # per load: the constexpr bounding its unit-stride run (empty: unknown)
    tile_passes: dict[str, int]  # pointer parameter -> statements that load a whole tile of it
    specials_per_element: (
        float  # special functions on tiles per element loaded (in the loops, if any)
    )
    specials_per_program: int  # ... on a tile once per program (outside the loops)


_SPECIAL = {
    "exp",
    "exp2",
    "log",
    "log2",
    "log1p",
    "sin",
    "cos",
    "sqrt",
    "sqrt_rn",
    "rsqrt",
    "sigmoid",
    "erf",
    "tanh",
    "pow",
    "fdiv",
    "div_rn",
}
_REDUCE = {"max", "min", "sum", "reduce", "argmax", "argmin", "xor_sum", "prod"}


def _attr(func: ast.expr) -> str:
    return (
        func.attr
        if isinstance(func, ast.Attribute)
        else func.id
        if isinstance(func, ast.Name)
        else ""
    )


def _is_tile(expr: ast.AST, tiles: set[str]) -> bool:
    """Whether an expression is a whole tile (one value per lane) rather than a scalar: it reads
    `tl.arange`, a tile-shaped `tl.zeros`/`tl.full`, or a tile-valued name, other than through a
    reduction (whose result is treated as a scalar)."""
    if isinstance(expr, ast.Call):
        name = _attr(expr.func)
        if name in _REDUCE:
            return False
        if name == "arange":
            return True
        if (
            name in ("zeros", "full")
            and expr.args
            and isinstance(expr.args[0], (ast.List, ast.Tuple))
        ):
            return True
    if isinstance(expr, ast.Name):
        return expr.id in tiles
    return any(_is_tile(c, tiles) for c in ast.iter_child_nodes(expr))


def _tile_names(body: list[ast.stmt]) -> set[str]:
    """Names that hold tiles, to a fixed point (loop-carried values flow backwards)."""
    tiles: set[str] = set()
    assigns = [n for s in body for n in ast.walk(s) if isinstance(n, (ast.Assign, ast.AugAssign))]
    changed = True
    while changed:
        changed = False
        for a in assigns:
            targets = a.targets if isinstance(a, ast.Assign) else [a.target]
            names = {t.id for t in targets if isinstance(t, ast.Name)} - tiles
            if names and _is_tile(a.value, tiles):
                tiles |= names
                changed = True
    return tiles


def _range_call(stmt: ast.stmt) -> tuple[str, list[ast.expr]]:
    """`("range" | "static_range" | "", args)` of a `for` loop's iterator."""
    if isinstance(stmt, ast.For) and isinstance(stmt.iter, ast.Call):
        f = stmt.iter.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if name in ("range", "static_range"):
            return name, list(stmt.iter.args)
    return "", []


def _active(stmts: list[ast.stmt], constexprs: dict) -> list[ast.stmt]:
    """Statements on the path taken for these constexpr values (`if FLAG:` pruned as Triton does)."""
    out: list[ast.stmt] = []
    for s in stmts:
        if isinstance(s, ast.If):
            test = s.test
            neg = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
            name = test.operand if neg else test  # type: ignore[attr-defined]
            if isinstance(name, ast.Name) and name.id in constexprs:
                taken = bool(constexprs[name.id]) != neg
                out.extend(_active(s.body if taken else s.orelse, constexprs))
                continue
        out.append(s)
    return out


def kernel_shape(source: str, kernel: str, constexprs: dict) -> KernelShape | None:
    pm = parse_module(source)
    kv = next((k for k in kernel_views(pm) if k.name == kernel), None)
    if kv is None:
        return None
    body = _active(kv.node.body, constexprs)
    passes: dict[str, int] = {}
    stores: set[str] = set()
    atomics: set[str] = set()
    atomic_calls = 0
    atomic_widths: list[str] = []
    loops = 0
    loads_per_iter = 0

    def calls(node: ast.AST, name: str) -> list[ast.Call]:
        return [
            c
            for c in ast.walk(node)
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr == name
        ]

    trips: list[tuple[str, str]] = []
    loop_stages: list[str] = []
    unrolled: list[tuple[str, int]] = []
    # A straight-line load with the same address expression as a load in a loop is that loop's
    # first iteration peeled off (what `own-columns` writes), not a pass of its own.
    loop_addresses = {
        ast.unparse(c.args[0])
        for s in body
        if isinstance(s, (ast.For, ast.While))
        for c in calls(s, "load")
        if c.args
    }
    peeled = {
        id(s)
        for s in body
        if not isinstance(s, (ast.For, ast.While))
        and calls(s, "load")
        and all(c.args and ast.unparse(c.args[0]) in loop_addresses for c in calls(s, "load"))
    }
    for stmt in body:
        is_loop = isinstance(stmt, (ast.For, ast.While))
        kind, args = _range_call(stmt)
        if kind == "static_range" and args:
            unrolled.append(
                (ast.unparse(args[0] if len(args) == 1 else args[1]), len(calls(stmt, "load")))
            )
            is_loop = False
        elif kind == "range" and args:
            trips.append(
                (
                    ast.unparse(args[0] if len(args) == 1 else args[1]),
                    ast.unparse(args[2]) if len(args) >= 3 else "1",
                )
            )
            stages = kwarg(stmt.iter, "num_stages", 3)  # type: ignore[arg-type]
            loop_stages.append(ast.unparse(stages) if stages is not None else "1")
        loops += is_loop
        params_here: set[str] = set()
        for c in calls(stmt, "load") if id(stmt) not in peeled else []:
            params_here |= kv.pointer_params_of(c)
        if is_loop:
            loads_per_iter = max(loads_per_iter, len(calls(stmt, "load")))
        for p in params_here:
            passes[p] = passes.get(p, 0) + 1
        for c in calls(stmt, "store"):
            stores |= kv.pointer_params_of(c)
        for c in [
            c
            for c in ast.walk(stmt)
            if isinstance(c, ast.Call)
            and isinstance(c.func, ast.Attribute)
            and c.func.attr.startswith("atomic_")
        ]:
            atomics |= kv.pointer_params_of(c)
            atomic_calls += 1
            atomic_widths += sorted(kv.unit_stride_bounds(c.args[0]))[:1] if c.args else []
    # loads outside loops were counted once per statement: a program reads such data once, and
    # one element of a tensor its loops stream (cross_entropy's logit at the target) is no pass
    tiles = _tile_names(body)
    straight = [s for s in body if not isinstance(s, (ast.For, ast.While))]
    straight_params: set[str] = set()
    straight_tiles: set[str] = set()
    for s in [s for s in straight if id(s) not in peeled]:
        for c in calls(s, "load"):
            straight_params |= kv.pointer_params_of(c)
            if c.args and _is_tile(c.args[0], tiles):
                straight_tiles |= kv.pointer_params_of(c)
    for p in straight_params:
        loop_passes = sum(
            1
            for s in body
            if isinstance(s, (ast.For, ast.While))
            and any(p in kv.pointer_params_of(c) for c in calls(s, "load"))
        )
        passes[p] = loop_passes + (1 if p in straight_tiles or not loop_passes else 0)
    if not loads_per_iter:
        loads_per_iter = max(1, len([c for s in straight for c in calls(s, "load")]))
    grouped = any("group" in p.lower() for p in kv.params) or kv.uses("swizzle2d")
    contiguous = [
        b
        for s in body
        for c in calls(s, "load")
        if c.args
        for b in sorted(kv.unit_stride_bounds(c.args[0]))[:1]
    ]
    tile_passes: dict[str, int] = {}
    tile_loads = [0, 0]  # straight-line statements, loops
    specials = [0, 0]
    for stmt in body:
        in_loop = int(isinstance(stmt, (ast.For, ast.While)))
        loaded = [c for c in calls(stmt, "load") if c.args and _is_tile(c.args[0], tiles)]
        tile_loads[in_loop] += len(loaded)
        for p in {p for c in loaded for p in kv.pointer_params_of(c)}:
            tile_passes[p] = tile_passes.get(p, 0) + 1
        specials[in_loop] += sum(
            1
            for c in ast.walk(stmt)
            if isinstance(c, ast.Call)
            and _attr(c.func) in _SPECIAL
            and any(_is_tile(a, tiles) for a in c.args)
        )
    if tile_loads[1]:  # the loops stream the data; what is outside them runs once per program
        per_element, per_program = specials[1] / tile_loads[1], specials[0]
    else:
        per_element, per_program = specials[0] / max(tile_loads[0], 1), 0
    return KernelShape(
        passes,
        stores,
        atomics,
        kv.uses("dot"),
        loops,
        loads_per_iter,
        trips,
        loop_stages,
        unrolled,
        grouped,
        atomic_calls,
        atomic_widths,
        contiguous,
        tile_passes,
        per_element,
        per_program,
    )


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= int(x)
    return out


def _tile_elems(rec: LaunchRecord, kv_tiles: list[str]) -> int:
    values = {a.name: a.value for a in rec.args if a.kind == "constexpr"} | rec.config
    tiles = [values[t] for t in kv_tiles if isinstance(values.get(t), int)]
    return _prod(tiles) if tiles else 1024


def dot_efficiency(values: dict, num_warps: int, num_stages: int, dev: DeviceModel) -> float:
    """Fraction of the tensor-core rate a tile configuration reaches (a rough, monotone model)."""
    bm = next((v for k, v in values.items() if k.upper().endswith("M") and isinstance(v, int)), 64)
    bn = next((v for k, v in values.items() if k.upper().endswith("N") and isinstance(v, int)), 64)
    bk = next((v for k, v in values.items() if k.upper().endswith("K") and isinstance(v, int)), 32)
    intensity = (bm * bn / (bm + bn)) / (128 * 256 / (128 + 256))  # operand reuse per loaded byte
    eff = min(1.0, intensity) ** 0.8
    prefetched = max(
        num_stages - 1, 0.5
    )  # tiles loaded ahead; one stage: loads and MMAs do not overlap
    eff *= min(1.0, bk * prefetched / dev.dot_k_depth) ** dev.dot_depth_exponent
    eff *= min(1.0, prefetched / dev.dot_prefetch_stages) ** dev.dot_prefetch_exponent
    eff *= dev.dot_tall_tile_factor if bm > bn else 1.0
    eff *= 0.85 if (bm * bn >= 128 * 128 and num_warps < 8) else 1.0
    return max(eff, 0.05)


def executed_instructions(
    facts: CompiledFacts, shape: KernelShape, lane_bytes: float, iters: int
) -> float:
    """SASS instructions one thread executes: its straight-line code once, its loop bodies once
    a pass. ptxas unrolls loops (the first-draft softmax's three hold nine 128-bit loads, rmsnorm's
    twenty-one 64-bit ones), so the passes are the bytes a lane loads over what one pass over the
    compiled bodies loads, not the source's trip count; without load widths, the trip count."""
    if not shape.loops or not facts.loop_instructions:
        return float(facts.instructions)
    per_pass = sum(int(bits) // 8 * n for bits, n in facts.global_load_bits.items())
    passes = max(1.0, lane_bytes / per_pass) if per_pass else float(iters)
    return facts.instructions + facts.loop_instructions * (passes - 1)


def launch_time_us(
    rec: LaunchRecord,
    facts: CompiledFacts | None,
    shape: KernelShape,
    tiles: list[str],
    dev: DeviceModel,
    flops: int | None,
) -> float:
    if facts is not None and not facts.ok:
        return math.inf
    programs = max(1, _prod(rec.grid))
    threads = 32 * rec.num_warps
    regs = facts.n_regs if facts and facts.n_regs else 32
    smem = facts.shared_bytes if facts and facts.shared_bytes else 0
    per_sm = min(
        dev.max_blocks_per_sm,
        dev.max_warps_per_sm // rec.num_warps,
        dev.regs_per_sm // max(1, regs * threads),
        (dev.smem_per_sm // smem) if smem else 10**6,
    )
    if per_sm <= 0:
        return math.inf
    resident = per_sm * dev.sms
    waves = programs / resident
    # the share of the units a partial wave keeps busy (tensor cores, special functions)
    wave_eff = waves / math.ceil(waves) if waves > 1 else min(1.0, waves) ** 0.25
    sizes = {a.name: a.nbytes for a in rec.args if a.kind == "ptr"}
    # the element size of what the loads stream (col_sum loads bf16 and stores fp32)
    loaded = [a for a in rec.args if a.kind == "ptr" and a.numel and a.name in shape.passes] or [
        a for a in rec.args if a.kind == "ptr" and a.numel
    ]
    elem = max((a.nbytes // a.numel for a in loaded), default=2)
    tile = _tile_elems(rec, tiles)
    dram = 0.0
    for p, n in shape.passes.items():
        nbytes = sizes.get(p, 0)
        # A re-read hits L2 in the share of the resident programs' slices that L2 holds: H200
        # cross_entropy rows of 64 KB, two passes, 528 programs resident (34 MB) ran as fast as
        # one pass (1.24x vs 1.08x over the 2,112-resident first draft, 138 MB).
        working_set = nbytes / programs * min(resident, programs)
        hit = 1.0 / (
            1.0 + (working_set / (dev.l2_bytes * dev.l2_reuse_share)) ** dev.l2_reuse_sharpness
        )
        dram += nbytes * (1 + (n - 1) * (1 - hit + hit * dev.l2_reread_cost))
    for p in shape.stores | shape.atomics:
        dram += sizes.get(p, 0) * (1.5 if p in shape.atomics else 1.0)
    spills = (facts.n_spills or 0) if facts else 0
    on_sm = math.ceil(programs / dev.sms)  # programs the busiest SM runs
    at_once_on_sm = min(on_sm, per_sm)  # ... of them resident together
    spilled_on_sm = spills * threads * at_once_on_sm
    off_chip = (
        max(0.0, 1.0 - dev.spill_l1_bytes / spilled_on_sm)
        if spilled_on_sm and dev.spill_l1_bytes
        else 1.0
    )
    dram += spills * 4 * threads * programs * dev.spill_traffic * off_chip
    values = {a.name: a.value for a in rec.args if a.kind in ("constexpr", "int")} | rec.config
    # unrolled loops keep all their loads in flight at once
    loads = max(
        [shape.loads_per_iteration]
        + [n * values[e] for e, n in shape.unrolled if isinstance(values.get(e), int)]
    )
    runs = [values[b] * elem for b in shape.contiguous if isinstance(values.get(b), int)]
    short_runs = min(1.0, min(runs) / dev.line_bytes) ** dev.short_run_exponent if runs else 1.0

    # tiles a streaming loop's pipeline has in flight (unpipelined, unrolled or loop-free: one)
    depth = max(
        [v for e in shape.loop_stages if isinstance(v := values.get(e, _int(e)), int)], default=1
    )
    prefetched = max(1, depth - 1) ** dev.loop_prefetch_exponent if not shape.uses_dot else 1.0

    def stream_bw(
        at_once: float,
    ) -> float:  # bytes/us that `at_once` programs' loads in flight sustain
        in_flight = at_once * tile * elem * max(1, loads) * prefetched
        busy_sms = min(dev.sms, max(at_once, 1.0))
        warps_on_sm = rec.num_warps * max(at_once, 1.0) / busy_sms
        sm_gbps = (
            dev.sm_stream_gbps
            * min(1.0, warps_on_sm / dev.sm_stream_warps) ** dev.sm_stream_warp_exponent
        )
        return (
            min(
                dev.bandwidth_gbps * 1e3,
                busy_sms * sm_gbps * 1e3,
                in_flight / (dev.memory_latency_us * 1e-6) / 1e6,
            )
            * short_runs
        )

    bw = stream_bw(min(resident, programs))
    if waves > 1:
        # The last, partial wave streams at what its own programs keep in flight, which is often
        # still the full bandwidth: H200 col_sum, 1,024 programs of 136 registers (2.6 waves)
        # measured fastest of 56 tilings (40.1 us), which rounding up to 3 whole waves estimated
        # 11% slower than 16x64 tiles (43.7 us). Spearman rho on those 56 tilings 0.39 -> 0.48,
        # rmsnorm's search variants (run B) 0.74 -> 0.82, the other examples' unchanged
        # (bench/cost_model_fit.py).
        last = waves - math.floor(waves)
        mem_us = dram * (math.floor(waves) / waves) / bw + (
            dram * (last / waves) / stream_bw(last * resident) if last > 1e-9 else 0.0
        )
    else:
        mem_us = dram / bw / max(min(1.0, waves) ** dev.under_wave_exponent, 0.05)
    iters = 1
    known = [
        math.ceil(values[stop] / values[step]) if step in values else values[stop]
        for stop, step in shape.trips
        if isinstance(values.get(stop), int) and (step == "1" or isinstance(values.get(step), int))
    ]
    n_arg = next(
        (
            a.value
            for a in rec.args
            if a.kind == "int" and isinstance(a.value, int) and a.value > tile
        ),
        None,
    )
    if known:
        iters = max(known)
    elif shape.loops and n_arg:  # a loop whose trip count the source does not spell out
        iters = math.ceil(n_arg / tile)
    # The launch's stages (3 by default) stand for the iterations a loop overlaps, pipelined or
    # not: warps and resident programs overlap an unpipelined streaming loop's round trips too.
    # With the loop's own depth instead (1 unpipelined) the first drafts of cross_entropy
    # (1024x131072) and rmsnorm (4096x8192), unpipelined loops, were estimated at 530 / 87 us
    # against 243 / 48 measured (H200, runs S-AH), and rho moved by at most 0.04
    # (bench/cost_model_fit.py, 2026-12-01).
    round_trips = max(1, sum(shape.passes.values())) * (1 + (iters - 1) / max(rec.num_stages, 1))
    # Waves overlap on a GPU: latency adds up only logarithmically with the number of waves.
    latency = dev.dot_operand_latency_us if shape.uses_dot else dev.memory_latency_us
    latency_us = round_trips * latency * (1 + math.log2(max(waves, 1.0)))
    issue_us = 0.0
    if not shape.uses_dot and facts is not None and facts.instructions:
        lane = sum(sizes.get(p, 0) * n for p, n in shape.passes.items()) / programs / threads
        executed = executed_instructions(facts, shape, lane, iters)
        warps_at_once = at_once_on_sm * rec.num_warps
        rate = (
            dev.issue_per_cycle
            * dev.clock_mhz
            * min(1.0, warps_at_once / dev.issue_warps) ** dev.issue_exponent
        )
        issue_us = on_sm * rec.num_warps * executed / rate
    compute_us = 0.0
    if shape.uses_dot and flops:
        tiles_cfg = {a.name: a.value for a in rec.args if a.kind == "constexpr"} | rec.config
        compute_us = (
            flops
            / (
                dev.bf16_tflops
                * 1e6
                * dot_efficiency(tiles_cfg, rec.num_warps, rec.num_stages, dev)
            )
            / max(wave_eff, 0.05)
        )
    slowdown = 1 + min(dev.spill_max, spills / 256)  # register spills
    widths = [values[w] for w in shape.atomic_widths if isinstance(values.get(w), int)]
    lanes = rec.num_warps * max(widths, default=64)
    per_atomic = max(1.0, lanes / dev.atomic_free_lanes) ** dev.atomic_lanes_exponent
    atomic_us = programs * shape.atomic_calls * dev.atomic_program_ns * per_atomic / 1000
    numel = {a.name: a.numel for a in rec.args if a.kind == "ptr"}
    tile_elements = sum(numel.get(p, 0) * n for p, n in shape.tile_passes.items())
    specials = (
        tile_elements * shape.specials_per_element + programs * tile * shape.specials_per_program
    )
    special_us = specials / (dev.special_tops * 1e6) / max(wave_eff, 0.05)
    tail_us = waves * dev.atomic_tail_us * per_atomic if shape.atomic_calls else 0.0
    stream_us = mem_us * slowdown + tail_us
    # while one program computes, the others on its SM stream: short of `needed` they cannot
    # keep the bandwidth busy, and that share of the smaller time adds (see DeviceModel)
    needed = (
        dev.bandwidth_gbps * 1e3 / dev.sms * dev.memory_latency_us / (tile * elem * max(1, loads))
    )
    short = min(1.0, max(0.0, 1.0 - (at_once_on_sm - 1) / needed))
    overlapped = max(stream_us, issue_us) + short * min(stream_us, issue_us)
    return max(overlapped, latency_us, compute_us, atomic_us, special_us) + dev.launch_us


def case_time_us(
    case: CaseLaunches,
    facts: dict[int, CompiledFacts | None],
    source: str,
    tiles: dict[str, list[str]],
    dev: DeviceModel,
    flops: int | None,
) -> float:
    """One benchmark case: its launches (best autotune config per kernel) plus host-side work."""
    by_kernel: dict[str, list[float]] = {}
    for i, rec in enumerate(case.launches):
        constexprs = {a.name: a.value for a in rec.args if a.kind == "constexpr"} | rec.config
        shape = kernel_shape(source, rec.kernel, constexprs)
        if shape is None:
            continue
        t = launch_time_us(rec, facts.get(i), shape, tiles.get(rec.kernel, []), dev, flops)
        key = rec.kernel if rec.config else f"{rec.kernel}#{i}"
        by_kernel.setdefault(key, []).append(t)
    total = sum(min(ts) for ts in by_kernel.values())  # autotune picks its best config
    from ..evaluate.op_sets import ALLOWED_OPS, COPY_OPS, FILL_OPS

    host = case.host_ops
    device_kernels = sum(
        n for op, n in host.items() if op in FILL_OPS or op in COPY_OPS or (op not in ALLOWED_OPS)
    )  # each is a launch
    # launches on a side stream run beside the kernels, hidden while those last longer
    beside = min(side_stream_launches(source), device_kernels) * dev.launch_us
    total += case.host_bytes / (dev.bandwidth_gbps * 1e3)
    total += device_kernels * dev.launch_us - min(beside, total)
    total += host.get("_local_scalar_dense", 0) * dev.host_sync_us
    return total


@functools.lru_cache(maxsize=512)  # asked once per case of every estimate
def side_stream_launches(source: str) -> int:
    """Device operations issued inside `with torch.cuda.stream(...)` blocks (what
    `overlap-checks` makes of a launcher's asserts): each call, comparison and arithmetic or
    logical operator there counts as one launch. The dry run cannot tell: on the CPU the side
    stream is None."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return 0
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and any(
            isinstance(i.context_expr, ast.Call)
            and isinstance(i.context_expr.func, ast.Attribute)
            and i.context_expr.func.attr == "stream"
            for i in node.items
        ):
            count += sum(
                isinstance(n, (ast.Call, ast.Compare, ast.BinOp, ast.UnaryOp, ast.BoolOp))
                for s in node.body
                for n in ast.walk(s)
            )
    return count


def tile_names(source: str, kernel: str) -> list[str]:
    """Constexprs that size the kernel's tile (`tl.arange` bounds and loop steps)."""
    kv = next((k for k in kernel_views(parse_module(source)) if k.name == kernel), None)
    return kv.tile_constexprs() if kv is not None else []


def matmul_flops(case: CaseLaunches) -> int | None:
    for rec in case.launches:
        mats = [a.shape for a in rec.args if a.kind == "ptr" and len(a.shape) == 2]
        if len(mats) >= 2 and mats[0][1] == mats[1][0]:
            return 2 * mats[0][0] * mats[0][1] * mats[1][1]
    return None


def case_bytes_and_flops(cases: list[CaseLaunches]) -> tuple[list[int], list[int | None]]:
    """Compulsory bytes (every distinct tensor a case's launches touch, once) and matmul FLOPs."""
    out_b: list[int] = []
    out_f: list[int | None] = []
    for c in cases:
        seen: dict[str, int] = {}
        for rec in c.launches:
            for a in rec.args:
                if a.kind == "ptr":
                    seen[a.name] = max(seen.get(a.name, 0), a.nbytes)
        out_b.append(sum(seen.values()))
        out_f.append(matmul_flops(c))
    return out_b, out_f


class CostModel:
    """The default estimator of the search: per-case times (µs) of a dry-run, AOT-compiled
    candidate on `dev`. Injected into the search, as Triton's autotuner takes a `perf_model`."""

    def __init__(self, dev: DeviceModel | None = None):
        self.dev = dev or DeviceModel()

    def estimate(
        self, spec: SpecializeResult | None, facts: dict[int, dict[int, CompiledFacts]], source: str
    ) -> list[float] | None:
        if spec is None or not spec.cases:
            return None
        kernels = {rec.kernel for c in spec.cases for rec in c.launches}
        tiles = {k: tile_names(source, k) for k in kernels}
        return [
            case_time_us(c, facts.get(ci, {}), source, tiles, self.dev, matmul_flops(c))
            for ci, c in enumerate(spec.cases)
        ]
