"""Regenerate BENCHMARKS.md's current tables from the result files in bench/results/.

    python bench/render_benchmarks.py          # rewrite the tables in place
    python bench/render_benchmarks.py --check  # exit 1 when BENCHMARKS.md is out of date

Everything between `<!-- tables:begin -->` and `<!-- tables:end -->` is generated; the method and
the history around it are prose. For each kernel, the latest result (by run id) is shown.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
DOC = ROOT / "BENCHMARKS.md"
BEGIN, END = "<!-- tables:begin -->", "<!-- tables:end -->"
sys.path.insert(0, str(ROOT / "bench"))
from run_suite import trailing_reason  # noqa: E402  (bench/ is no package)


def latest(kind: str) -> list[dict]:
    rows: dict[str, dict] = {}
    for path in sorted(RESULTS.glob("*.json")):
        r = json.loads(path.read_text())
        if r.get("kind") == kind and (
            r["op"] not in rows
            or (r["date"], r["run"]) > (rows[r["op"]]["date"], rows[r["op"]]["run"])
        ):
            rows[r["op"]] = r
    return [rows[k] for k in sorted(rows)]


def cell(text: str) -> str:
    """Text for a table cell: a dispatch variant's origin, `dispatch(a | b)`, holds a pipe."""
    return text.replace("|", "\\|")


def fmt(x, spec=".2f", none="–") -> str:
    return none if x is None else format(x, spec)


def search_table() -> list[str]:
    out = [
        "### Search, per kernel (5-minute budget, offline mutators, one H200)",
        "",
        "| kernel | case | first draft µs | best µs | × draft | × torch.compile | ceiling | "
        "time to best | wall / budget | run |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in latest("search"):
        for i, c in enumerate(r["cases"]):
            head = f"{r['op']} | " if i == 0 else " | "
            tail = (
                f"{fmt(r['time_to_best_s'], '.0f')} s | {fmt(r['wall_s'], '.0f')} / {fmt(r['budget_s'], '.0f')} s"
                f" | {r['run']} ({r['date']})"
                if i == 0
                else " | | "
            )
            speed = c["baseline_us"] / c["best_us"] if c.get("best_us") else None
            out.append(
                f"| {head}{c['label']} | {fmt(c['baseline_us'], '.1f')} | {fmt(c.get('best_us'), '.1f')} | "
                f"{fmt(speed)} | {fmt(c.get('vs_compile'))} | {ceiling(c)} | {tail} |"
            )
    versions = {r.get("versions") for r in latest("search")} | {
        r.get("gpu") for r in latest("search")
    }
    out += ["", "Machine and versions: " + "; ".join(sorted(v for v in versions if v)) + ".", ""]
    return out


def corpus_table() -> list[str]:
    """The corpus (tests/corpus: kernels written as real projects write them), each searched
    with the offline mutators; every time below is that kernel's own, timed alone by one method."""
    rows = latest("corpus")
    if not rows:
        return []
    budgets = sorted({int(r["budget_s"]) for r in rows if r.get("budget_s")})
    out = [
        f"### The corpus, per kernel ({', '.join(f'{b} s' for b in budgets)} budget, offline "
        "mutators, one H200)",
        "",
        "| kernel | case | original µs | best µs | × original | × eager | × torch.compile | "
        "× max-autotune | of ceiling | best found by | wall / budget | run |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        for i, c in enumerate(r["cases"]):
            best = c.get("alone_us")
            orig = c.get("original_alone_us")
            found = (
                f"{cell(r['best_origin'])}, {fmt(r['time_to_best_s'], '.0f')} s"
                if r.get("best_origin")
                else "no faster variant"
            )
            head = f"{r['op']} | " if i == 0 else " | "
            tail = (
                f"{found} | {fmt(r['wall_s'], '.0f')} / {fmt(r['budget_s'], '.0f')} s | "
                f"{r['run']} ({r['date']})"
                if i == 0
                else " | | "
            )
            over = {
                k: c[k] / best if best and c.get(k) else None
                for k in ("original_alone_us", "eager_us", "compile_us", "max_autotune_us")
            }
            out.append(
                f"| {head}{c['label'][:48]} | {fmt(orig, '.1f')} | {fmt(best, '.1f')} | "
                f"{fmt(over['original_alone_us'])} | {fmt(over['eager_us'])} | "
                f"{fmt(over['compile_us'])} | {fmt(over['max_autotune_us'])} | "
                f"{ceiling(c)} | {tail} |"
            )
    versions = {r.get("versions") for r in rows} | {r.get("gpu") for r in rows}
    out += ["", "Machine and versions: " + "; ".join(sorted(v for v in versions if v)) + ".", ""]
    return out


def ceiling(case: dict) -> str:
    """The fraction of the case's ceiling the best reaches: cuBLAS for a matmul (the
    reference's own precision), else copy bandwidth over the nominal bytes."""
    if case.get("frac_cublas") is not None:
        return f"{case['frac_cublas']:.0%} of cuBLAS"
    return f"{fmt(case.get('frac_copy') or None, '.0%')} of copy"


def suite_order() -> list[str]:
    from run_suite import kernels

    return [name for name, _, _ in kernels()]


def latest_suite() -> tuple[list[dict], float | None]:
    """(each kernel's latest suite result at the latest run's budget, in suite order; that
    budget): what the suite table and its plots show. A run on one GPU covers a few kernels, and
    what a user reads should hold every kernel measured so far."""
    rows = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("suite-*.json"))]
    rows = [r for r in rows if r.get("kind") == "suite"]
    if not rows:
        return [], None
    budget = max(rows, key=lambda k: (k["date"], k["run"])).get("budget_s")
    latest: dict[str, dict] = {}
    for k in sorted(
        (k for k in rows if k.get("budget_s") == budget), key=lambda k: (k["date"], k["run"])
    ):
        latest[k["op"]] = k
    order = {name: i for i, name in enumerate(suite_order())}
    return sorted(latest.values(), key=lambda k: order.get(k["op"], len(order))), budget


