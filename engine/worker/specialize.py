"""Dry runs (worker only): what each benchmark case would launch, without launching anything.

The entry runs on `meta` tensors (shapes and dtypes, no data) with kernel launches intercepted:
each launch is recorded with its grid, argument types, constexpr values, warps and stages (and,
for `@triton.autotune`, every config). A launcher that needs real values (`.item()`) is rerun on
CPU tensors. A launcher that compiles ahead with `kernel.warmup(...)` and sizes its grid from
the compiled kernel and the device's properties gets stand-ins for both (`_gpu_stand_ins`). The
records drive ahead-of-time compilation and the static cost model.
"""

from __future__ import annotations

import contextlib
from types import SimpleNamespace
from unittest import mock

import torch

from ..api.device import MAX_WARPS_PER_SM, REGS_PER_SM, SMEM_PER_PROGRAM, SMEM_PER_SM, SMS
from ..api.facts import ArgSpec, CaseLaunches, LaunchRecord, SpecializeResult
from . import audit

CPU_FALLBACK_MAX_BYTES = 2 << 30

DTYPES = {
    torch.bfloat16: "bf16",
    torch.float16: "fp16",
    torch.float32: "fp32",
    torch.float64: "fp64",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int16: "i16",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.bool: "i1",
    torch.float8_e4m3fn: "fp8e4nv",
    torch.float8_e5m2: "fp8e5",
}


class Recorder:
    """Active while the entry runs: records launches instead of running them."""

    def __init__(self) -> None:
        self.launches: list[LaunchRecord] = []

    def record(self, kernel, grid, args, kwargs) -> None:
        from triton.runtime.autotuner import Autotuner, Heuristics

        configs: list[dict] = []
        fn = kernel
        heuristics = {}
        while isinstance(fn, (Autotuner, Heuristics)):
            if isinstance(fn, Autotuner):
                configs = [
                    dict(c.kwargs) | {"num_warps": c.num_warps, "num_stages": c.num_stages}
                    for c in fn.configs
                ]
            else:
                heuristics = fn.values
            fn = fn.fn
        names = list(fn.arg_names)
        bound = dict(zip(names, args)) | {k: v for k, v in kwargs.items() if k in names}
        for name, rule in heuristics.items():
            try:
                bound[name] = rule(bound)
            except Exception:
                pass
        constexpr_names = _constexpr_names(fn)
        specs = [_arg_spec(n, bound.get(n), n in constexpr_names) for n in names]
        meta = dict(bound) | {k: v for k, v in kwargs.items()}
        for cfg in configs or [{}]:
            g = grid(meta | cfg) if callable(grid) else grid
            g = tuple(int(x) for x in (g if isinstance(g, (tuple, list)) else (g,)))
            self.launches.append(
                LaunchRecord(
                    kernel=fn.__name__,
                    grid=g,
                    args=specs,
                    num_warps=int(cfg.get("num_warps", kwargs.get("num_warps", 4)) or 4),
                    num_stages=int(cfg.get("num_stages", kwargs.get("num_stages", 3)) or 3),
                    config={k: v for k, v in cfg.items() if k not in ("num_warps", "num_stages")},
                )
            )


def _constexpr_names(fn) -> set[str]:
    params = getattr(fn, "params", None)
    if params is not None:  # a JITFunction
        return {p.name for p in params if p.is_constexpr}
    import inspect  # an InterpretedFunction: read the annotations

    return {
        name
        for name, p in inspect.signature(fn.fn).parameters.items()
        if "constexpr" in str(p.annotation)
    }


def _memory(t: torch.Tensor) -> str:
    """Which memory a tensor views, the same for every tensor that views it from the same byte:
    its storage's identity (meta tensors have no address to tell them apart by) and offset;
    '' where the storage has no identity to read (the Python wrapper's `id` is reused once freed,
    so two tensors could share one)."""
    ident = getattr(t.untyped_storage(), "_cdata", None)
    return f"{ident:x}+{t.storage_offset() * t.element_size()}" if ident else ""


def _arg_spec(name: str, value, constexpr: bool) -> ArgSpec:
    if constexpr:
        v = value if isinstance(value, (int, float, bool, str)) or value is None else str(value)
        return ArgSpec(name, "constexpr", value=v)
    if isinstance(value, torch.Tensor):
        # allocations are 16-byte aligned; a view's offset decides (meta tensors have no address)
        aligned = value.storage_offset() * value.element_size() % 16 == 0
        return ArgSpec(
            name,
            "ptr",
            dtype=DTYPES.get(value.dtype, str(value.dtype)),
            numel=value.numel(),
            nbytes=value.numel() * value.element_size(),
            shape=list(value.shape),
            aligned=aligned,
            memory=_memory(value),
        )
    if isinstance(value, bool):
        return ArgSpec(name, "int", dtype="i1", value=int(value))
    if isinstance(value, int):
        return ArgSpec(
            name, "int", dtype="i32" if -(2**31) <= value < 2**31 else "i64", value=value
        )
    if isinstance(value, float):
        return ArgSpec(name, "float", dtype="fp32", value=value)
    return ArgSpec(name, "other", value=None if value is None else str(value))


