"""`optimize --report report.html`: one self-contained page with the search trajectory, per-case
speedups, the roofline position before and after, and every variant's explanation and diff.

Plots are drawn with matplotlib (Agg) as inline SVG, so the page needs no network and no files.
"""

from __future__ import annotations

import html
import io

from ..api.results import SearchResult, is_win
from .report_text import against_compiler, busy_words

OUTCOME_COLOURS = {
    "verified": "#2a9d3f",
    "stepping stone": "#e9a23b",
    "pruned": "#9a9a9a",
    "rejected": "#d1495b",
}


def markdown_html(text: str) -> str:
    """An explanation rendered (tables included); raw HTML in it is shown as text, never run:
    an explanation may quote an LLM's or a candidate's words."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).enable("table").render(text)


def diff_html(diff: str) -> str:
    """A unified diff with its added, removed and hunk lines coloured."""
    out = []
    for line in diff.splitlines():
        kind = (
            "add"
            if line.startswith("+") and not line.startswith("+++")
            else "del"
            if line.startswith("-") and not line.startswith("---")
            else "hunk"
            if line.startswith("@@")
            else "ctx"
        )
        out.append(f"<span class='{kind}'>{html.escape(line)}</span>")
    return "<pre class='diff'>" + "\n".join(out) + "</pre>"


def kind_of(origin: str) -> str:
    """What a variant changed, whatever the order and repetitions of its steps:
    `config+exp2+config` and `exp2+config` are one kind."""
    return "+".join(sorted(set(s for s in origin.split("+") if s))) or origin


def grouped(variants: list) -> list[tuple[object, list]]:
    """Variants of one kind under the best of them (the list comes best first)."""
    groups: dict[str, list] = {}
    for v in variants:
        groups.setdefault(kind_of(v.origin), []).append(v)
    return [(members[0], members[1:]) for members in groups.values()]


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def _colour(outcome: str) -> str:
    if outcome == "verified":
        return OUTCOME_COLOURS["verified"]
    if outcome == "quick:below-lead":  # quick-timed, expanded, not fully verified
        return OUTCOME_COLOURS["stepping stone"]
    if outcome.startswith(("estimate:", "quick:")):
        return OUTCOME_COLOURS["pruned"]
    return OUTCOME_COLOURS["rejected"]


def trajectory_plot(result: SearchResult) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    pts = result.trajectory
    for kind, colour in OUTCOME_COLOURS.items():
        sel = [p for p in pts if (_colour(p.outcome) == colour) and p.speedup is not None]
        ax.scatter(
            [p.t for p in sel], [p.speedup for p in sel], s=18, c=colour, label=kind, alpha=0.8
        )
    failed = [p for p in pts if p.speedup is None]
    if failed:
        ax.scatter(
            [p.t for p in failed],
            [0.0] * len(failed),
            s=18,
            marker="x",
            c=OUTCOME_COLOURS["rejected"],
            label="rejected (no score)",
        )
    if pts:
        xs, ys = [0.0], [1.0]
        for p in pts:
            xs.append(p.t)
            ys.append(p.best)
        ax.step(xs, ys, where="post", c="black", lw=1.5, label="best so far")
    ax.axhline(1.0, c="#444", lw=0.6, ls=":")
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("speedup" + ("" if result.measured else " (estimated)"))
    ax.set_title("Search trajectory")
    ax.legend(fontsize=8, loc="best")
    return _svg(fig)


def per_case_plot(result: SearchResult, top: int = 4) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = result.variants[:top]
    fig, ax = plt.subplots(figsize=(7.5, 3.2))
    labels = [b.label for b in result.baseline] or [
        c.label for c in (variants[0].per_case if variants else [])
    ]
    width = 0.8 / max(1, len(variants))
    for k, v in enumerate(variants):
        ax.bar(
            [i + k * width for i in range(len(v.per_case))],
            [c.speedup for c in v.per_case],
            width,
            label=f"{v.id[:8]} {v.origin[:30]}",
        )
    ax.axhline(1.0, c="#444", lw=0.8, ls=":")
    compiled = [
        (i + 0.4 - width / 2, b.time_us / b.compiled_best_us())
        for i, b in enumerate(result.baseline)
        if b.compiled_best_us()
    ]
    if compiled:  # where the compiler stands: the speedup torch.compile gives over yours
        ax.scatter(*zip(*compiled), marker="_", s=900, c="#d62728", label="torch.compile", zorder=3)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(labels))])
    ax.set_xticklabels([l[:28] for l in labels], fontsize=7, rotation=10)
    ax.set_ylabel("speedup" + ("" if result.measured else " (estimated)"))
    ax.set_title("Per-case speedup of the best variants")
    if variants or compiled:
        ax.legend(fontsize=7)
    return _svg(fig)


def roofline_plot(
    result: SearchResult,
    bytes_per_case: list[int],
    flops_per_case: list[int | None],
    copy_gbps: float,
    peak_tflops: float,
) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    xs = [10 ** (k / 20) for k in range(-40, 81)]
    ax.plot(
        xs, [min(copy_gbps * x / 1e3, peak_tflops) for x in xs], c="black", lw=1.2, label="roofline"
    )
    best = result.variants[0] if result.variants else None
    for i, base in enumerate(result.baseline):
        nbytes = bytes_per_case[i] if i < len(bytes_per_case) else 0
        flops = flops_per_case[i] if i < len(flops_per_case) else None
        if not nbytes:
            continue
        intensity = (
            (flops / nbytes) if flops else 0.25
        )  # streaming kernels: ~a fraction of a FLOP per byte
        work = flops if flops else nbytes * intensity

        def rate(us: float) -> float:
            return work / (us * 1e-6) / 1e12

        ax.scatter(
            [intensity],
            [rate(base.time_us)],
            marker="o",
            c="#d1495b",
            s=30,
            label="before" if i == 0 else None,
        )
        if best is not None and i < len(best.per_case):
            ax.scatter(
                [intensity],
                [rate(best.per_case[i].value_us)],
                marker="^",
                c="#2a9d3f",
                s=36,
                label="after (best)" if i == 0 else None,
            )
        # Cases of one kernel often share an intensity: a number beside each pair (the case
        # list below the plot names them) instead of labels stacked on one another.
        ax.annotate(
            str(i + 1),
            (intensity, rate(base.time_us)),
            xytext=(6, -4 - 9 * (i % 3)),
            textcoords="offset points",
            fontsize=7,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte; streaming kernels placed at 0.25)")
    ax.set_ylabel("TFLOP/s (equivalent)")
    ax.set_title("Roofline position before and after" + ("" if result.measured else " (estimated)"))
    ax.legend(fontsize=8)
    return _svg(fig)


def variant_rows(result: SearchResult):
    """The variants tables' header, and a function writing their rows: variants of one kind
    grouped under the best of them, each against torch.compile where it was measured."""
    esc = html.escape
    with_compiler = any(b.compile_us for b in result.baseline)

    def vs_compiler(v) -> str:
        if not with_compiler:
            return ""
        x = against_compiler(result, v)
        return f"<td>{x:.2f}x</td>" if x is not None else "<td>–</td>"

    def rows(variants) -> str:
        out = []
        for v, alike in grouped(variants):
            more = (
                f"<br><small>and {len(alike)} more of this kind, "
                f"{min(a.speedup for a in alike):.2f}–{max(a.speedup for a in alike):.2f}x</small>"
                if alike
                else ""
            )
            out.append(
                f"<tr><td><code>{esc(v.id)}</code></td><td>{esc(v.origin)}</td>"
                f"<td>{v.speedup:.2f}x</td>{vs_compiler(v)}"
                f"<td>{'measured' if v.measured else 'estimate'}</td>"
                f"<td>{esc(v.description)}{more}</td></tr>"
            )
        return "".join(out)

    head = (
        "<tr><th>id</th><th>made by</th><th>speedup</th>"
        + ("<th>vs torch.compile</th>" if with_compiler else "")
        + "<th>kind</th><th>what changed</th></tr>"
    )
    return head, rows


def cases_list(result: SearchResult) -> str:
    """The cases, numbered as the roofline numbers them, with the original's time and
    torch.compile's where it was measured."""
    esc = html.escape
    return (
        "<ol class='cases'>"
        + "".join(
            f"<li>{esc(b.label)}: yours {b.time_us:.1f} µs"
            + (
                f"; torch.compile {b.compiled_best_us():.1f} µs "
                f"({esc(min(b.compile_us, key=b.compile_us.get))})"
                if b.compile_us
                else ""
            )
            + "</li>"
            for b in result.baseline
        )
        + "</ol>"
    )