def lowered(kernel: dict) -> str:
    """The suite table's lowering column: whether the best started from torch.compile's kernels
    of the reference (the lowering mutator), how many verified variants did; `–` for a run from
    before the lowering."""
    if kernel.get("lowering") is None:
        return "– (run before the lowering)"
    if not kernel["lowering"]:
        return "not lowered"
    best = "best" if "lowering" in (kernel.get("best_origin") or "") else "not the best"
    return f"{best}; {kernel.get('lowered_variants') or 0} variant(s)"


def suite_table() -> list[str]:
    """The GPU benchmark suite (bench/run_suite.py): every first draft of the examples, the
    corpus and bench/suite searched under one budget, timed alone by one method; each kernel's
    latest result (`latest_suite`), each row naming its run."""
    kernels, budget = latest_suite()
    if not kernels:
        return []
    runs = sorted({(k["date"], k["run"]) for k in kernels})
    r = {"kernels": kernels, "budget_s": budget}
    cases = [c for k in r["kernels"] for c in k.get("cases", [])]
    vs = [c["x_compile"] for c in cases if c.get("x_compile")]
    geo = math.exp(sum(math.log(v) for v in vs) / len(vs)) if vs else None
    ahead = sum(1 for v in vs if v >= 1.0)
    explained = sum(1 for c in cases if trailing_reason(c))
    to_best = sorted(k["time_to_best_s"] for k in r["kernels"] if k.get("time_to_best_s"))
    over = [
        k["wall_s"] / k["budget_s"] for k in r["kernels"] if k.get("wall_s") and k.get("budget_s")
    ]
    out = [
        f"### The benchmark suite ({len(kernels)} of {len(suite_order())} kernels, "
        f"{fmt(budget, '.0f')} s budget each, offline mutators; each kernel's latest run: "
        f"{', '.join(f'{run} ({date})' for date, run in runs)})",
        "",
        f"Geomean over {len(vs)} cases: {fmt(geo)}× the better torch.compile mode; the best is at "
        f"least as fast on {ahead} of {len(vs)} cases, and {explained} more trail it tagged "
        "(launch or roof, below). Median time to best "
        f"{fmt(to_best[len(to_best) // 2] if to_best else None, '.0f')} s; the longest search "
        f"took {fmt(max(over, default=None), '.0%')} of its budget. Plots: "
        "[against torch.compile](bench/plots/suite-vs-compile.png), "
        "[fraction of the ceiling](bench/plots/suite-ceiling.png).",
        "",
        "| kernel | run | case | draft µs | best µs | × draft | × eager | × best torch.compile | "
        "of ceiling | best found by | from torch.compile's kernels | candidates | wall / budget |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k in r["kernels"]:
        if "error" in k:
            out.append(
                f"| {k['op']} | {k['run']} | – | search failed: "
                f"{k['error'].splitlines()[-1][:120]} |"
            )
            continue
        for i, c in enumerate(k["cases"]):
            found = (
                f"{cell(k['best_origin'])}, {fmt(k['time_to_best_s'], '.0f')} s"
                if k.get("best_origin")
                else "no faster variant"
            )
            head = f"{k['op']} | {k['run']} | " if i == 0 else " | | "
            tail = (
                f"{found} | {lowered(k)} | {fmt(k.get('candidates'), 'd')} | "
                f"{fmt(k['wall_s'], '.0f')} / {fmt(k['budget_s'], '.0f')} s"
                if i == 0
                else " | | | "
            )
            of = (
                f"{c['of_ceiling']:.0%} of {c['ceiling']}"
                if c.get("of_ceiling") is not None
                else "–"
            )
            why = f" ({reason})" if (reason := trailing_reason(c)) else ""
            out.append(
                f"| {head}{c['label'][:48]} | {fmt(c.get('original_alone_us'), '.1f')} | "
                f"{fmt(c.get('alone_us'), '.1f')} | {fmt(c.get('x_draft'))} | "
                f"{fmt(c.get('x_eager'))} | {fmt(c.get('x_compile'))}{why} | {of} | {tail} |"
            )
    floors = [c["launch_floor_us"] for c in cases if c.get("launch_floor_us")]
    reasons = {trailing_reason(c) for c in cases}
    if "launch" in reasons:
        out += [
            "",
            f"(launch): the case's best runs within 15% of an empty Triton launch "
            f"({floors[0]:.1f} µs, timed the same way): the launch's fixed cost, not the kernel, "
            "sets its time, and torch.compile's launcher costs less.",
        ]
    if "roof" in reasons:
        out += [
            "",
            "(roof): the case's best already moves at least 90% of its measured bandwidth roof, "
            "so little is left to gain there; torch.compile is still faster by the ratio shown "
            "(the roof is a measured copy or read stream, which a kernel can slightly exceed), "
            "so this says how small the gap is, not why it exists.",
        ]
    if any(
        (c.get("of_ceiling") or 0.0) > 1.0 and c.get("ceiling") in ("copy", "read stream")
        for c in cases
    ):
        out += [
            "",
            "Above 100% of its roof: the case skips work its byte count includes (every fourth "
            "row of cross_entropy_ignore is an ignored target whose program returns early), or "
            "its run predates the read stream (run SF on: a reduction, which writes at most an "
            "eighth of what it reads, is held to a measured read-only stream; before, to the "
            "copy, which writes a byte for every byte it reads), or, in runs up to SC, its bytes "
            "counted twice a tensor passed under two names (cross_entropy_grad's second case "
            "passes its logits as the unused gradient buffer).",
        ]
    out.append("")
    for date, run in runs:
        head = next(k for k in kernels if (k["date"], k["run"]) == (date, run))
        out.append(
            f"Run {run} ({date}): {head.get('gpu')}; {head.get('versions')}. "
            f"Command: `{head['command']}`."
        )
    return out + [""]


def verification_cost_table() -> list[str]:
    """Seconds one full verification cost each suite search, by run: the dearest rung, which
    decides how many generations a budget holds (run_suite.full_verification)."""
    rows = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("suite-*.json"))]
    rows = [r for r in rows if r.get("kind") == "suite" and "full_verified" in r]
    if not rows:
        return []
    runs = sorted({(r["date"], r["run"]) for r in rows})
    cost = {(r["op"], r["run"]): r for r in rows}
    order = {name: i for i, name in enumerate(suite_order())}
    out = [
        "### What one full verification costs a suite search (s per candidate, five harness "
        "stages on the benchmark cases, one H200)",
        "",
        "| kernel | " + " | ".join(f"{run} ({date})" for date, run in runs) + " |",
        "|---|" + "---|" * len(runs),
    ]
    for op in sorted({r["op"] for r in rows}, key=lambda op: order.get(op, len(order))):
        cells = []
        for _, run in runs:
            r = cost.get((op, run))
            cells.append(
                "–"
                if r is None or r.get("full_s_per_candidate") is None
                else f"{r['full_s_per_candidate']:.1f} ({r['full_verified']})"
            )
        out.append(f"| {op} | " + " | ".join(cells) + " |")
    return out + [
        "",
        "In brackets: how many candidates the search verified fully. From run SC on, the runner "
        "answers the judge without resending what it already holds (unchanged arguments, "
        "repeated outputs).",
        "",
    ]


