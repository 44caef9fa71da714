"""Human-readable terminal output for verify/bench (rich tables; plain text when piped)."""

from __future__ import annotations

from rich.console import Console
from rich.markdown import Markdown
from rich.markup import escape
from rich.table import Table

from ..api.results import against_compiler

console = Console(highlight=False, soft_wrap=True)


def _status(ok: bool) -> str:
    return "[green]passed[/]" if ok else "[red]failed[/]"


def print_harness(task, device: str, result) -> None:
    console.print(f"[bold]{task.kernel}[/] ({task.file}) on {device}")
    if result.accepted:
        console.print(f"harness: [green]{escape(result.message)}[/]")
    else:
        console.print(
            f"harness: [red]failed at {escape(result.stage)}[/] ({escape(result.reason)})\n"
            f"  {escape(result.message)}"
        )


def print_verify(report) -> None:
    head = f"[bold]{report.kernel}[/] · candidate {report.candidate_id} · {report.device}"
    console.print(head)
    if report.accepted:
        console.print(f"[green]ACCEPTED[/]: {escape(report.message)}")
    else:
        where = f" (line {report.line})" if report.line else ""
        console.print(
            f"[red]REJECTED[/] at {escape(report.stage)}{where}: [bold]{escape(report.reason)}[/]\n"
            f"  {escape(report.message)}"
        )
    if report.stages:
        console.print(
            "stages: "
            + ", ".join(f"{s.name} {_status(s.passed)} ({s.cases})" for s in report.stages)
        )
    for note in getattr(report, "notes", []):
        console.print(f"note: {escape(note)}")
    if report.timing is not None:
        t = Table(
            "case", "baseline ms", "candidate ms", "speedup", "95% CI", "p", "noise", "verdict"
        )
        for c in report.timing.cases:
            t.add_row(
                escape(c.label),
                f"{c.baseline_ms:.4f}",
                f"{c.candidate_ms:.4f}",
                f"{c.speedup:.3f}x",
                f"{c.ci_low:.3f}-{c.ci_high:.3f}",
                f"{c.p_value:.2g}",
                f"{c.noise_floor:.1%}",
                c.verdict,
            )
        console.print(t)
        console.print(
            f"geomean speedup {report.timing.speedup:.3f}x: [bold]{report.timing.verdict}[/]"
        )


def print_bench(result, places=(), findings=(), ncu=None) -> None:
    t = Table("case", "median ms", "spread", "GB/s", "TFLOP/s", "of ceiling", "roofline")
    by_label = {p.label: p for p in places}
    for c in result.cases:
        place = by_label.get(c.label)
        t.add_row(
            escape(c.label),
            f"{c.median_ms:.4f}",
            f"{c.spread:.1%}",
            f"{c.gbps:.0f}",
            f"{c.tflops:.0f}" if c.tflops else "-",
            f"{c.fraction_of_ceiling:.1%}" if c.fraction_of_ceiling is not None else "-",
            place.summary if place else c.bound,
        )
    console.print(t)
    if result.ceilings is not None:
        ce = result.ceilings
        console.print(
            f"ceilings ({ce.device_name}): copy {ce.copy_gbps:.0f} GB/s, read stream "
            f"{ce.read_gbps:.0f} GB/s, bf16 matmul {ce.bf16_tflops:.0f} TFLOP/s"
        )
    for code, _, message in findings:
        console.print(f"{code} {message}", markup=False)
    if ncu is not None:
        if not ncu.kernels:
            console.print(f"Nsight Compute: {ncu.message}", markup=False)
        for k in ncu.kernels:
            stalls = ", ".join(f"{r} {v:.1f}" for r, v in k.top_stalls)
            console.print(
                f"Nsight Compute {k.name}: {k.duration_us:.1f} us, SOL memory {k.memory_sol_pct}% / compute "
                f"{k.compute_sol_pct}%, DRAM {k.dram_pct}%, occupancy {k.achieved_occupancy_pct}%, "
                f"{k.registers} regs, local ld/st {k.local_loads}/{k.local_stores}; top stalls: {stalls}",
                markup=False,
            )


def print_profile(result) -> None:
    t = Table("#", "kernel", "GPU time (us)", "calls", "share", "Amdahl ceiling", "source")
    for k in result.kernels[:20]:
        src = f"{k.file}:{k.line}" if k.file else ("" if not k.triton else "?")
        t.add_row(
            str(k.rank),
            k.name[:60],
            f"{k.device_us:.1f}",
            str(k.calls),
            f"{k.share:.1%}",
            f"{k.amdahl:.2f}x",
            src,
        )
    console.print(t)
    console.print(f"total GPU time {result.total_us / 1000:.2f} ms in {result.script}")


# What each rung of the ladder is, and how a candidate's climb ended, in a user's words (the
# JSON keeps the engine's keys: `rung:reason`).
RUNG_WORDS = {
    "gate": "refused by the policy gate",
    "compile": "failed to compile",
    "smoke": "failed the first correctness checks",
    "estimate": "ranked out by the cost model",
    "quick": "slower in a quick timing",
    "full": "failed full verification",
    "final": "lost the final timing",
}
OUTCOME_WORDS = {
    "verified": "verified",
    "not-run": "not judged: the budget ended first",
    "ranked-out": "",
    "pruned": "",
}