def render(result: SearchResult) -> str:
    esc = html.escape
    bytes_per_case, flops_per_case = result.case_bytes, result.case_flops
    copy_gbps = result.ceilings.get("copy_gbps", 4280.0)
    peak_tflops = result.ceilings.get("bf16_tflops", 680.0)
    kind = (
        "measured on " + result.device
        if result.measured
        else "estimated (no GPU: static cost model)"
    )
    best = next((v for v in result.variants if v.id == result.best), None)
    wins = [v for v in result.variants if is_win(v)]
    others = [v for v in result.variants if not is_win(v)]

    head, rows = variant_rows(result)
    wins_html = (
        f"<table>{head}{rows(wins)}</table>"
        if wins
        else "<p>No verified variant is faster than the original.</p>"
    )
    others_html = (
        f"<h2>Verified, no faster than the original</h2><table>{head}{rows(others)}</table>"
        if others
        else ""
    )
    counts = result.candidates
    counts_html = (
        "<table><tr><th>rung</th><th>candidates reaching it</th></tr>"
        + "".join(f"<tr><td>{esc(k)}</td><td>{n}</td></tr>" for k, n in counts.per_stage.items())
        + "</table><table><tr><th>outcome</th><th>candidates</th></tr>"
        + "".join(
            f"<tr><td>{esc(k)}</td><td>{n}</td></tr>"
            for k, n in sorted(counts.per_outcome.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        + "</table>"
    )
    cases_html = cases_list(result)
    details = "".join(
        f"<details{' open' if v.id == result.best else ''}><summary><code>{esc(v.id)}</code> "
        f"{esc(v.origin)}: {v.speedup:.2f}x</summary>"
        f"<div class='expl'>{markdown_html(v.explanation)}</div>{diff_html(v.diff)}</details>"
        for v, _ in grouped(result.variants)
    )
    spent = result.budget.spent
    summary = (
        f"best {best.speedup:.2f}x ({esc(best.origin)}) after {result.time_to_best_s:.0f} s"
        if best and result.time_to_best_s is not None
        else "no faster variant found"
    )
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>KernelBrain: {esc(result.kernel)}</title>
<style>body{{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;color:#222}}
table{{border-collapse:collapse;font-size:13px}}td,th{{border:1px solid #ccc;padding:3px 8px}}
pre{{background:#f6f6f6;padding:8px;overflow:auto;font-size:12px}} .diff{{color:#333}}
.diff .add{{color:#116329;background:#e6ffec}} .diff .del{{color:#82071e;background:#ffebe9}}
.diff .hunk{{color:#0550ae}} .expl{{font-size:14px;line-height:1.45}}
.counts{{display:flex;gap:2em;align-items:flex-start}} .cases{{font-size:13px}}</style></head><body>
<h1>{esc(result.kernel)}</h1>
<p><code>{esc(result.file)}</code> · {esc(kind)} · {summary}</p>
<p>Spent {spent.wall_s:.0f} s of {result.budget.limits.wall_s:.0f} s wall, {spent.gpu_s:.0f} s GPU{esc(busy_words(spent))}, {spent.candidates} candidates; stopped: {esc(result.stopped)}.</p>
<div class="counts">{counts_html}</div>
{"".join(f"<p><em>{esc(n)}</em></p>" for n in result.notes)}
<h2>Faster variants</h2>
{wins_html}
{trajectory_plot(result)}
{per_case_plot(result)}
{roofline_plot(result, bytes_per_case, flops_per_case, copy_gbps, peak_tflops)}
<p>Cases on the roofline:</p>{cases_html}
{others_html}
<h2>Explanations and diffs (the best of each kind)</h2>
{details}
</body></html>"""
