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

The device constants live in `device_model.toml`, fitted against H200 measurements
(bench/cost_model_fit.py); docs/notes/cost-model.md has the measurements behind each.
Every figure it produces is an estimate and is labelled so (`measured: false`).
"""

from __future__ import annotations

import ast
import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..api import device
from ..api.facts import CaseLaunches, CompiledFacts, LaunchRecord, SpecializeResult
from ..index import parse_module
from ..rules.analysis import kernel_views, kwarg


def _fitted_constants() -> dict:
    """The default device's constants, from the data file beside this module."""
    import tomllib

    with open(Path(__file__).with_name("device_model.toml"), "rb") as f:
        return {name: entry["value"] for name, entry in tomllib.load(f).items()}


_FITTED = _fitted_constants()


@dataclass(frozen=True)
class DeviceModel:
    """The device the cost model estimates for: an H200 (sm_90) by default, with bandwidth and
    matmul rate from the measured ceilings when known. Every default is a constant of
    `device_model.toml`, which says where each was fitted."""

    sms: int = device.SMS
    bandwidth_gbps: float = _FITTED["bandwidth_gbps"]
    bf16_tflops: float = _FITTED["bf16_tflops"]
    l2_bytes: int = _FITTED["l2_bytes"]
    l2_reread_cost: float = _FITTED["l2_reread_cost"]
    l2_reuse_share: float = _FITTED["l2_reuse_share"]
    l2_reuse_sharpness: float = _FITTED["l2_reuse_sharpness"]
    memory_latency_us: float = _FITTED["memory_latency_us"]
    launch_us: float = _FITTED["launch_us"]
    host_sync_us: float = _FITTED["host_sync_us"]
    atomic_program_ns: float = _FITTED["atomic_program_ns"]
    atomic_tail_us: float = _FITTED["atomic_tail_us"]
    atomic_lanes_exponent: float = _FITTED["atomic_lanes_exponent"]
    atomic_free_lanes: int = _FITTED["atomic_free_lanes"]
    line_bytes: int = _FITTED["line_bytes"]
    short_run_exponent: float = _FITTED["short_run_exponent"]
    special_tops: float = _FITTED["special_tops"]
    dot_k_depth: float = _FITTED["dot_k_depth"]
    dot_depth_exponent: float = _FITTED["dot_depth_exponent"]
    dot_operand_latency_us: float = _FITTED["dot_operand_latency_us"]
    dot_prefetch_stages: float = _FITTED["dot_prefetch_stages"]
    dot_prefetch_exponent: float = _FITTED["dot_prefetch_exponent"]
    dot_tall_tile_factor: float = _FITTED["dot_tall_tile_factor"]
    spill_max: float = _FITTED["spill_max"]
    spill_traffic: float = _FITTED["spill_traffic"]
    spill_l1_bytes: int = _FITTED["spill_l1_bytes"]
    under_wave_exponent: float = _FITTED["under_wave_exponent"]
    loop_prefetch_exponent: float = _FITTED["loop_prefetch_exponent"]
    sm_stream_gbps: float = _FITTED["sm_stream_gbps"]
    sm_stream_warps: int = _FITTED["sm_stream_warps"]
    sm_stream_warp_exponent: float = _FITTED["sm_stream_warp_exponent"]
    clock_mhz: float = _FITTED["clock_mhz"]
    issue_per_cycle: float = _FITTED["issue_per_cycle"]
    issue_warps: float = _FITTED["issue_warps"]
    issue_exponent: float = _FITTED["issue_exponent"]
    max_warps_per_sm: int = device.MAX_WARPS_PER_SM
    max_blocks_per_sm: int = device.MAX_BLOCKS_PER_SM
    regs_per_sm: int = device.REGS_PER_SM
    smem_per_sm: int = device.SMEM_PER_SM


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
    """What the kernel's body does with memory, read off its syntax tree: passes per tensor,
    loads per iteration, loops and their trip counts, special functions, atomics, dots. One
    function on purpose: each fact is one walk over the same active statements, and splitting
    them would walk the tree once a fact.

    Long because each fact is one walk over the same statements (see above).
    """
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
    """One launch's estimated time: the largest of its floors (bandwidth, latency, compute,
    atomics, special functions, instruction issue, overlapped as the module docstring says) plus
    launch overhead. Kept in one function on purpose: the floors share the occupancy, wave and
    in-flight figures derived at its top, and read as one model top to bottom.

    Long because the floors share one occupancy, wave and in-flight derivation (see above).
    """
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
        # 11% slower than 16x64 tiles (43.7 us).
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
    # against 243 / 48 measured on an H200.
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
    from ..api.op_sets import ALLOWED_OPS, COPY_OPS, FILL_OPS

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


def dot_kernels(source: str) -> set[str]:
    """The kernels of a module that call `tl.dot`: the only ones whose work is counted in FLOPs."""
    return {k.name for k in kernel_views(parse_module(source)) if k.uses("dot")}


def matmul_flops(case: CaseLaunches, dots: set[str]) -> int | None:
    """A matmul's 2*M*K*N, from the first launch of a kernel that does dots (`dots`) on two 2-D
    operands with a shared inner size; None for kernels without dots (a norm over a square
    input is no matmul)."""
    for rec in case.launches:
        if rec.kernel not in dots:
            continue
        mats = [a.shape for a in rec.args if a.kind == "ptr" and len(a.shape) == 2]
        if len(mats) >= 2 and mats[0][1] == mats[1][0]:
            return 2 * mats[0][0] * mats[0][1] * mats[1][1]
    return None


def _distinct_bytes(case: CaseLaunches, counted: Callable[[LaunchRecord, str], bool]) -> int:
    """Bytes of every distinct tensor behind a pointer the case's launches pass where
    `counted(launch, parameter)`, once: by the memory it views where the dry run knew it, else by
    parameter name."""
    seen: dict[str, int] = {}
    for rec in case.launches:
        for a in rec.args:
            if a.kind == "ptr" and counted(rec, a.name):
                key = a.memory or a.name
                seen[key] = max(seen.get(key, 0), a.nbytes)
    return sum(seen.values())


def case_bytes_and_flops(
    cases: list[CaseLaunches], source: str
) -> tuple[list[int], list[int | None]]:
    """Compulsory bytes (every distinct tensor a case's launches touch, once) and the FLOPs of
    the dots `source`'s kernels do (`matmul_flops`)."""
    dots = dot_kernels(source)
    return (
        [_distinct_bytes(c, lambda rec, name: True) for c in cases],
        [matmul_flops(c, dots) for c in cases],
    )


def case_written_bytes(cases: list[CaseLaunches], source: str) -> list[int | None]:
    """Bytes each case's launches write: every distinct tensor behind a pointer the launched
    kernel stores to or updates atomically, once. None where the source does not show a kernel's
    writes (a kernel missing from it, or one that stores only through a helper or a descriptor):
    what a case writes decides its roof (`profile.roofs`), and a guess would hold a copy to a
    read stream's."""
    try:
        views = kernel_views(parse_module(source))
    except SyntaxError:
        views = []
    written = {
        kv.name: {p for p in kv.params if kv.stores_to(p) or kv.atomics_on(p)} for kv in views
    }
    return [
        _distinct_bytes(c, lambda rec, name: name in written[rec.kernel])
        if c.launches and all(written.get(rec.kernel) for rec in c.launches)
        else None
        for c in cases
    ]


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
        dots = dot_kernels(source)
        return [
            case_time_us(c, facts.get(ci, {}), source, tiles, self.dev, matmul_flops(c, dots))
            for ci, c in enumerate(spec.cases)
        ]
