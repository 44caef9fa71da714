"""A static cost model: estimated time of a candidate on each benchmark case, without a GPU.

Inputs are what the dry run recorded (grid, argument sizes, constexprs, warps, stages, host-side
fills and syncs), what the compiler reported (registers, shared memory, spills) and the kernel's
structure (how many passes read each tensor, whether it uses `tl.dot`). The estimate is the
largest of three floors plus launch overhead:

- bandwidth: bytes moved (compulsory bytes, plus re-reads: cheap when the re-read slice is still
  in L2, full price when it is not) over the bandwidth that the bytes in flight can sustain
  (Little's law: resident programs x bytes each loads per iteration / memory latency);
- latency: waves of programs times the dependent memory round trips each program makes;
- compute (matmul): FLOPs over the tensor-core rate scaled by a tile-efficiency factor.

Every figure it produces is an estimate and is labelled so (`measured: false`).
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from ..evaluate.messages import CaseLaunches, CompiledFacts, LaunchRecord
from ..index import parse_module
from ..rules.analysis import kernel_views


@dataclass(frozen=True)
class DeviceModel:
    """An H200 (sm_90) by default; bandwidth and matmul rate from measured ceilings when known."""

    sms: int = 132
    bandwidth_gbps: float = 4280.0  # device-to-device copy, brief §6
    bf16_tflops: float = 680.0
    l2_bytes: int = 50 * 1024 * 1024
    memory_latency_us: float = 0.8
    launch_us: float = 3.0
    host_sync_us: float = 15.0
    # Float atomics to contended addresses: ~30 G element-updates/s (col_sum first draft on an
    # H200: 2.1 M atomic adds onto 4,096 addresses took ~70 us beyond its memory time).
    atomic_updates_per_us: float = 30e3
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
    loops: int
    loads_per_iteration: int
    grouped: bool
    atomic_tiles: list[str]  # constexprs sizing each atomic update (its `tl.arange` extents)


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
    loops = 0
    loads_per_iter = 0

    def calls(node: ast.AST, name: str) -> list[ast.Call]:
        return [c for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                and c.func.attr == name]

    for stmt in body:
        is_loop = isinstance(stmt, (ast.For, ast.While))
        loops += is_loop
        params_here: set[str] = set()
        for c in calls(stmt, "load"):
            params_here |= kv.pointer_params_of(c)
        if is_loop:
            loads_per_iter = max(loads_per_iter, len(calls(stmt, "load")))
        for p in params_here:
            passes[p] = passes.get(p, 0) + 1
        for c in calls(stmt, "store"):
            stores |= kv.pointer_params_of(c)
        for c in [c for c in ast.walk(stmt) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                  and c.func.attr.startswith("atomic_")]:
            atomics |= kv.pointer_params_of(c)
    # loads outside loops were counted once per statement: a program reads such data once
    straight = [s for s in body if not isinstance(s, (ast.For, ast.While))]
    straight_params: set[str] = set()
    for s in straight:
        for c in calls(s, "load"):
            straight_params |= kv.pointer_params_of(c)
    for p in straight_params:
        loop_passes = sum(1 for s in body if isinstance(s, (ast.For, ast.While))
                          and any(p in kv.pointer_params_of(c) for c in calls(s, "load")))
        passes[p] = loop_passes + 1
    if not loads_per_iter:
        loads_per_iter = max(1, len([c for s in straight for c in calls(s, "load")]))
    grouped = any("group" in p.lower() for p in kv.params) or kv.uses("swizzle2d")
    atomic_tiles: list[str] = []
    for c in [c for s in body for c in ast.walk(s) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
              and c.func.attr.startswith("atomic_")]:
        names = {n.id for n in ast.walk(c.args[0]) if isinstance(n, ast.Name)} if c.args else set()
        for n in list(names):
            for v in kv.assigns.get(n, []):
                names |= {x.id for x in ast.walk(v) if isinstance(x, ast.Name)}
        atomic_tiles += [b for a in kv.tl_calls("arange") for b in [ast.unparse(a.args[1])]
                         if len(a.args) == 2 and any(a is x for n in names for v in kv.assigns.get(n, []) for x in ast.walk(v))]
    return KernelShape(passes, stores, atomics, kv.uses("dot"), loops, loads_per_iter, grouped, atomic_tiles)


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= int(x)
    return out


def _tile_elems(rec: LaunchRecord, kv_tiles: list[str]) -> int:
    values = {a.name: a.value for a in rec.args if a.kind == "constexpr"} | rec.config
    tiles = [values[t] for t in kv_tiles if isinstance(values.get(t), int)]
    return _prod(tiles) if tiles else 1024


def dot_efficiency(values: dict, num_warps: int, num_stages: int, grouped: bool) -> float:
    """Fraction of the tensor-core rate a tile configuration reaches (a rough, monotone model)."""
    bm = next((v for k, v in values.items() if k.upper().endswith("M") and isinstance(v, int)), 64)
    bn = next((v for k, v in values.items() if k.upper().endswith("N") and isinstance(v, int)), 64)
    bk = next((v for k, v in values.items() if k.upper().endswith("K") and isinstance(v, int)), 32)
    intensity = (bm * bn / (bm + bn)) / (128 * 256 / (128 + 256))  # operand reuse per loaded byte
    eff = min(1.0, intensity) ** 0.8
    eff *= {1: 0.5, 2: 0.8, 3: 0.95}.get(num_stages, 1.0)
    eff *= 0.9 if bk < 64 else 1.0
    eff *= 0.85 if (bm * bn >= 128 * 128 and num_warps < 8) else 1.0
    eff *= 1.0 if grouped else 0.93
    return max(eff, 0.05)


def launch_time_us(rec: LaunchRecord, facts: CompiledFacts | None, shape: KernelShape, tiles: list[str],
                   dev: DeviceModel, flops: int | None) -> float:
    if facts is not None and not facts.ok:
        return math.inf
    programs = max(1, _prod(rec.grid))
    threads = 32 * rec.num_warps
    regs = (facts.n_regs if facts and facts.n_regs else 32)
    smem = facts.shared_bytes if facts and facts.shared_bytes else 0
    per_sm = min(dev.max_blocks_per_sm, dev.max_warps_per_sm // rec.num_warps,
                 dev.regs_per_sm // max(1, regs * threads), (dev.smem_per_sm // smem) if smem else 10 ** 6)
    if per_sm <= 0:
        return math.inf
    resident = per_sm * dev.sms
    waves = programs / resident
    wave_eff = waves / math.ceil(waves) if waves > 1 else min(1.0, waves) ** 0.25
    sizes = {a.name: a.nbytes for a in rec.args if a.kind == "ptr"}
    elem = max((a.nbytes // max(a.numel, 1) for a in rec.args if a.kind == "ptr" and a.numel), default=2)
    tile = _tile_elems(rec, tiles)
    dram = 0.0
    for p, n in shape.passes.items():
        nbytes = sizes.get(p, 0)
        slice_bytes = nbytes / programs
        in_l2 = slice_bytes * resident <= dev.l2_bytes / 2
        dram += nbytes * (1 + (n - 1) * (0.2 if in_l2 else 1.0))
    for p in shape.stores | shape.atomics:
        dram += sizes.get(p, 0) * (1.5 if p in shape.atomics else 1.0)
    in_flight = resident * tile * elem * max(1, shape.loads_per_iteration)
    bw = min(dev.bandwidth_gbps * 1e3, in_flight / (dev.memory_latency_us * 1e-6) / 1e6)  # bytes/us
    mem_us = dram / bw / max(wave_eff, 0.05)
    iters = 1
    n_arg = next((a.value for a in rec.args if a.kind == "int" and isinstance(a.value, int) and a.value > tile), None)
    if shape.loops and n_arg:
        iters = math.ceil(n_arg / tile)
    round_trips = max(1, sum(shape.passes.values())) * (1 + (iters - 1) / max(rec.num_stages, 1))
    # Waves overlap on a GPU: latency adds up only logarithmically with the number of waves.
    latency_us = round_trips * dev.memory_latency_us * (1 + math.log2(max(waves, 1.0)))
    compute_us = 0.0
    if shape.uses_dot and flops:
        values = {a.name: a.value for a in rec.args if a.kind == "constexpr"} | rec.config
        compute_us = flops / (dev.bf16_tflops * 1e6 * dot_efficiency(values, rec.num_warps, rec.num_stages,
                                                                     shape.grouped)) / max(wave_eff, 0.05)
    spill = 1 + min(1.0, (facts.n_spills or 0) / 256) if facts else 1.0
    atomic_us = 0.0
    if shape.atomics:
        values = {a.name: a.value for a in rec.args if a.kind == "constexpr"} | rec.config
        per_program = _prod(values[t] for t in shape.atomic_tiles if isinstance(values.get(t), int)) or 1
        atomic_us = programs * per_program / dev.atomic_updates_per_us
    return max(mem_us * spill, latency_us, compute_us) + atomic_us + dev.launch_us


def case_time_us(case: CaseLaunches, facts: dict[int, CompiledFacts | None], source: str, tiles: dict[str, list[str]],
                 dev: DeviceModel, flops: int | None) -> float:
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
    from ..evaluate.audit import ALLOWED_OPS, COPY_OPS, FILL_OPS

    host = case.host_ops
    total += case.host_bytes / (dev.bandwidth_gbps * 1e3)
    device_kernels = sum(n for op, n in host.items()
                         if op in FILL_OPS or op in COPY_OPS or (op not in ALLOWED_OPS))  # each is a launch
    total += device_kernels * dev.launch_us
    total += host.get("_local_scalar_dense", 0) * dev.host_sync_us
    return total


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