def launcher_table() -> list[str]:
    """Host time a launcher spends per call, by piece (bench/launcher_cost_probe.py)."""
    rows = latest("launcher-cost")
    if not rows:
        return []
    out = [
        "### Host time of a launcher that compiles ahead of time on every call (KB115)",
        "",
        "| launcher | shape | whole launcher µs | warmup µs | device properties µs | compiled "
        "launch µs | JIT launch µs | GPU µs | run |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        for shape, t in r["shapes_us"].items():
            out.append(
                f"| {r['launcher']} | {shape} | {fmt(t['launcher_us'], '.1f')} | "
                f"{fmt(t['warmup_us'], '.1f')} | {fmt(t['device_properties_us'], '.1f')} | "
                f"{fmt(t['compiled_launch_us'], '.1f')} | {fmt(t['jit_launch_us'], '.1f')} | "
                f"{fmt(t['gpu_us'], '.1f')} | {r['run']} ({r['date']}) |"
            )
    return out + [""]


def matmul_probe_table() -> list[str]:
    """What hand-written Triton reaches against cuBLAS by kernel structure (bench/matmul_probe.py):
    the bound a matmul search from a naive draft can hope for."""
    rows = latest("matmul-probe")
    if not rows:
        return []
    kinds = [("pointer", "pointer loads, grouped"), ("tma", "tensor descriptors, grouped"),
             ("tma_persistent", "tensor descriptors, persistent")]  # fmt: skip
    out = [
        "### Hand-written Triton bf16 matmuls against cuBLAS, by structure (best of "
        "7 Hopper configurations each)",
        "",
        "| shape (M×N×K) | cuBLAS µs | " + " | ".join(label for _, label in kinds) + " | run |",
        "|---|---|" + "---|" * len(kinds) + "---|",
    ]
    for r in rows:
        for row in r["rows"]:
            cells = []
            for kind, _ in kinds:
                b = row["best"].get(kind)
                bm, bn, bk, w, st = b["config"] if b else (None,) * 5
                cells.append(
                    f"{b['of_cublas']:.2f}× ({bm}×{bn}×{bk}, {w} warps, {st} stages)" if b else "–"
                )
            shape = "×".join(str(x) for x in row["shape"])
            out.append(
                f"| {shape} | {fmt(row['cublas_us'], '.1f')} | {' | '.join(cells)} | "
                f"{r['run']} ({r['date']}) |"
            )
    return out + [""]


def memory_table() -> list[str]:
    """A second search of a similar kernel with and without the experience memory (CPU)."""
    rows = latest("memory")
    if not rows:
        return []
    out = [
        "### The experience memory: a second search of a similar kernel (CPU, cost-model "
        "estimates)",
        "",
        "| kernel | first search's best | memory | reached it after | candidates compiled by then "
        "| saved | own best | time to own best | best made by | run |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        for label, key in (("on", "with_memory"), ("off", "without_memory")):
            m = r[key]
            saved = (
                f"{r['saved']:.0%}" if key == "with_memory" and r.get("saved") is not None else ""
            )
            out.append(
                f"| {r['op']} | {fmt(r['first_best'])}× | {label} | {fmt(m['reached_s'], '.0f')} s | "
                f"{fmt(m.get('compiled_by_then'), 'd')} | {saved} | "
                f"{fmt(m['best'], '.3f')}× | {fmt(m['time_to_best_s'], '.0f')} s | "
                f"{m['best_origin']} | {r['run']} ({r['date']}) |"
            )
    return out + [""]


def ladder_table() -> list[str]:
    out = [
        "### The coarse-to-fine ladder against full fidelity (same search, every candidate at full "
        "fidelity)",
        "",
        "| kernel | GPU s, ladder | GPU s, full | saved | same best | run |",
        "|---|---|---|---|---|---|",
    ]
    for r in latest("ladder"):
        saved = 1 - r["ladder_gpu_s"] / r["full_gpu_s"] if r.get("full_gpu_s") else None
        same = r.get("ladder_best") == r.get("full_best")
        out.append(
            f"| {r['op']} | {fmt(r['ladder_gpu_s'], '.1f')} | {fmt(r['full_gpu_s'], '.1f')} | "
            f"{fmt(saved, '.0%')} | {'yes' if same else 'no'} | {r['run']} ({r['date']}) |"
        )
    return out + [""]


def judge_table() -> list[str]:
    out = [
        "### What judging costs (all five harness stages, and on the GPU the timing too; honest "
        "variants of the softmax fixture)",
        "",
        "| device | tree | candidates | s per candidate | judged per minute | honest faster "
        "variant measured at | run |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("judge-cost-*.json"))]
    for r in (r for r in rows if r.get("kind") == "judge-cost"):  # in file order: before, after
        speedups = r.get("honest_speedups") or []
        measured = ", ".join(f"{x:.3f}×" for x in speedups) if speedups else "–"
        out.append(
            f"| {r.get('gpu') if r.get('device', 'cpu') != 'cpu' else 'CPU interpreter'} | "
            f"{r['tree']} | {r['candidates']} | {fmt(r['seconds_per_candidate'], '.3f')} | "
            f"{fmt(r['candidates_per_minute'], '.0f')} | {measured} | {r['run']} ({r['date']}) |"
        )
    out += [
        "",
        "### The search's throughput, before and after the judge (softmax, 90 s budget, one H200)",
        "",
        "| tree | fully judged | s judging them | judged per minute | smoke-checked per minute "
        "| wall / budget | run |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("judge-search-*.json"))]
    for r in rows:
        out.append(
            f"| {r['tree']} | {r['fully_judged']} | {fmt(r['judging_seconds'], '.1f')} | "
            f"{fmt(r['judged_per_minute'], '.2f')} | {fmt(r['smoke_per_minute'], '.1f')} | "
            f"{fmt(r['wall_s'], '.0f')} / {r['budget_s']} s | {r['run']} ({r['date']}) |"
        )
    return out + [""]


def move_check_table() -> list[str]:
    """Searches on the tree before a change that should not alter behaviour, and after it."""
    out = []
    for path in sorted(RESULTS.glob("move-check-*.json")):
        r = json.loads(path.read_text())
        out += [
            f"### Before and after a layout change ({r['before_commit']} against "
            f"{r['after_commit']}; {r['budget_s']} s searches, offline mutators, one H200)",
            "",
            "| kernel | tree | best (by) | × draft (geomean) | verified variants | compiled | "
            "time to best | run |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in r["ops"]:
            for tree in [t for t in ("before", "after") if t in row]:
                t = row[tree]
                best = f"{t['best']} ({cell(t['best_origin'])})" if t["best"] else "none faster"
                out.append(
                    f"| {row['op'] if tree == 'before' or 'before' not in row else ''} | {tree} | {best} | "
                    f"{fmt(t['best_speedup'], '.3f')} | {len(t['variants'])} | {t['compiled']} | "
                    f"{fmt(t['time_to_best_s'], '.0f') + ' s' if t['time_to_best_s'] else '–'} | "
                    f"{r['run']} ({r['date']}) |"
                )
        out += [
            "",
            "Order: " + "; ".join(f"{row['op']}: {row['order']}" for row in r["ops"]) + ".",
            "",
        ]
    return out


def render() -> str:
    text = DOC.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    tables = "\n".join(
        [
            "",
            *suite_table(),
            *verification_cost_table(),
            *search_table(),
            *corpus_table(),
            *launcher_table(),
            *matmul_probe_table(),
            *memory_table(),
            *ladder_table(),
            *judge_table(),
            *move_check_table(),
        ]
    )
    return f"{head}{BEGIN}\n{tables}{END}{tail}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    new = render()
    if args.check:
        if new != DOC.read_text(encoding="utf-8"):
            print(
                "BENCHMARKS.md is out of date: run python bench/render_benchmarks.py",
                file=sys.stderr,
            )
            return 1
        return 0
    DOC.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