def outcome_words(key: str) -> str:
    """`rung:reason` as a reader says it: 'failed the first correctness checks (mismatch)'."""
    if key in OUTCOME_WORDS:
        return OUTCOME_WORDS[key]
    rung, _, reason = key.partition(":")
    said = RUNG_WORDS.get(rung, f"stopped at {rung}")
    detail = OUTCOME_WORDS.get(reason, reason.replace("-", " "))
    return f"{said} ({detail})" if detail else said


def counts_table(counts) -> Table:
    """How many candidates reached each rung and how they ended, as rows a newcomer can read;
    the outcomes add up to every candidate the search made."""
    t = Table("rung", "reached", title="candidates", title_justify="left")
    for stage, n in counts.per_stage.items():
        t.add_row(stage, str(n))
    outcomes = Table(
        "outcome", "candidates", title=f"outcomes of {counts.total}", title_justify="left"
    )
    for outcome, n in sorted(counts.per_outcome.items(), key=lambda kv: (-kv[1], kv[0])):
        outcomes.add_row(escape(outcome_words(outcome)), str(n))
    grid = Table.grid(padding=(0, 4))
    grid.add_row(t, outcomes)
    return grid


def _variant_table(result, variants) -> Table:
    labels = [c.label for c in variants[0].per_case] if variants else []
    compiled = [against_compiler(result, v) for v in variants]
    columns = ["variant", "made by", "speedup"]
    columns += ["vs torch.compile"] if any(x is not None for x in compiled) else []
    t = Table(
        *columns,
        "per case: " + escape(", ".join(labels)) if labels else "per case",
        "kind",
        caption="* the best: the one `apply` takes" if result.best else None,
        caption_justify="left",
    )
    for v, vs in zip(variants, compiled):
        row = [v.id[:10] + (" *" if v.id == result.best else ""), escape(v.origin[:40])]
        row += [f"{v.speedup:.2f}x"]
        row += [f"{vs:.2f}x" if vs is not None else "–"] if len(columns) == 4 else []
        row += [" ".join(f"{c.speedup:.2f}" for c in v.per_case)]
        t.add_row(*row, "measured" if v.measured else "estimate")
    return t


def compiler_line(result) -> str | None:
    """torch.compile's time beside the original's, per case, where it was measured."""
    parts = []
    for c in result.baseline:
        best = c.compiled_best_us()
        if best is None:
            continue
        mode = min(c.compile_us, key=c.compile_us.get)
        ratio = c.time_us / best
        parts.append(
            f"{c.label}: {best:.1f} µs ({mode}), "
            + (f"{ratio:.2f}x faster than yours" if ratio >= 1 else f"{1 / ratio:.2f}x slower")
        )
    return "torch.compile of the reference: " + "; ".join(parts) if parts else None


def print_search(result, out: Console | None = None) -> None:
    from ..api.results import is_win

    out = out or console
    kind = (
        "measured"
        if result.measured
        else "estimated (no GPU: verified on the CPU interpreter, ranked by the cost model)"
    )
    out.print(f"[bold]{result.kernel}[/] ({result.file}) on {result.device}: {kind}")
    spent, limits = result.budget.spent, result.budget.limits
    out.print(
        f"stopped: {escape(result.stopped)}\nspent: {spent.wall_s:.0f} s of {limits.wall_s:.0f} s, "
        f"{spent.candidates} candidates, {spent.gpu_s:.0f} s GPU{busy_words(spent)}"
    )
    out.print(counts_table(result.candidates))
    compiler = compiler_line(result)
    if compiler is not None:
        out.print(escape(compiler), highlight=False)
    wins = [v for v in result.variants if is_win(v)]
    others = [v for v in result.variants if not is_win(v)]
    if wins:
        out.print(_variant_table(result, wins[:10]))
    else:
        out.print("no verified variant is faster than the original")
    if others:
        shown = ", ".join(
            f"{v.id[:8]} ({escape(v.origin[:24])}, {v.speedup:.2f}x)" for v in others[:6]
        )
        more = f" and {len(others) - 6} more" if len(others) > 6 else ""
        out.print(
            f"[dim]verified but no faster than the original: {shown}{more}[/]", highlight=False
        )
    best = next((v for v in result.variants if v.id == result.best), None)
    if best is not None:
        out.print(
            f"\n[bold]best[/] {best.id} ({best.speedup:.2f}x, "
            f"{'measured' if best.measured else 'estimated'}), found after {result.time_to_best_s:.0f} s:"
        )
        out.print(Markdown(best.explanation))
        out.print(best.diff, markup=False, highlight=False)
    for note in result.notes:
        out.print(f"[dim]note: {escape(note)}[/]")


def busy_words(spent) -> str:
    """How busy the GPU was once candidates reached it, in words; "" off a GPU."""
    if spent.gpu_busy_share is None:
        return ""
    return f" (busy {spent.gpu_busy_share:.0%} of the time after the first candidate reached it)"
