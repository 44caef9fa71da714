"""The compiled view's request and result types, and its hover summary (no compiling here)."""

from __future__ import annotations

import msgspec

from ..index.findings import Finding
from . import facts as m


class CompiledView(msgspec.Struct):
    kernel: str
    specialisations: list[m.LaunchRecord]
    facts: list[m.CompiledFacts]
    findings: list[Finding]
    source: str  # "harness" (real launches) or "launch site" (assumed types)
    note: str = ""


class CompiledViewRequest(msgspec.Struct):
    file: str
    source: str
    kernels: list[str] | None = None
    arch: int = 90
    maxnreg: int | None = None


class CompiledViewResult(msgspec.Struct):
    source_hash: str
    views: list[CompiledView]
    errors: list[str] = []


def summary(view: CompiledView) -> str:
    """One line per specialisation, for hover text."""
    lines = []
    for rec, f in zip(view.specialisations, view.facts):
        consts = ", ".join(f"{a.name}={a.value}" for a in rec.args if a.kind == "constexpr")
        if not f.ok:
            lines.append(f"{consts}: does not compile ({(f.error or '')[:80]})")
            continue
        loads = ", ".join(
            f"{n}x{w}-bit" for w, n in sorted(f.global_load_bits.items(), key=lambda x: -int(x[0]))
        )
        looped = f" ({f.loop_instructions} in loops)" if f.loop_instructions else ""
        lines.append(
            f"{consts}, warps={f.num_warps}, stages={f.num_stages}: {f.n_regs} regs, "
            f"{f.n_spills or 0} B spilled, {(f.shared_bytes or 0) // 1024} KB shared, occupancy "
            f"{(f.occupancy or 0):.0%}, loads {loads or 'none'}, {f.tensor_core_ops} tensor-core ops, "
            f"{f.instructions} SASS instructions{looped}"
        )
    return "\n".join(lines)
