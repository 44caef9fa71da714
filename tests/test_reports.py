"""The search's reports read well for a newcomer: counts as tables, variants no faster than the
original listed apart from real wins, an 80-column terminal or a file that shows every line
whole, and roofline labels that cannot stack on one another."""

from __future__ import annotations

import io
import re

from rich.console import Console

from kernelbrain.engine.api.budget import Budget, Spent
from kernelbrain.engine.api.results import (
    BaselineCase,
    BudgetReport,
    CandidateCounts,
    CaseValue,
    SearchResult,
    TrajectoryPoint,
    Variant,
    is_win,
)
from kernelbrain.engine.cli.report_html import render
from kernelbrain.engine.cli.report_text import print_search

LABELS = ["x: 16384x4096 bf16", "x: 4096x1024 bf16", "x: 1024x32768 bf16"]


def _variant(vid: str, speedups: list[float], verdicts: list[str], origin: str) -> Variant:
    per_case = [
        CaseValue(label, 100.0, 100.0 / s, s, verdict)
        for label, s, verdict in zip(LABELS, speedups, verdicts)
    ]
    geo = (speedups[0] * speedups[1] * speedups[2]) ** (1 / 3)
    explanation = f"**What changed**: {origin} rewrite"
    return Variant(
        vid, origin, f"{origin} rewrite", geo, per_case, ["smoke"], True, "", explanation
    )


def _result() -> SearchResult:
    win = _variant("winner0001", [2.0, 1.5, 1.8], ["faster"] * 3, "single-pass+config")
    same = _variant("sameas0002", [1.001, 0.999, 1.002], ["same"] * 3, "config")
    return SearchResult(
        kernel="softmax_kernel",
        file="ops/softmax.py",
        device="cuda:0",
        measured=True,
        baseline=[BaselineCase(label, 100.0, True) for label in LABELS],
        variants=[win, same],
        best=win.id,
        time_to_best_s=41.0,
        budget=BudgetReport(Budget(wall_s=120), Spent(wall_s=118, gpu_s=30, candidates=41)),
        candidates=CandidateCounts(
            41, {"compile": 41, "smoke": 20, "full": 6}, {"verified": 2, "estimate:ranked-out": 21}
        ),
        stopped="stagnation: no better variant in 3 generations",
        trajectory=[TrajectoryPoint(41.0, win.id, win.origin, "verified", 1.76, 1.0)],
        case_bytes=[2 * 16384 * 4096 * 2, 2 * 4096 * 1024 * 2, 2 * 1024 * 32768 * 2],
        case_flops=[None, None, None],
        ceilings={"copy_gbps": 4280.0, "bf16_tflops": 680.0},
    )


def test_wins_are_apart_from_variants_no_faster():
    result = _result()
    assert [is_win(v) for v in result.variants] == [True, False]
    # An estimate within the model's margin is no win either.
    estimate = _variant("estimate03", [1.005] * 3, [None] * 3, "config")
    estimate.measured = False
    assert not is_win(estimate)


def test_terminal_report_at_80_columns():
    buf = io.StringIO()
    print_search(_result(), Console(file=buf, width=80, highlight=False, soft_wrap=True))
    text = buf.getvalue()
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    assert "{" not in text  # counts are tables, not a raw dict
    # outcomes in a reader's words, not the engine's keys
    assert re.search(r"ranked out by the cost model\s+│\s+21", text), text
    assert "estimate:ranked-out" not in text and "outcomes of 41" in text
    # the per-case column names its cases; the best's mark is explained
    assert "per case:" in text and "16384x4096" in text.split("best")[0]
    assert "* the best" in text
    assert "**" not in text  # the explanation is rendered, not raw markdown
    wins, _, rest = text.partition("verified but no faster than the original:")
    assert "winner0001" in wins and "sameas0002" not in wins
    assert "sameas00" in rest
    assert "stopped: stagnation: no better variant in 3 generations" in text


