"""The compiled view of a file's kernels (engine side; compiles in a worker, never imports torch).

For a kernel with a harness, the specialisations are the ones its benchmark cases really
launch (a dry run on `meta` tensors). Without a harness they come from the launch site: literal
constexprs, warps and stages, pointers assumed fp32 and 16-byte aligned, integers assumed
divisible by 16; the result says so. Results are cached by source hash, kernel and options.
"""

from __future__ import annotations

import threading

from .. import protocol as m
from ..api import facts
from ..api.compiled_view import CompiledView, CompiledViewRequest, CompiledViewResult
from ..evaluate.pool import WorkerDied, WorkerPool
from ..index import parse_module
from ..index.builder import source_hash
from ..index.findings import Finding
from ..rules.analysis import kernel_views, launch_views
from ..task import TaskError, find_task
from .compiled_rules import compiled_findings, tensor_core_finding

COMPILE_TIMEOUT_S = 300.0


def _static_records(source: str, path: str, kernel: str) -> tuple[list[facts.LaunchRecord], str]:
    """Specialisations read off the launch sites, when every constexpr there is a literal."""
    pm = parse_module(source, path)
    views = kernel_views(pm)
    kv = next((k for k in views if k.name == kernel), None)
    if kv is None:
        return [], f"kernel {kernel} not found"
    pointers = set()
    for c in kv.tl_calls(
        "load", "store", "atomic_add", "atomic_max", "atomic_min", "atomic_xchg", "atomic_cas"
    ):
        pointers |= kv.pointer_params_of(c)
    records = []
    for lv in launch_views(pm, views):
        if lv.kernel is not kv:
            continue
        args: list[facts.ArgSpec] = []
        for p in kv.kernel.params:
            if p.constexpr:
                value = lv.const_int(lv.args.get(p.name))
                if value is None and p.default is not None:
                    try:
                        value = int(p.default)
                    except ValueError:
                        value = None
                if value is None:
                    return (
                        [],
                        f"`{p.name}` is not a literal at the launch site (give the kernel a harness)",
                    )
                args.append(facts.ArgSpec(p.name, "constexpr", value=value))
            elif p.name in pointers:
                args.append(facts.ArgSpec(p.name, "ptr", dtype="fp32"))
            else:
                args.append(facts.ArgSpec(p.name, "int", dtype="i32", value=1024))
        records.append(
            facts.LaunchRecord(
                kernel,
                (1,),
                args,
                lv.num_warps() or 4,
                lv.const_int(lv.options.get("num_stages")) or 3,
            )
        )
    if not records:
        return [], "no launch site in this file (give the kernel a harness)"
    return records, "assumed fp32 pointers, 16-byte aligned, integers divisible by 16"


def _harness_records(
    path: str, source: str, kernel: str, pool: WorkerPool
) -> list[facts.LaunchRecord] | None:
    try:
        task = find_task(path, kernel)
    except TaskError:
        return None
    spec = pool.call("compile:0", m.Specialize(task, source), COMPILE_TIMEOUT_S)
    if not isinstance(spec, facts.SpecializeResult) or not spec.cases:
        return None
    seen, out = set(), []
    for case in spec.cases:
        for rec in case.launches:
            if rec.kernel != kernel:
                continue
            key = facts.compile_key(rec)
            if key not in seen:
                seen.add(key)
                out.append(rec)
    return out


class CompiledViewService:
    """Computes and caches compiled views; safe to call from several threads."""

    def __init__(self, pool: WorkerPool):
        self.pool = pool
        self._cache: dict[tuple, CompiledView] = {}
        self._lock = threading.Lock()

    def view(self, req: CompiledViewRequest) -> CompiledViewResult:
        pm = parse_module(req.source, req.file)
        digest = source_hash(req.source)
        names = req.kernels or [k.name for k in pm.index.launchable]
        views, errors = [], []
        for name in names:
            key = (digest, req.file, name, req.arch, req.maxnreg)
            with self._lock:
                cached = self._cache.get(key)
            if cached is not None:
                views.append(cached)
                continue
            try:
                view = self._compute(req, pm, name)
            except WorkerDied as d:
                errors.append(f"{name}: the compiler worker died ({d.kind}): {d.message}")
                continue
            with self._lock:
                self._cache[key] = view
            views.append(view)
        return CompiledViewResult(digest, views, errors)

    def _compute(self, req: CompiledViewRequest, pm, name: str) -> CompiledView:
        records = _harness_records(req.file, req.source, name, self.pool)
        origin, note = "harness", ""
        if not records:
            records, note = _static_records(req.source, req.file, name)
            origin = "launch site"
        kernel = pm.index.kernel(name)
        if not records or kernel is None:
            return CompiledView(name, [], [], [], origin, note)
        result = self.pool.call(
            "compile:0",
            m.Compile(req.source, req.file, records, req.arch, True, req.maxnreg),
            COMPILE_TIMEOUT_S,
        )
        compiled = result.facts if isinstance(result, facts.CompileResult) else []
        uses_dot = "tl.dot(" in req.source
        findings: list[Finding] = []
        for rec, f in zip(records, compiled):
            items = compiled_findings(rec, f, f"sm_{req.arch}")
            tc = tensor_core_finding(
                uses_dot and _kernel_uses_dot(pm, name), f, rec, f"sm_{req.arch}"
            )
            if tc:
                items.append(tc)
            for code, severity, message in items:
                text = message + (f" [{note}]" if note else "")
                findings.append(Finding(code, text, kernel.name_span, severity, name, req.file))
        unique = {(f.code, f.message): f for f in findings}
        return CompiledView(name, records, compiled, list(unique.values()), origin, note)


def _kernel_uses_dot(pm, name: str) -> bool:
    kv = next((k for k in kernel_views(pm) if k.name == name), None)
    return bool(kv and kv.uses("dot"))
