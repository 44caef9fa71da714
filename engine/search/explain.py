"""Every variant explains itself: what changed, why it is faster, the before/after numbers, and
where it is not faster. Backed by the compiled view (registers, load widths, occupancy) when the
compiler reported it."""

from __future__ import annotations

from ..api.diff import diff_counts
from ..api.facts import CompiledFacts
from ..api.results import CaseValue


def summarize_diff(diff: str) -> str:
    added, removed = diff_counts(diff)
    return f"{added} line{'s' if added != 1 else ''} added, {removed} removed"


def _loads(f: CompiledFacts) -> str:
    if not f.global_load_bits:
        return "async copies" if f.tensor_core_ops else "none"
    widest = max(int(w) for w in f.global_load_bits)
    return f"{widest}-bit"


def compiled_changes(before: CompiledFacts | None, after: CompiledFacts | None) -> list[str]:
    if before is None or after is None or not (before.ok and after.ok):
        return []
    out = []
    if _loads(before) != _loads(after):
        out.append(f"global loads {_loads(before)} -> {_loads(after)}")
    if before.n_regs != after.n_regs and before.n_regs and after.n_regs:
        out.append(f"registers/thread {before.n_regs} -> {after.n_regs}")
    if (
        before.occupancy is not None
        and after.occupancy is not None
        and abs(before.occupancy - after.occupancy) > 0.01
    ):
        out.append(f"theoretical occupancy {before.occupancy:.0%} -> {after.occupancy:.0%}")
    if (before.num_warps, before.num_stages) != (after.num_warps, after.num_stages):
        out.append(
            f"warps/stages {before.num_warps}/{before.num_stages} -> {after.num_warps}/{after.num_stages}"
        )
    if (after.n_spills or 0) > (before.n_spills or 0):
        out.append(f"spills {before.n_spills or 0} -> {after.n_spills} bytes/thread")
    return out


def explain(
    description: str,
    diff: str,
    per_case: list[CaseValue],
    measured: bool,
    speedup: float,
    compiled: list[str],
) -> str:
    kind = "measured" if measured else "estimated by the static cost model (no GPU here)"
    lines = [f"**What changed** ({summarize_diff(diff)}): {description}.", ""]
    if compiled:
        lines += ["**Compiled view** (sm_90): " + "; ".join(compiled) + ".", ""]
    lines += [
        f"**Speedup**: {speedup:.2f}x geometric mean over {len(per_case)} cases, {kind}.",
        "",
        "| case | before (us) | after (us) | speedup |",
        "|---|---:|---:|---:|",
    ]
    for c in per_case:
        mark = f" ({c.verdict})" if c.verdict and c.verdict != "faster" else ""
        lines.append(
            f"| {c.label} | {c.baseline_us:.1f} | {c.value_us:.1f} | {c.speedup:.2f}x{mark} |"
        )
    slower = [c.label for c in per_case if c.speedup < 1 and (c.verdict in (None, "slower"))]
    if slower:
        lines += ["", f"**Not faster on**: {', '.join(slower)}."]
    return "\n".join(lines)