def test_html_report_tables_and_roofline_labels():
    page = render(_result())
    assert "{'" not in page and "estimate:ranked-out</td><td>21" in page
    faster, _, slower = page.partition("Verified, no faster than the original")
    assert "winner0001" in faster and "sameas0002" in slower
    assert "sameas0002" not in faster.split("<h2>Faster variants</h2>")[1].split("<svg")[0]
    # The roofline numbers its cases (listed under it) instead of writing labels onto the plot.
    roofline = page[page.index("Roofline position") :]
    assert "16384x4096" not in roofline.split("</svg>")[0]
    assert all(f"<li>{label}: yours 100.0 µs</li>" in page for label in LABELS)


def test_torch_compile_stands_beside_the_original_where_it_was_measured():
    """A GPU search that lowered the reference times torch.compile per case: the terminal says
    where the compiler stands against the original, and each variant against the compiler."""
    import msgspec

    result = _result()
    result.baseline = [
        BaselineCase(
            label, 100.0, True, compile_us={"default": us, "max-autotune-no-cudagraphs": m}
        )
        for label, us, m in zip(LABELS, [50.0, 80.0, 200.0], [40.0, 90.0, 210.0])
    ]
    buf = io.StringIO()
    print_search(result, Console(file=buf, width=200, highlight=False, soft_wrap=True))
    text = buf.getvalue()
    assert (
        "x: 16384x4096 bf16: 40.0 µs (max-autotune-no-cudagraphs), 2.50x faster than yours" in text
    )
    assert "x: 1024x32768 bf16: 200.0 µs (default), 2.00x slower" in text
    # the winner: 50, 66.7, 55.6 µs against 40, 80, 200: geomean (0.8 * 1.2 * 3.6) ** (1/3)
    row = next(line for line in text.splitlines() if "winner0001" in line)
    assert "vs torch.compile" in text and f"{(0.8 * 1.2 * 3.6) ** (1 / 3):.2f}x" in row
    # --json keeps the figures per mode
    back = msgspec.json.decode(msgspec.json.encode(result), type=SearchResult)
    assert back.baseline[0].compile_us == {"default": 50.0, "max-autotune-no-cudagraphs": 40.0}
    # the report: the column, each case's compiler time, and the compiler in the per-case plot
    page = render(result)
    assert "<th>vs torch.compile</th>" in page and "torch.compile 40.0 µs" in page
    assert page.count("torch.compile") >= 5


def test_without_torch_compile_figures_the_terminal_says_nothing_of_it():
    buf = io.StringIO()
    print_search(_result(), Console(file=buf, width=200, highlight=False, soft_wrap=True))
    assert "torch.compile" not in buf.getvalue() and "torch.compile" not in render(_result())


def test_the_report_renders_explanations_colours_diffs_and_groups_variants_alike():
    result = _result()
    result.variants[0].explanation = (
        "**What changed**: one pass\n\n| case | x |\n|---|---|\n| a | 2.0 |\n\n"
        "<script>alert(1)</script>"
    )
    result.variants[0].diff = "--- a/k.py\n+++ b/k.py\n@@ -1 +1 @@\n-old\n+new\n same"
    # three more of the winner's kind (its steps in another order or repeated), one of another
    for i, origin in enumerate(["config+single-pass", "single-pass+config+config", "exp2"]):
        v = _variant(f"alike{i:05d}", [1.9 - i / 10, 1.5, 1.7], ["faster"] * 3, origin)
        result.variants.insert(1, v)
    result.variants.sort(key=lambda v: -v.speedup)
    page = render(result)
    expl = page[page.index("Explanations and diffs") :]
    assert "<strong>What changed</strong>" in expl and "**" not in expl
    assert "<table>" in expl and "<td>2.0</td>" in expl
    assert "<script>" not in page and "&lt;script&gt;" in expl  # shown, never run
    assert "<span class='add'>+new</span>" in expl and "<span class='del'>-old</span>" in expl
    wins = page[page.index("<h2>Faster variants</h2>") : page.index("<svg")]
    assert "and 2 more of this kind" in wins and "alike00000" not in wins
    assert "exp2" in wins  # another kind keeps its own row
