"""Hand-written kernel structures for the examples the search has not brought to target.

Why: before writing a mutator, learn on the GPU which structure reaches the target at all
(col_sum and cross_entropy plateaued below 85% of copy under every configuration the search
tried; matmul sits at 0.83-0.86x cuBLAS). Each variant is checked against the example's reference
on the benchmark inputs, then timed with `triton.testing.do_bench` (L2 flushed, median).

Usage (GPU): python3 bench/structure_probe.py --out probe.json [--ops col_sum,cross_entropy,matmul]
             python3 bench/structure_probe.py --ops col_sum_forms --timer engine --repeat 3 --top 0
Usage (CPU check of the kernels, interpreter): TRITON_INTERPRET=1 python3 bench/structure_probe.py --cpu
"""

import argparse
import itertools
import json
import os
import re
import sys
import time

import torch
import triton
import triton.language as tl

sys.path.insert(0, "examples")
from ops import col_sum as col_sum_mod  # noqa: E402
from ops import cross_entropy as ce_mod  # noqa: E402
from ops import matmul as mm_mod  # noqa: E402

# --- col_sum ------------------------------------------------------------------------------------


@triton.jit
def col_sum_strip(
    x_ptr,
    out_ptr,
    n_rows,
    n_cols,
    stride_row,
    ROWS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """A column strip of BLOCK_N, ROWS rows per program, a 2-D fp32 accumulator, one atomic."""
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    row0 = pid_m * ROWS
    for r in range(0, ROWS, BLOCK_M):
        rows = row0 + r + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        x = tl.load(x_ptr + rows[:, None] * stride_row + cols[None, :], mask=mask, other=0.0)
        acc += x.to(tl.float32)
    tl.atomic_add(out_ptr + cols, tl.sum(acc, axis=0), mask=cols < n_cols)


def col_sum_strip_launch(rows, bm, bn, warps, stages):
    def run(x):
        n_rows, n_cols = x.shape
        out = torch.zeros(n_cols, dtype=torch.float32, device=x.device)
        grid = (triton.cdiv(n_cols, bn), triton.cdiv(n_rows, rows))
        col_sum_strip[grid](
            x,
            out,
            n_rows,
            n_cols,
            x.stride(0),
            ROWS=rows,
            BLOCK_M=bm,
            BLOCK_N=bn,
            num_warps=warps,
            num_stages=stages,
        )
        return out

    return run


@triton.jit
def col_sum_own_columns(
    x_ptr,
    out_ptr,
    n_rows,
    n_cols,
    stride_row,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    STAGES: tl.constexpr,
):
    """One program per column strip over every row, storing its own columns: no atomics, so the
    launcher needs no zero-filled output (the zero-fill measured 1.8 us before a 37 us read, run AD)."""
    pid_n = tl.program_id(0)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for r in tl.range(0, n_rows, BLOCK_M, num_stages=STAGES):
        rows = r + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        acc += tl.load(x_ptr + rows[:, None] * stride_row + cols[None, :], mask=mask, other=0.0).to(
            tl.float32
        )
    tl.store(out_ptr + cols, tl.sum(acc, axis=0), mask=cols < n_cols)


def col_sum_own_columns_launch(bm, bn, warps, stages):
    def run(x):
        n_rows, n_cols = x.shape
        out = torch.empty(n_cols, dtype=torch.float32, device=x.device)
        col_sum_own_columns[(triton.cdiv(n_cols, bn),)](
            x,
            out,
            n_rows,
            n_cols,
            x.stride(0),
            BLOCK_M=bm,
            BLOCK_N=bn,
            STAGES=stages,
            num_warps=warps,
        )
        return out

    return run


@triton.jit
def col_sum_unrolled(
    x_ptr,
    out_ptr,
    n_rows,
    n_cols,
    stride_row,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    ITERS: tl.constexpr,
):
    """The search's best so far: ITERS row blocks unrolled, one atomic."""
    pid_n = tl.program_id(0)
    pid_m_first = tl.program_id(1)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for it in tl.static_range(ITERS):
        rows = (pid_m_first * ITERS + it) * BLOCK_M + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        acc += tl.load(x_ptr + rows[:, None] * stride_row + cols[None, :], mask=mask, other=0.0).to(
            tl.float32
        )
    tl.atomic_add(out_ptr + cols, tl.sum(acc, axis=0), mask=cols < n_cols)


def col_sum_unrolled_launch(bm, bn, iters, warps):
    def run(x):
        n_rows, n_cols = x.shape
        out = torch.zeros(n_cols, dtype=torch.float32, device=x.device)
        grid = (triton.cdiv(n_cols, bn), triton.cdiv(triton.cdiv(n_rows, bm), iters))
        col_sum_unrolled[grid](
            x,
            out,
            n_rows,
            n_cols,
            x.stride(0),
            BLOCK_M=bm,
            BLOCK_N=bn,
            ITERS=iters,
            num_warps=warps,
        )
        return out

    return run


@triton.jit
def col_sum_split_partial(
    x_ptr, part_ptr, n_rows, n_cols, stride_row, ROWS, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr
):
    """Deterministic split reduction (no atomics): program (n, m) sums rows [m*ROWS, m*ROWS+ROWS)
    of its column strip into row m of an fp32 workspace."""
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for r in range(pid_m * ROWS, pid_m * ROWS + ROWS, BLOCK_M):
        rows = r + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        acc += tl.load(x_ptr + rows[:, None] * stride_row + cols[None, :], mask=mask, other=0.0).to(
            tl.float32
        )
    tl.store(part_ptr + pid_m * n_cols + cols, tl.sum(acc, axis=0), mask=cols < n_cols)


@triton.jit
def col_sum_split_combine(part_ptr, out_ptr, n_cols, SPLITS: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    parts = tl.arange(0, SPLITS)
    p = tl.load(
        part_ptr + parts[:, None] * n_cols + cols[None, :], mask=cols[None, :] < n_cols, other=0.0
    )
    tl.store(out_ptr + cols, tl.sum(p, axis=0), mask=cols < n_cols)


def col_sum_split_launch(splits, bm, bn, warps):
    def run(x):
        n_rows, n_cols = x.shape
        rows = triton.cdiv(triton.cdiv(n_rows, splits), bm) * bm
        part = torch.empty((splits, n_cols), dtype=torch.float32, device=x.device)
        out = torch.empty(n_cols, dtype=torch.float32, device=x.device)
        col_sum_split_partial[(triton.cdiv(n_cols, bn), splits)](
            x, part, n_rows, n_cols, x.stride(0), rows, BLOCK_M=bm, BLOCK_N=bn, num_warps=warps
        )
        col_sum_split_combine[(triton.cdiv(n_cols, 64),)](
            part, out, n_cols, SPLITS=splits, BLOCK_N=64
        )
        return out

    return run


def col_sum_variants(quick):
    v = {
        "first-draft": col_sum_mod.col_sum,
        "torch.sum(dim=0)": lambda x: x.sum(dim=0, dtype=torch.float32),
    }
    if not quick:
        v["torch.compile(reference)"] = torch.compile(col_sum_mod.col_sum_ref)
    for splits, bm, bn, warps in (
        [(64, 16, 128, 4)]
        if quick
        else itertools.product((32, 64, 128, 256), (8, 16, 32), (64, 128, 256), (4, 8))
    ):
        if bm * bn <= 8192:
            v[f"split{splits} {bm}x{bn} w{warps}"] = col_sum_split_launch(splits, bm, bn, warps)
    for bm, bn, iters, warps in (
        [] if quick else itertools.product((8, 16, 32), (64, 128, 256), (4, 8, 16, 32), (4, 8))
    ):
        if bm * bn <= 8192 and bm * iters <= 512:
            v[f"unrolled {bm}x{bn} x{iters} w{warps}"] = col_sum_unrolled_launch(
                bm, bn, iters, warps
            )
    v["unrolled 32x64 x4 w4 (search best)"] = col_sum_unrolled_launch(32, 64, 4, 4)
    v["unrolled 16x256 x8 w4"] = col_sum_unrolled_launch(16, 256, 8, 4)
    v["unrolled 8x512 x8 w4"] = col_sum_unrolled_launch(8, 512, 8, 4)
    v["unrolled 8x512 x16 w8"] = col_sum_unrolled_launch(8, 512, 16, 8)
    grid = (
        [(256, 16, 256, 4, 1), (256, 32, 128, 4, 1)]
        if quick
        else list(itertools.product((256, 1024), (8, 16, 32), (128, 256, 512), (4, 8), (1, 3)))
    )
    for rows, bm, bn, warps, stages in grid:
        if bm * bn > 8192 or rows < bm:
            continue
        v[f"strip rows{rows} {bm}x{bn} w{warps} s{stages}"] = col_sum_strip_launch(
            rows, bm, bn, warps, stages
        )
    own = (
        [(64, 32, 4, 3)]
        if quick
        else [
            (bm, bn, w, st)
            for bm, bn, w, st in itertools.product(
                (64, 128, 256, 512), (16, 32, 64), (4, 8, 16), (1, 3, 4)
            )
            if 2048 <= bm * bn <= 16384 and bm * bn >= 32 * w * 4
        ]
    )
    if not quick:  # around the first sweep's best (256 x 32, 4 warps, 4 stages: 37.0 us, run AG)
        own += [
            (bm, bn, w, st)
            for bm, bn, w, st in itertools.product((128, 256, 512), (32, 64), (2, 4, 8), (5, 6, 8))
            if bm * bn <= 16384 and bm * bn >= 32 * w * 4
        ]
    for bm, bn, warps, stages in own:
        v[f"own columns {bm}x{bn} w{warps} s{stages}"] = col_sum_own_columns_launch(
            bm, bn, warps, stages
        )
    return v


# --- col_sum: the search's kernel form against the probe's, at fixed tilings ----------------------


@triton.jit
def col_sum_peeled(
    x_ptr,
    out_ptr,
    n_rows,
    n_cols,
    stride_row,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    LOOP_STAGES: tl.constexpr,
    HINTS: tl.constexpr,
):
    """What `own-columns` writes (its first row block peeled so the accumulator starts as a tile),
    optionally with `hints`' contiguity hints, as in run AQ's best bucket."""
    pid_n = tl.program_id(0)
    pid_m = 0
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if HINTS:
        rows = tl.max_contiguous(tl.multiple_of(rows, BLOCK_M), BLOCK_M)
        cols = tl.max_contiguous(tl.multiple_of(cols, BLOCK_N), BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    acc = tl.load(x_ptr + rows[:, None] * stride_row + cols[None, :], mask=mask, other=0.0).to(
        tl.float32
    )
    for pid_m in tl.range(1, tl.cdiv(n_rows, BLOCK_M), num_stages=LOOP_STAGES):
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        if HINTS:
            rows = tl.max_contiguous(tl.multiple_of(rows, BLOCK_M), BLOCK_M)
            cols = tl.max_contiguous(tl.multiple_of(cols, BLOCK_N), BLOCK_N)
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        acc += tl.load(x_ptr + rows[:, None] * stride_row + cols[None, :], mask=mask, other=0.0).to(
            tl.float32
        )
    tl.store(out_ptr + cols, tl.sum(acc, axis=0), mask=cols < n_cols)


@triton.jit
def col_sum_zero_start(
    x_ptr,
    out_ptr,
    n_rows,
    n_cols,
    stride_row,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    LOOP_STAGES: tl.constexpr,
    HINTS: tl.constexpr,
):
    """The same loop over block indices from 0, the accumulator a zero tile (no peeled block)."""
    pid_n = tl.program_id(0)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for pid_m in tl.range(0, tl.cdiv(n_rows, BLOCK_M), num_stages=LOOP_STAGES):
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        if HINTS:
            rows = tl.max_contiguous(tl.multiple_of(rows, BLOCK_M), BLOCK_M)
            cols = tl.max_contiguous(tl.multiple_of(cols, BLOCK_N), BLOCK_N)
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        acc += tl.load(x_ptr + rows[:, None] * stride_row + cols[None, :], mask=mask, other=0.0).to(
            tl.float32
        )
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(out_ptr + cols, tl.sum(acc, axis=0), mask=cols < n_cols)


def col_sum_form_launch(kernel, bm, bn, warps, stages, hints):
    def run(x):
        n_rows, n_cols = x.shape
        out = torch.empty(n_cols, dtype=torch.float32, device=x.device)
        kernel[(triton.cdiv(n_cols, bn),)](
            x,
            out,
            n_rows,
            n_cols,
            x.stride(0),
            BLOCK_M=bm,
            BLOCK_N=bn,
            LOOP_STAGES=stages,
            HINTS=hints,
            num_warps=warps,
        )
        return out

    return run


def col_sum_autotuned_launch(kernel, configs, hints):
    tuned = triton.autotune(
        [
            triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "LOOP_STAGES": st}, num_warps=w)
            for bm, bn, w, st in configs
        ],
        key=["n_rows", "n_cols"],
    )(kernel)

    def run(x):
        n_rows, n_cols = x.shape
        out = torch.empty(n_cols, dtype=torch.float32, device=x.device)
        tuned[lambda meta: (triton.cdiv(n_cols, meta["BLOCK_N"]),)](
            x, out, n_rows, n_cols, x.stride(0), HINTS=hints
        )
        return out

    return run, tuned


def search_record_best(path):
    """The entry point of a search record's best variant (`bench/gpu_search.py`'s JSON), imported
    from its source as the search wrote it."""
    import importlib.util
    import tempfile

    row = json.load(open(path))[0]
    source = next(v["source"] for v in row["variants"] if v["id"] == row["best"])
    folder = tempfile.mkdtemp(prefix="kb-probe-")
    file = os.path.join(folder, f"best_{row['best']}.py")
    with open(file, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(f"best_{row['best']}", file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, row["op"])


def add_search_best(variants, record):
    """A search record's best file among the variants (KB_PROBE_SEARCH_RECORD overrides which
    record), so a probe compares its hand-written forms with what the search shipped."""
    record = os.environ.get("KB_PROBE_SEARCH_RECORD", record)
    if os.path.exists(record):
        variants[f"search best ({os.path.basename(record)})"] = search_record_best(record)


# AG's two fastest own-columns tilings, AQ's autotune list (rows x columns, warps, loop depth)
FORM_TILINGS = [
    (256, 64, 8, 5),
    (256, 64, 8, 6),
    (128, 64, 8, 8),
    (256, 32, 4, 5),
    (256, 32, 4, 6),
    (128, 32, 4, 5),
    (128, 32, 4, 6),
    (256, 16, 4, 5),
]
AQ_LIST = [
    (256, 32, 4, 5),
    (256, 32, 4, 6),
    (128, 32, 4, 5),
    (128, 32, 4, 6),
    (256, 16, 4, 5),
    (256, 16, 4, 6),
]
TUNED = []  # the autotuned kernels, so the probe can say which configuration each picked


def col_sum_form_variants(quick):
    """Why run AQ's strips (37.0 us alone) stayed short of AG's probe (35.7 us) at the same tilings:
    the peeled first block, the hints, or the autotuner's pick."""
    v = {"first-draft": col_sum_mod.col_sum}
    tilings = FORM_TILINGS[:1] if quick else FORM_TILINGS
    for bm, bn, w, st in tilings:
        v[f"probe own columns {bm}x{bn} w{w} s{st}"] = col_sum_own_columns_launch(bm, bn, w, st)
        for name, kernel in (("peeled", col_sum_peeled), ("zero-start", col_sum_zero_start)):
            for hints in (False, True):
                v[f"{name}{' hints' if hints else ''} {bm}x{bn} w{w} s{st}"] = col_sum_form_launch(
                    kernel, bm, bn, w, st, hints
                )
    if not quick:
        for label, configs in (
            ("AQ list", AQ_LIST),
            ("AQ list + 256x64 w8", AQ_LIST + [(256, 64, 8, 5), (256, 64, 8, 6)]),
        ):
            for name, kernel in (("peeled", col_sum_peeled), ("zero-start", col_sum_zero_start)):
                run, tuned = col_sum_autotuned_launch(kernel, configs, True)
                TUNED.append((f"autotuned {name} hints, {label}", tuned))
                v[f"autotuned {name} hints, {label}"] = run
        add_search_best(v, "bench/runs/2026-12-01/AQ-col_sum.json")
    return v


# --- a plain read stream: the read-only ceiling col_sum and cross_entropy are held to ---------


@triton.jit
def read_sum(x_ptr, part_ptr, n, ITERS: tl.constexpr, BLOCK: tl.constexpr):
    """ITERS contiguous blocks per program, one fp32 partial per program."""
    pid = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for i in range(ITERS):
        offs = (pid * ITERS + i).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


def read_sum_launch(block, iters, warps):
    def run(x):
        n = x.numel()
        grid = triton.cdiv(n, block * iters)
        part = torch.empty(grid, dtype=torch.float32, device=x.device)
        read_sum[(grid,)](x, part, n, ITERS=iters, BLOCK=block, num_warps=warps)
        return part.sum().reshape(1)

    return run


@triton.jit
def read_sum_persistent(x_ptr, part_ptr, n, TILES, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    """A fixed grid (a few programs an SM), each striding over the tiles: no partial last wave."""
    pid = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for t in tl.range(pid, TILES, tl.num_programs(0), num_stages=STAGES):
        offs = t * BLOCK + tl.arange(0, BLOCK)  # < 2**31: the probe reads at most 2**27 elements
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


def read_persistent_launch(block, per_sm, warps, stages):
    def run(x):
        n = x.numel()
        tiles = triton.cdiv(n, block)
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 4
        grid = min(tiles, sms * per_sm)
        part = torch.empty(grid, dtype=torch.float32, device=x.device)
        read_sum_persistent[(grid,)](x, part, n, tiles, BLOCK=block, STAGES=stages, num_warps=warps)
        return part.sum().reshape(1)

    return run


def _after_zero_fill(run):
    def both(x):
        torch.zeros(4096, dtype=torch.float32, device=x.device)
        return run(x)

    return both


def read_variants(quick):
    v = {"torch.sum (all elements)": lambda x: x.sum(dtype=torch.float32).reshape(1)}
    grid = (
        [(4096, 4, 4)]
        if quick
        else list(itertools.product((1024, 2048, 4096, 8192), (1, 2, 4, 8, 16), (4, 8, 16)))
    )
    for block, iters, warps in grid:
        if block // (32 * warps) < 2:
            continue
        v[f"triton read {block} x{iters} w{warps}"] = read_sum_launch(block, iters, warps)
    # persistent: a fixed grid striding over the tiles has no partial last wave. H200, 128 MB (runs
    # AC, AD): the best of 72 took 37.2 us, the best plain grid 36.5-37.0 us (1024 x 16, 8 warps)
    pgrid = (
        [(2048, 4, 8, 2)]
        if quick
        else [
            (b, k, w, st)
            for b, k, w, st in itertools.product(
                (1024, 2048, 4096), (1, 2, 4, 8), (4, 8, 16), (1, 3)
            )
            if b // (32 * w) >= 2
        ]
    )
    # col_sum's launcher zero-fills its fp32 output before the kernel adds into it: one launch more
    # than a plain read of the same bytes
    v["zero-fill 4096 fp32 + triton read 2048 x16 w16"] = _after_zero_fill(
        read_sum_launch(2048, 16, 16)
    )
    for block, per_sm, warps, stages in pgrid:
        v[f"persistent read {block} {per_sm}/SM w{warps} s{stages}"] = read_persistent_launch(
            block, per_sm, warps, stages
        )
    return v


def read_inputs(device="cuda"):
    return [
        (torch.randn(2**26, device=device, dtype=torch.bfloat16),),
        (torch.randn(2**27, device=device, dtype=torch.bfloat16),),
    ]


def read_small_inputs(device="cpu"):
    return [(torch.randn(70000, device=device, dtype=torch.bfloat16),)]


# --- cross_entropy ------------------------------------------------------------------------------


@triton.jit
def row_lse(row_ptr, n_cols, BLOCK: tl.constexpr):
    """Online log-sum-exp of one row with a scalar running max: one exp per element (the
    vector-max form computes two, exp(m - m_new) and exp(x - m_new), per element)."""
    m = float("-inf")
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(row_ptr + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a chunk of -inf only: no nan
        s = s * tl.exp(m - m_safe) + tl.exp(x - m_safe)
        m = m_new
    return m + tl.log(tl.sum(s, axis=0))


@triton.jit
def ce_online_scalar(logits_ptr, target_ptr, loss_ptr, stride_row, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    row_ptr = logits_ptr + row.to(tl.int64) * stride_row
    lse = row_lse(row_ptr, n_cols, BLOCK)
    target = tl.load(target_ptr + row)
    x_t = tl.load(row_ptr + target).to(tl.float32)
    tl.store(loss_ptr + row, lse - x_t)


@triton.jit
def ce_online_scalar_sum(
    logits_ptr,
    target_ptr,
    loss_ptr,
    stride_row,
    n_cols,
    BLOCK: tl.constexpr,
    EVICT: tl.constexpr = "",
    TARGET_FIRST: tl.constexpr = False,
    EXP: tl.constexpr = 0,
):
    """Scalar running max and a scalar running sum (each chunk reduced at once): no vector
    accumulator, so fewer registers a thread and more programs an SM. EVICT: the row stream's
    eviction policy ("evict_first": what the dropped `evict-first` rewrite made, run AA).
    TARGET_FIRST: the target logit is loaded before the loop, so its two dependent loads are not
    a latency tail at the end of every program (H200, run AD: 1 us slower, 74.1 against 73.1 us).
    EXP: 0 tl.exp (ex2.approx.f32 with its denormal fix-up: FSETP and two FMULs an element),
    1 tl.exp2((x - m) * log2 e) (ex2.approx.ftz), 2 tl.exp2(x * log2 e - m * log2 e) (one FFMA).
    sm_90 SASS of the 4096-wide, 2-warp kernel: 808, 615 and 550 instructions."""
    row = tl.program_id(0)
    row_ptr = logits_ptr + row.to(tl.int64) * stride_row
    if TARGET_FIRST:
        x_t = tl.load(row_ptr + tl.load(target_ptr + row)).to(tl.float32)
    m = float("-inf")
    s = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(
            row_ptr + cols, mask=cols < n_cols, other=float("-inf"), eviction_policy=EVICT
        ).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        if EXP == 0:
            s = s * tl.exp(m - m_safe) + tl.sum(tl.exp(x - m_safe), axis=0)
        elif EXP == 1:
            s = s * tl.exp2((m - m_safe) * 1.4426950408889634) + tl.sum(
                tl.exp2((x - m_safe) * 1.4426950408889634), axis=0
            )
        else:
            s = s * tl.exp2((m - m_safe) * 1.4426950408889634) + tl.sum(
                tl.exp2(x * 1.4426950408889634 - m_safe * 1.4426950408889634), axis=0
            )
        m = m_new
    if not TARGET_FIRST:
        x_t = tl.load(row_ptr + tl.load(target_ptr + row)).to(tl.float32)
    tl.store(loss_ptr + row, m + tl.log(s) - x_t)


@triton.jit
def ce_rows(
    logits_ptr,
    target_ptr,
    loss_ptr,
    n_rows,
    stride_row,
    n_cols,
    ROWS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    """ROWS rows a program, each chunk a [ROWS, BLOCK] tile reduced along its rows: with few
    columns a warp, a row's reduction stays inside its warp (no barrier between warps)."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    base = logits_ptr + rows.to(tl.int64)[:, None] * stride_row
    m = tl.full([ROWS], float("-inf"), tl.float32)
    s = tl.zeros([ROWS, BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(
            base + cols[None, :],
            mask=row_ok[:, None] & (cols[None, :] < n_cols),
            other=float("-inf"),
        ).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - m_safe)[:, None] + tl.exp(x - m_safe[:, None])
        m = m_new
    lse = m + tl.log(tl.sum(s, axis=1))
    target = tl.load(target_ptr + rows, mask=row_ok, other=0)
    x_t = tl.load(logits_ptr + rows.to(tl.int64) * stride_row + target, mask=row_ok, other=0.0).to(
        tl.float32
    )
    tl.store(loss_ptr + rows, lse - x_t, mask=row_ok)


def ce_rows_launch(rows, block, warps):
    def run(logits, target):
        n_rows, n_cols = logits.shape
        loss = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
        ce_rows[(triton.cdiv(n_rows, rows),)](
            logits,
            target,
            loss,
            n_rows,
            logits.stride(0),
            n_cols,
            ROWS=rows,
            BLOCK=block,
            num_warps=warps,
        )
        return loss

    return run


@triton.jit
def ce_online_vector(logits_ptr, target_ptr, loss_ptr, stride_row, n_cols, BLOCK: tl.constexpr):
    """The search's best so far (online-softmax mutator): a running max per element."""
    row = tl.program_id(0)
    row_ptr = logits_ptr + row * stride_row
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(row_ptr + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        alpha = tl.where(m_new == float("-inf"), 1.0, tl.exp(m - m_new))
        p = tl.where(m_new == float("-inf"), 0.0, tl.exp(x - m_new))
        s = s * alpha + p
        m = m_new
    row_max = tl.max(m, axis=0)
    s = s * tl.exp(m - row_max)
    lse = row_max + tl.log(tl.sum(s, axis=0))
    target = tl.load(target_ptr + row)
    x_t = tl.load(row_ptr + target).to(tl.float32)
    tl.store(loss_ptr + row, lse - x_t)


@triton.jit
def ce_split_partial(
    logits_ptr,
    m_ptr,
    s_ptr,
    stride_row,
    n_cols,
    CHUNK: tl.constexpr,
    BLOCK: tl.constexpr,
    SPLITS: tl.constexpr,
):
    """Split each row across SPLITS programs: each writes the (max, sum of exp) of its chunk."""
    row = tl.program_id(0)
    part = tl.program_id(1)
    row_ptr = logits_ptr + row.to(tl.int64) * stride_row
    m = float("-inf")
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(part * CHUNK, part * CHUNK + CHUNK, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(row_ptr + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a chunk of -inf only: no nan
        s = s * tl.exp(m - m_safe) + tl.exp(x - m_safe)
        m = m_new
    tl.store(m_ptr + row * SPLITS + part, m)
    tl.store(s_ptr + row * SPLITS + part, tl.sum(s, axis=0))


@triton.jit
def ce_split_combine(
    logits_ptr, target_ptr, loss_ptr, m_ptr, s_ptr, stride_row, SPLITS: tl.constexpr
):
    row = tl.program_id(0)
    offs = tl.arange(0, SPLITS)
    m = tl.load(m_ptr + row * SPLITS + offs)
    s = tl.load(s_ptr + row * SPLITS + offs)
    row_max = tl.max(m, axis=0)
    lse = row_max + tl.log(tl.sum(s * tl.exp(m - row_max), axis=0))
    target = tl.load(target_ptr + row)
    x_t = tl.load(logits_ptr + row.to(tl.int64) * stride_row + target).to(tl.float32)
    tl.store(loss_ptr + row, lse - x_t)


@triton.jit
def ce_online_scalar_flag(
    logits_ptr, target_ptr, loss_ptr, ok_ptr, stride_row, n_cols, BLOCK: tl.constexpr
):
    """ce_online_scalar with the launcher's range check folded in: a row whose target is out of
    range clears the ok flag (and reads no logit through it); the launcher asserts the flag."""
    row = tl.program_id(0)
    row_ptr = logits_ptr + row.to(tl.int64) * stride_row
    lse = row_lse(row_ptr, n_cols, BLOCK)
    target = tl.load(target_ptr + row)
    bad = (target < 0) | (target >= n_cols)
    tl.store(ok_ptr, 0, mask=bad)
    x_t = tl.load(row_ptr + target, mask=~bad, other=0.0).to(tl.float32)
    tl.store(loss_ptr + row, lse - x_t)


def ce_flag_launch(block, warps, stages):
    def run(logits, target):
        n_rows, n_cols = logits.shape
        ok = torch.ones(1, dtype=torch.int32, device=logits.device)
        loss = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
        ce_online_scalar_flag[(n_rows,)](
            logits,
            target,
            loss,
            ok,
            logits.stride(0),
            n_cols,
            BLOCK=block,
            num_warps=warps,
            num_stages=stages,
        )
        torch._assert_async(ok, "target index out of range")
        return loss

    return run


def _assert_aminmax(t, n):
    lo, hi = torch.aminmax(t)
    torch._assert_async((lo >= 0) & (hi < n))


def _assert_max_min(t, n):
    torch._assert_async(~((t.max() >= n) | (t.min() < 0)))


def _assert_gather(t, n):
    """A bounds-checked gather: index_select asserts on the GPU that every index is in [0, n), the
    check PyTorch's own CUDA cross_entropy makes; one launch, and no `_assert_async`."""
    torch.empty(n, dtype=torch.uint8, device=t.device).index_select(0, t)


FORMS = {  # the range check 0 <= t < n, written with fewer launches (max/min: seven)
    "max/min": _assert_max_min,
    "aminmax": _assert_aminmax,
    "clamp-eq": lambda t, n: torch._assert_async(torch.eq(t.clamp(0, n - 1), t).all()),
    "floordiv": lambda t, n: torch._assert_async(torch.eq(t // n, 0).all()),
    "gather": _assert_gather,
}


def _assert_side_stream(t, n, priority=0, form="max/min"):
    """The overlap-checks rewrite: the check on a side stream, joined after the launch (below)."""
    if not t.is_cuda:
        return FORMS[form](t, n)
    stream = torch.cuda.Stream(device=t.device, priority=priority)
    stream.wait_stream(torch.cuda.current_stream(t.device))
    with torch.cuda.stream(stream):
        FORMS[form](t, n)
    return stream


CHECKS = {
    "no check": None,
    "assert on a side stream": _assert_side_stream,
    "assert on a high-priority side stream": lambda t, n: _assert_side_stream(t, n, priority=-1),
    "assert max/min (search best)": _assert_max_min,
    "assert aminmax": lambda t, n: _assert_aminmax(t, n),
    "assert clamp-eq": FORMS["clamp-eq"],
}
for _form in FORMS:
    CHECKS[f"hp side {_form}"] = lambda t, n, _f=_form: _assert_side_stream(
        t, n, priority=-1, form=_f
    )


def ce_launch(
    kernel, block, warps, stages, check="assert max/min (search best)", after=False, **consts
):
    """after: the side stream forks before the launch but its checks are enqueued after it, so the
    CPU's time enqueueing them no longer stands between the fork and the kernel."""
    chk = CHECKS[check]

    def run(logits, target):
        n_rows, n_cols = logits.shape
        if after and logits.is_cuda:
            side = torch.cuda.Stream(device=logits.device, priority=-1)
            side.wait_stream(torch.cuda.current_stream(logits.device))
        else:
            side = chk(target, n_cols) if chk is not None else None
        loss = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
        kernel[(n_rows,)](
            logits,
            target,
            loss,
            logits.stride(0),
            n_cols,
            BLOCK=block,
            num_warps=warps,
            num_stages=stages,
            **consts,
        )
        if after:
            with torch.cuda.stream(side):
                _assert_max_min(target, n_cols)
        if isinstance(side, torch.cuda.Stream):
            torch.cuda.current_stream(logits.device).wait_stream(side)
        return loss

    return run


def ce_split_launch(splits, block, warps, stages):
    def run(logits, target):
        n_rows, n_cols = logits.shape
        chunk = triton.cdiv(triton.cdiv(n_cols, splits), block) * block
        m = torch.empty((n_rows, splits), dtype=torch.float32, device=logits.device)
        s = torch.empty_like(m)
        loss = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
        ce_split_partial[(n_rows, splits)](
            logits,
            m,
            s,
            logits.stride(0),
            n_cols,
            CHUNK=chunk,
            BLOCK=block,
            SPLITS=splits,
            num_warps=warps,
            num_stages=stages,
        )
        ce_split_combine[(n_rows,)](
            logits, target, loss, m, s, logits.stride(0), SPLITS=splits, num_warps=1
        )
        return loss

    return run


def ce_variants(quick):
    v = {"first-draft": ce_mod.cross_entropy}
    if not quick:
        v["torch.compile(reference)"] = torch.compile(ce_mod.cross_entropy_ref)
    for block, warps, stages in [(2048, 8, 4), (2048, 4, 3), (4096, 4, 3), (4096, 8, 3)]:
        v[f"scalar-max online {block} w{warps} s{stages} + flag check"] = ce_flag_launch(
            block, warps, stages
        )
        v[f"scalar-max online {block} w{warps} s{stages} + assert max/min"] = ce_launch(
            ce_online_scalar, block, warps, stages
        )
    v["vector-max online 1024 w4 + assert (search best)"] = ce_launch(ce_online_vector, 1024, 4, 3)
    v["vector-max online 1024 w4, no check"] = ce_launch(ce_online_vector, 1024, 4, 3, "no check")
    for check in ("assert max/min (search best)", "assert aminmax", "assert clamp-eq"):
        v[f"scalar-max online 2048 w8 s3 + {check}"] = ce_launch(
            ce_online_scalar, 2048, 8, 3, check
        )
    grid = (
        [(2048, 8, 3), (4096, 16, 2)]
        if quick
        else list(itertools.product((1024, 2048, 4096, 8192), (4, 8, 16), (1, 2, 3)))
        + [(16384, 16, 1), (16384, 32, 1), (32768, 16, 1), (32768, 32, 1)]
    )  # one block = a whole 32k row
    for block, warps, stages in grid:
        if block // (32 * warps) < 2:
            continue
        v[f"scalar-max online {block} w{warps} s{stages}, no check"] = ce_launch(
            ce_online_scalar, block, warps, stages, "no check"
        )
    # one or two warps a program: a row's reduction needs no barrier between warps (run T's best
    # was 2048 wide at 2 warps, which the sweep above never tried)
    for block, warps in (
        [(1024, 1)]
        if quick
        else [(512, 1), (1024, 1), (2048, 1), (4096, 1), (1024, 2), (2048, 2), (4096, 2), (8192, 2)]
    ):
        v[f"scalar-max online {block} w{warps} s1, no check"] = ce_launch(
            ce_online_scalar, block, warps, 1, "no check"
        )
        v[f"scalar-sum online {block} w{warps}, no check"] = ce_launch(
            ce_online_scalar_sum, block, warps, 1, "no check"
        )
        v[f"scalar-max online {block} w{warps} s1 + assert on a side stream"] = ce_launch(
            ce_online_scalar, block, warps, 1, "assert on a side stream"
        )
    for block, warps in [(4096, 4), (2048, 4)]:
        v[f"scalar-sum online {block} w{warps}, no check"] = ce_launch(
            ce_online_scalar_sum, block, warps, 1, "no check"
        )
        v[f"scalar-max online {block} w{warps} s1 + assert on a side stream"] = ce_launch(
            ce_online_scalar, block, warps, 1, "assert on a side stream"
        )
    # the scalar-sum loop by pipeline depth (the search's 4096/2-warp variants at 2-3 stages timed
    # 82.6-87.4 us with the side-stream check; the probe's 1-stage kernel 72.5 us alone)
    for block, warps, stages in (
        [(4096, 2, 1)]
        if quick
        else [
            (4096, 2, 1),
            (4096, 2, 2),
            (4096, 2, 3),
            (4096, 2, 4),
            (4096, 4, 1),
            (4096, 4, 3),
            (8192, 4, 1),
            (8192, 8, 1),
            (2048, 2, 1),
            (2048, 2, 3),
        ]
    ):
        v[f"ss {block} w{warps} s{stages}, no check"] = ce_launch(
            ce_online_scalar_sum, block, warps, stages, "no check"
        )
    for stages in (1,) if quick else (1, 3):
        for check in (
            "assert on a side stream",
            "assert on a high-priority side stream",
            "assert max/min (search best)",
        ):
            v[f"ss 4096 w2 s{stages} + {check}"] = ce_launch(
                ce_online_scalar_sum, 4096, 2, stages, check
            )
    for stages in (1,) if quick else (1, 3):
        for check in ("no check", "assert on a high-priority side stream"):
            v[f"ss ef 4096 w2 s{stages} + {check}"] = ce_launch(
                ce_online_scalar_sum, 4096, 2, stages, check, EVICT="evict_first"
            )
    for form in FORMS:  # how many launches the side-stream check costs the kernel beside it
        for stages in (3,) if quick else (1, 3):
            v[f"ss 4096 w2 s{stages} + hp side {form}"] = ce_launch(
                ce_online_scalar_sum, 4096, 2, stages, f"hp side {form}"
            )
    for stages in (3,) if quick else (1, 3):
        for check in ("no check", "hp side max/min"):
            v[f"ss tf 4096 w2 s{stages} + {check}"] = ce_launch(
                ce_online_scalar_sum, 4096, 2, stages, check, TARGET_FIRST=True
            )
    v["ss 4096 w2 s3 + hp side max/min, enqueued after the launch"] = ce_launch(
        ce_online_scalar_sum, 4096, 2, 3, "hp side max/min", after=True
    )
    for rows, block, warps in (
        [(2, 512, 1)]
        if quick
        else [(2, 512, 1), (4, 256, 1), (4, 256, 4), (8, 256, 4), (8, 256, 2), (4, 512, 2)]
    ):
        v[f"rows{rows} {block} w{warps}, no check"] = ce_rows_launch(rows, block, warps)
    for splits, block, warps in (
        [(4, 2048, 8)]
        if quick
        else [(2, 2048, 8), (4, 2048, 8), (8, 2048, 8), (4, 4096, 8), (8, 1024, 4)]
    ):
        v[f"split{splits} scalar-max {block} w{warps}, no check"] = ce_split_launch(
            splits, block, warps, 2
        )
    return v


def ce_exp_form_variants(quick):
    """Whether the exponential's instruction count holds cross_entropy below 85% of copy (runs AD,
    AO, AV: 73.4-75.0 us where 85% needs 73.9): tl.exp against the two exp2 forms, at the
    search's tilings, with and without the side-stream check the search's best carries."""
    v = {"first-draft": ce_mod.cross_entropy}
    grid = (
        [(4096, 2, 1)]
        if quick
        else [
            (4096, 2, 1),
            (4096, 2, 3),
            (2048, 2, 1),
            (2048, 1, 1),
            (4096, 4, 1),
            (8192, 4, 1),
            (8192, 8, 1),
            (4096, 1, 1),
        ]
    )
    for block, warps, stages in grid:
        for exp, label in ((0, "exp"), (1, "exp2"), (2, "exp2 fma")):
            v[f"ss {label} {block} w{warps} s{stages}, no check"] = ce_launch(
                ce_online_scalar_sum, block, warps, stages, "no check", EXP=exp
            )
    for exp, label in ((0, "exp"), (1, "exp2"), (2, "exp2 fma")):
        v[f"ss {label} 4096 w2 s1 + hp side max/min"] = ce_launch(
            ce_online_scalar_sum, 4096, 2, 1, "hp side max/min", EXP=exp
        )
    if not quick:
        add_search_best(v, "bench/runs/2026-12-01/AV-cross_entropy.json")
    return v


# --- matmul -------------------------------------------------------------------------------------


@triton.jit
def mm_grouped(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    group = GROUP_M * num_n
    first_m = (pid // group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % group) % size_m
    pid_n = (pid % group) // size_m
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        ks = k + offs_k
        if EVEN_K:
            a = tl.load(
                a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak,
                mask=offs_m[:, None] < M,
                other=0.0,
            )
            b = tl.load(
                b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                mask=offs_n[None, :] < N,
                other=0.0,
            )
        else:
            a = tl.load(
                a_ptr + offs_m[:, None] * stride_am + ks[None, :] * stride_ak,
                mask=(offs_m[:, None] < M) & (ks[None, :] < K),
                other=0.0,
            )
            b = tl.load(
                b_ptr + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                mask=(ks[:, None] < K) & (offs_n[None, :] < N),
                other=0.0,
            )
        acc += tl.dot(a, b)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(
        c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn,
        acc.to(c_ptr.dtype.element_ty),
        mask=mask,
    )


def mm_launch(bm, bn, bk, warps, stages, group, even_k):
    def run(a, b):
        M, K = a.shape
        _, N = b.shape
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
        mm_grouped[grid](
            a,
            b,
            c,
            M,
            N,
            K,
            a.stride(0),
            a.stride(1),
            b.stride(0),
            b.stride(1),
            c.stride(0),
            c.stride(1),
            BLOCK_M=bm,
            BLOCK_N=bn,
            BLOCK_K=bk,
            GROUP_M=group,
            EVEN_K=even_k and K % bk == 0,
            num_warps=warps,
            num_stages=stages,
        )
        return c

    return run


def mm_variants(quick):
    v = {"first-draft": mm_mod.matmul, "cuBLAS a @ b": lambda a, b: a @ b}
    configs = (
        [(128, 256, 64, 8, 3)]
        if quick
        else [
            (128, 256, 64, 8, 3),
            (128, 256, 64, 8, 4),
            (256, 128, 64, 8, 3),
            (256, 128, 64, 8, 4),
            (128, 128, 64, 4, 4),
            (128, 128, 64, 8, 4),
            (128, 256, 32, 8, 4),
            (256, 128, 32, 8, 4),
            (128, 128, 128, 8, 3),
            (256, 256, 64, 8, 3),
        ]
    )
    for (bm, bn, bk, warps, stages), group, even_k in itertools.product(
        configs, (1, 8), (False, True)
    ):
        if group == 1 and even_k:
            continue
        v[f"{bm}x{bn}x{bk} w{warps} s{stages} group{group}{' even-k' if even_k else ''}"] = (
            mm_launch(bm, bn, bk, warps, stages, group, even_k)
        )
    return v


# --- driver -------------------------------------------------------------------------------------

OPS = {
    "col_sum": (
        col_sum_variants,
        col_sum_mod.col_sum_ref,
        col_sum_mod.col_sum_inputs,
        col_sum_mod.col_sum_small_inputs,
        2e-3,
        1e-2,
    ),
    "cross_entropy": (
        ce_variants,
        ce_mod.cross_entropy_ref,
        ce_mod.cross_entropy_inputs,
        ce_mod.cross_entropy_small_inputs,
        1e-4,
        1e-4,
    ),
    "cross_entropy_exp_forms": (
        ce_exp_form_variants,
        ce_mod.cross_entropy_ref,
        ce_mod.cross_entropy_inputs,
        ce_mod.cross_entropy_small_inputs,
        1e-4,
        1e-4,
    ),
    "col_sum_forms": (
        col_sum_form_variants,
        col_sum_mod.col_sum_ref,
        col_sum_mod.col_sum_inputs,
        col_sum_mod.col_sum_small_inputs,
        2e-3,
        1e-2,
    ),
    "read": (
        read_variants,
        lambda x: x.float().sum().reshape(1),
        read_inputs,
        read_small_inputs,
        5.0,
        1e-3,
    ),
    "matmul": (
        mm_variants,
        mm_mod.matmul_ref,
        mm_mod.matmul_inputs,
        mm_mod.matmul_small_inputs,
        1e-2,
        1e-2,
    ),
}


def bytes_moved(args, out):
    return sum(a.numel() * a.element_size() for a in args) + out.numel() * out.element_size()


BASELINES = ("first-draft", "cuBLAS a @ b", "torch.sum(dim=0)", "torch.compile(reference)")


def matched(variants, pattern):
    if not pattern:
        return variants
    return {k: v for k, v in variants.items() if k in BASELINES or re.search(pattern, k)}


def run_once(opts):
    """One call of each matched variant on the first case, nothing else (what ncu profiles)."""
    for op in opts.ops.split(","):
        variants_of, _, inputs_of = OPS[op][:3]
        args = inputs_of("cuda")[0]
        for name, fn in matched(variants_of(False), opts.match).items():
            if name in BASELINES:
                continue
            fn(*args)
            torch.cuda.synchronize()
            print(f"ran {name}", flush=True)


def ncu_variants(op, names, opts):
    """Speed of light, occupancy, registers and top stalls of each variant's kernel (in the order
    the variants ran), from the engine's own Nsight Compute metric list."""
    import subprocess

    from kernelbrain.engine.profile.ncu import (
        BASE_METRICS,
        STALL_METRIC,
        STALLS,
        find_ncu,
        parse_csv,
    )

    ncu = find_ncu()
    if ncu is None:
        print("ncu: not installed", flush=True)
        return []
    metrics = list(BASE_METRICS) + [STALL_METRIC.format(r) for r in STALLS]
    cmd = [
        ncu,
        "--clock-control",
        "none",
        "--kernel-name",
        f"regex:{opts.ncu}",
        "--csv",
        "--page",
        "raw",
        "--metrics",
        ",".join(metrics),
        sys.executable,
        __file__,
        "--once",
        "--ops",
        op,
    ]
    if opts.match:
        cmd += ["--match", opts.match]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    kernels = parse_csv(proc.stdout)
    ran = [line[4:] for line in proc.stdout.splitlines() if line.startswith("ran ")]
    if len(kernels) != len(ran):
        print(
            f"ncu: {len(kernels)} kernels for {len(ran)} variants (exit {proc.returncode}): "
            f"{(proc.stderr or proc.stdout)[-600:]}",
            flush=True,
        )
    out = []
    for name, k in zip(ran, kernels):
        row = {
            "variant": name,
            "kernel": k.name,
            "duration_us": k.duration_us,
            "dram_pct": k.dram_pct,
            "compute_sol_pct": k.compute_sol_pct,
            "occupancy_pct": k.achieved_occupancy_pct,
            "registers": k.registers,
            "local_loads": k.local_loads,
            "top_stalls": k.top_stalls,
        }
        out.append(row)
        print(
            f"ncu {name:55s} {k.duration_us:7.1f} us dram {k.dram_pct}% sm {k.compute_sol_pct}% "
            f"occ {k.achieved_occupancy_pct}% regs {k.registers} stalls {k.top_stalls}",
            flush=True,
        )
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="col_sum,cross_entropy,matmul")
    ap.add_argument("--out", default=None)
    ap.add_argument(
        "--cpu", action="store_true", help="correctness only, small inputs, interpreter"
    )
    ap.add_argument(
        "--top", type=int, default=6, help="variants timed on every case (the rest on case 0)"
    )
    ap.add_argument(
        "--timer",
        choices=("do_bench", "engine", "eager", "ab"),
        default="do_bench",
        help="engine: the search's own timing (flush, hold, CUDA graphs under 0.1 ms), comparable "
        "with its records; eager: the same, never from a CUDA graph (how an A/B against a "
        "host-syncing original runs); ab: eager, each variant interleaved with the op's first "
        "draft, whose host syncs size the hold as in the search's A/Bs",
    )
    ap.add_argument(
        "--inductor", default=None, help="write torch.compile's generated code for each op here"
    )
    ap.add_argument(
        "--match",
        default=None,
        help="only variants whose name matches this regex (and the baselines)",
    )
    ap.add_argument(
        "--ncu",
        default=None,
        metavar="KERNEL_REGEX",
        help="after timing, profile each matched variant once on the first case under Nsight Compute "
        "(kernels whose name matches KERNEL_REGEX)",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="time each variant's first case this many times, in rounds over all variants (median)",
    )
    ap.add_argument(
        "--once", action="store_true", help=argparse.SUPPRESS
    )  # the process ncu profiles
    opts = ap.parse_args()
    if opts.once:
        return run_once(opts)
    if opts.timer in ("engine", "eager", "ab"):
        from kernelbrain.engine.worker import timing
        from kernelbrain.engine.worker.timing import measure

        if opts.timer in ("eager", "ab"):
            timing.GRAPH_BELOW_MS = 0.0

        def bench(fn, partner=None):
            groups, _ = measure([fn] + ([partner] if partner is not None else []), 200, captures=1)
            times = groups[0][0]
            return sorted(times)[len(times) // 2]
    else:

        def bench(fn, partner=None):
            return triton.testing.do_bench(fn)

    record = {"torch": torch.__version__, "triton": triton.__version__, "ops": {}}
    if not opts.cpu:
        record["gpu"] = torch.cuda.get_device_name()
        n = 2**30 if opts.timer != "do_bench" else 256 * 2**20  # engine: as measure_ceilings
        src = torch.empty(n, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        ms = bench(lambda: dst.copy_(src))
        record["copy_gbps"] = 2 * n / ms / 1e6
        print(f"copy {record['copy_gbps']:.0f} GB/s", flush=True)
    for op in opts.ops.split(","):
        variants_of, ref, inputs_of, small_of, atol, rtol = OPS[op]
        cases = small_of("cpu") if opts.cpu else inputs_of("cuda")
        variants = matched(variants_of(opts.cpu), opts.match)
        first_draft = variants.get("first-draft") if opts.timer == "ab" else None

        def time_of(fn, args):
            partner = (
                (lambda: first_draft(*args)) if first_draft and fn is not first_draft else None
            )
            return bench(lambda: fn(*args), partner)

        if opts.inductor and not opts.cpu:
            from torch._inductor.utils import run_and_get_code

            os.makedirs(opts.inductor, exist_ok=True)
            _, codes = run_and_get_code(torch.compile(ref), *cases[0])
            with open(os.path.join(opts.inductor, f"{op}.py"), "w") as f:
                f.write("\n\n# ---- next module ----\n\n".join(codes))
        rows = []
        for name, fn in variants.items():
            row = {"name": name, "ok": True, "ms": []}
            t0 = time.time()
            try:
                for i, args in enumerate(cases):
                    if op == "matmul" and opts.cpu and name.startswith("cuBLAS"):
                        continue
                    got = fn(*args)
                    want = ref(*args)
                    if not torch.allclose(got.float(), want.float(), atol=atol, rtol=rtol):
                        row["ok"] = False
                        row["error"] = (
                            f"case {i}: max abs err {(got.float() - want.float()).abs().max().item():.3g}"
                        )
                        break
                if row["ok"] and not opts.cpu:
                    row["ms"].append(time_of(fn, cases[0]))
            except Exception as exc:  # a variant that does not compile is a finding, not a stop
                row["ok"] = False
                row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            row["wall_s"] = round(time.time() - t0, 2)
            rows.append(row)
            print(
                f"{op:14s} {name:55s} {'ok' if row['ok'] else 'FAIL ' + row.get('error', '')} {row['ms']}",
                flush=True,
            )
        if not opts.cpu and opts.repeat > 1:
            # rounds over every variant in turn, so drift over the run hits each alike; ms[0] is the
            # median of the rounds, "rounds" keeps them all
            ok = [r for r in rows if r["ok"] and r["ms"]]
            for r in ok:
                r["rounds"] = [r["ms"][0]]
            for _ in range(opts.repeat - 1):
                for r in ok:
                    r["rounds"].append(time_of(variants[r["name"]], cases[0]))
            for r in ok:
                r["ms"][0] = sorted(r["rounds"])[len(r["rounds"]) // 2]
        if not opts.cpu:
            timed = sorted((r for r in rows if r["ok"] and r["ms"]), key=lambda r: r["ms"][0])
            keep = timed[: opts.top] + [r for r in timed if r["name"] in BASELINES]
            for r in keep:
                if len(r["ms"]) > 1:
                    continue
                for args in cases[1:]:
                    r["ms"].append(time_of(variants[r["name"]], args))
            for r in rows:
                if r["ok"] and r["ms"]:
                    per = []
                    for args, ms in zip(cases, r["ms"]):
                        if op == "matmul":
                            m, k = args[0].shape
                            per.append(2 * m * k * args[1].shape[1] / ms / 1e9)  # TFLOP/s
                        else:
                            per.append(
                                bytes_moved(args, ref(*args)) / ms / 1e6 / record["copy_gbps"]
                            )
                    r["rate"] = per
            print(f"== {op}: best first-case variants", flush=True)
            for r in timed[:12]:
                print(
                    f"   {r['name']:55s} {[round(x * 1e3, 1) for x in r['ms']]} us  rate {[round(x, 3) for x in r.get('rate', [])]}",
                    flush=True,
                )
        record["ops"][op] = rows
        for name, tuned in TUNED:
            picked = {str(key): str(cfg) for key, cfg in getattr(tuned, "cache", {}).items()}
            record.setdefault("autotune_picks", {})[name] = picked
            print(f"   {name}: picked {picked}", flush=True)
        if opts.ncu and not opts.cpu:
            record.setdefault("ncu", {})[op] = ncu_variants(op, list(variants), opts)
    if opts.out:
        with open(opts.out, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