def dry_run(entry, draw, label) -> SpecializeResult:
    """Record the launches of every case. `draw(device)` returns the cases allocated on a device;
    `label(case)` names one."""
    error = "no cases"
    for device in ("meta", "cpu"):
        try:
            cases = draw(device)
        except Exception as exc:
            error = f"drawing inputs on {device}: {type(exc).__name__}: {exc}"
            continue
        size = sum(
            a.numel() * a.element_size() for c in cases for a in c if isinstance(a, torch.Tensor)
        )
        if device == "cpu" and size > CPU_FALLBACK_MAX_BYTES:
            break
        try:
            return SpecializeResult([_record(entry, label(args), args) for args in cases], device)
        except Exception as exc:  # e.g. `.item()` on meta tensors: retry with real data
            error = f"{type(exc).__name__}: {exc}"
    return SpecializeResult([], "none", error=error)


def dry_run_inputs(entry, inputs, device: str) -> SpecializeResult:
    """Record the launches of each (label, args), skipping inputs the entry rejects: the harness
    judges those; this only learns what they would compile."""
    cases = []
    for label, args in inputs:
        try:
            cases.append(_record(entry, label, args))
        except Exception:
            continue
    return SpecializeResult(cases, device)


# What a dry run answers for `torch.cuda.get_device_properties`: the device the ahead-of-time
# compiles target (sm_90, `messages.Compile.arch`), with an H200's SMs, registers, shared memory
# and L2 (its datasheet; the per-SM limits are the compiled facts' own, and the cost model's
# `device_model.toml` holds the same SM count).
DEVICE_STAND_IN = SimpleNamespace(
    name="dry run: sm_90 (H200)",
    major=9,
    minor=0,
    multi_processor_count=SMS,
    regs_per_multiprocessor=REGS_PER_SM,
    shared_memory_per_multiprocessor=SMEM_PER_SM,
    shared_memory_per_block=49152,
    shared_memory_per_block_optin=SMEM_PER_PROGRAM,
    max_threads_per_multi_processor=32 * MAX_WARPS_PER_SM,
    warp_size=32,
    L2_cache_size=50 * 1024 * 1024,
    total_memory=141 * 1024**3,
    is_integrated=False,
    is_multi_gpu_board=False,
)


class CompiledStandIn:
    """What `kernel.warmup(...)` returns in a dry run, in place of a kernel compiled for the GPU
    there is none of: no register or shared-memory use to report (a launcher sizing its grid
    by occupancy takes its no-information branch or the most programs), and a launch through
    it, `compiled[grid](...)`, is recorded with the warmup's warps and stages as a launch of the
    JIT function."""

    n_regs = 0
    n_spills = 0

    def __init__(self, fn, options: dict):
        self.fn = fn
        self.options = options
        self.metadata = SimpleNamespace(
            shared=0,
            num_warps=options.get("num_warps", 4),
            num_stages=options.get("num_stages", 3),
        )

    def _init_handles(self) -> None:
        pass

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            if audit.recorders:
                audit.recorders[-1].record(self.fn, grid, args, self.options | kwargs)

        return run


@contextlib.contextmanager
def _gpu_stand_ins():
    """While a dry run records: `JITFunction.warmup` returns a `CompiledStandIn` and
    `torch.cuda.get_device_properties` the DEVICE_STAND_IN, as a launcher written like Triton's
    persistent softmax asks for both before it launches (the compile workers have no GPU)."""
    from triton.runtime.jit import JITFunction

    def dry_warmup(self, *args, grid, **kwargs):
        return CompiledStandIn(self, kwargs)

    # `mock.patch.object` restores the classes as they were: `warmup` is inherited, and
    # assigning it back would leave a name on `JITFunction` the tamper watch reports.
    with (
        mock.patch.object(JITFunction, "warmup", dry_warmup),
        mock.patch.object(torch.cuda, "get_device_properties", lambda device=None: DEVICE_STAND_IN),
    ):
        yield


def _record(entry, label: str, args) -> CaseLaunches:
    rec = Recorder()
    mode = audit.AuditMode(poison_allocations=False)
    audit.recorders.append(rec)
    try:
        with torch.no_grad(), mode, _gpu_stand_ins():
            entry(*args)
    finally:
        audit.recorders.remove(rec)
    entry_args = [_arg_spec(f"arg{i}", a, False) for i, a in enumerate(args)]
    return CaseLaunches(label, rec.launches, dict(mode.ops), int(mode.bytes_written), entry_args)
