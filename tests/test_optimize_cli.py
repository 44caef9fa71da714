"""`kernelbrain optimize` on every bundled example, on the CPU (issue acceptance): it finishes;
the multi-pass and small-tile examples get a verified variant whose diff applies cleanly and
whose written file passes the harness again."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelbrain.engine.evaluate.pool import WorkerPool
from kernelbrain.engine.evaluate.verify import run_harness
from kernelbrain.engine.task import find_task

from .conftest import EXAMPLES

# The examples whose search finds a variant (small tile; multi-pass); col_sum and matmul go
# through the same CLI path in the corpus budget tests (`tests/test_corpus.py`).
ALL = ["gelu", "softmax", "rmsnorm", "cross_entropy"]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    ws = tmp_path_factory.mktemp("optimize") / "ws"
    shutil.copytree(EXAMPLES, ws, ignore=shutil.ignore_patterns(".kernelbrain", "__pycache__"))
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    return ws


def optimize(ws: Path, op: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "kernelbrain.engine.cli.main",
            "optimize",
            f"ops/{op}.py::{op}_kernel",
            "--device",
            "cpu",
            "--budget",
            "150s",
            "--max-candidates",
            "10",
            "--json",
            *extra,
        ],
        capture_output=True,
        text=True,
        cwd=ws,
        timeout=400,
    )


@pytest.fixture(scope="module")
def optimized(workspace, tmp_path_factory) -> dict:
    """`optimize` of each example with a report, two at a time (their own processes, as two
    editors' searches): (process, report path) per example."""
    from concurrent.futures import ThreadPoolExecutor

    reports = tmp_path_factory.mktemp("reports")

    def one(op: str):
        report = reports / f"{op}.html"
        return optimize(workspace, op, "--report", str(report)), report

    with ThreadPoolExecutor(max_workers=2) as ex:
        return dict(zip(ALL, ex.map(one, ALL)))


@pytest.mark.slow
@pytest.mark.parametrize("op", ALL)
def test_optimize_example(workspace, optimized, op, tmp_path):
    proc, report = optimized[op]
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    for key in ("kernel", "file", "device", "baseline", "variants", "budget", "candidates"):
        assert key in out
    assert out["kernel"] == f"{op}_kernel" and out["device"] == "cpu" and out["measured"] is False
    assert out["gpu_s_to_best"] is None  # no GPU seconds without a GPU
    # the cap of 10, plus at most the two variants the end of the search builds past it: the best
    # polished with the steps that paid elsewhere, and a dispatch when different variants win
    assert len(out["baseline"]) == 3 and out["budget"]["spent"]["candidates"] <= 12
    assert set(out["budget"]["limits"]) >= {"wall_s", "max_candidates", "llm_tokens"}
    assert out["candidates"]["per_stage"] and out["candidates"]["per_outcome"]
    # every candidate the search made ends somewhere, the ones the budget left unjudged included
    assert sum(out["candidates"]["per_outcome"].values()) == out["candidates"]["total"]
    html = report.read_text()
    assert html.count("<svg") == 3 and f"{op}_kernel" in html
    for v in out["variants"]:
        assert (
            v["measured"] is False and v["verified"] and v["diff"].startswith(f"--- a/ops/{op}.py")
        )
        assert {"id", "speedup", "per_case", "explanation"} <= set(v)
        assert "estimated" in v["explanation"]
    assert out["variants"], f"no verified variant for {op}: {out['candidates']}"
    best = out["variants"][0]
    assert best["speedup"] > 1.0
    # The diff applies cleanly to the original, and the written file passes the harness again.
    patch = tmp_path / "best.patch"
    patch.write_text(best["diff"])
    check = subprocess.run(
        ["git", "apply", "--check", str(patch)], cwd=workspace, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr
    subprocess.run(["git", "apply", str(patch)], cwd=workspace, check=True)
    try:
        with WorkerPool() as pool:
            result = run_harness(
                pool, find_task(workspace / "ops" / f"{op}.py", f"{op}_kernel"), None, "cpu"
            )
        assert result.accepted, result.message
    finally:
        subprocess.run(["git", "apply", "-R", str(patch)], cwd=workspace, check=True)


def test_optimize_usage_errors(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernelbrain.engine.cli.main",
            "optimize",
            str(EXAMPLES / "ops" / "gelu.py"),
            "--budget",
            "soon",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "not a duration" in r.stderr
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernelbrain.engine.cli.main",
            "optimize",
            str(EXAMPLES / "ops" / "gelu.py"),
            "--llm",
            "--llm-dollars",
            "-1",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "--llm-dollars" in r.stderr
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernelbrain.engine.cli.main",
            "optimize",
            str(EXAMPLES / "ops" / "gelu.py"),
            "--max-candidates",
            "0",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "--max-candidates must be at least 1" in r.stderr


@pytest.mark.slow
def test_optimize_without_a_candidate_cap_runs_to_its_time_budget(workspace):
    """No `--max-candidates`: the time budget (or stagnation) ends the search, not a hidden cap of
    60 candidates, which a GPU compiles and ranks in well under a minute."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kernelbrain.engine.cli.main",
            "optimize",
            "ops/gelu.py::gelu_kernel",
            "--device",
            "cpu",
            "--budget",
            "25s",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=workspace,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["budget"]["limits"]["max_candidates"] is None
    assert out["stopped"] != "budget: candidates"
    assert out["budget"]["spent"]["candidates"] > 0


def test_report_marks_stepping_stones_apart_from_pruned_candidates():
    """A stepping stone was kept and expanded; the trajectory plot must not show it as pruned."""
    from kernelbrain.engine.cli.report_html import OUTCOME_COLOURS, _colour

    assert _colour("quick:below-lead") == OUTCOME_COLOURS["stepping stone"]
    assert (
        _colour("quick:ranked-out") == _colour("estimate:ranked-out") == OUTCOME_COLOURS["pruned"]
    )
    assert _colour("verified") == OUTCOME_COLOURS["verified"]


@pytest.mark.slow
def test_ctrl_c_while_the_original_is_checked_exits_130_interrupted(examples_copy):
    """A Ctrl-C that lands while the original's own check runs is an interruption (exit 130),
    never "the original kernel fails its own harness (load: cancelled)"."""
    import signal
    import time

    path = examples_copy / "ops" / "softmax.py"
    source = path.read_text()
    slow = source.replace(
        "def softmax_ref(x: torch.Tensor) -> torch.Tensor:\n",
        "def softmax_ref(x: torch.Tensor) -> torch.Tensor:\n    __import__('time').sleep(60)\n",
    )
    assert slow != source
    path.write_text(slow)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernelbrain.engine.cli.main", "optimize",
         "ops/softmax.py::softmax_kernel", "--device", "cpu", "--budget", "120s"],
        cwd=examples_copy, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # an ignored SIGINT is inherited (an earlier test may leave it so): restore it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    seen = ""
    deadline = time.monotonic() + 120
    while "checking the original" not in seen and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
    assert "checking the original" in seen, seen
    time.sleep(2)  # inside the original's check: the reference sleeps
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted" in err and "fails its own harness" not in err, err[-2000:]


def test_a_search_with_lowering_starts_from_the_compilers_kernels(tmp_path):
    """`--lowering` on the CPU: the judge compiles the reference, its kernels enter the ladder
    as a variant of the user's module and are verified like any other."""
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLES, ws, ignore=shutil.ignore_patterns(".kernelbrain", "__pycache__"))
    r = optimize(ws, "rmsnorm", "--lowering", "--no-memory", "--max-candidates", "4")
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    lowered = [v for v in out["variants"] if v["origin"] == "lowering"]
    assert lowered and lowered[0]["description"].startswith("torch.compile (default)")
    assert not [n for n in out["notes"] if "torch.compile" in n], out["notes"]
    # the user's file is untouched: the variant is offered, not applied
    assert "inductor_" not in (ws / "ops" / "rmsnorm.py").read_text()
    # the next search of the kernel takes torch.compile's answer from the store
    again = optimize(ws, "rmsnorm", "--lowering", "--no-memory", "--max-candidates", "1")
    assert again.returncode == 0, again.stderr[-2000:]
    notes = json.loads(again.stdout)["notes"]
    assert any("torch.compile (default) of the reference: as compiled on" in n for n in notes)


def test_lowering_is_on_by_default_on_a_gpu_only():
    from kernelbrain.engine.search.lowering_step import wanted

    assert wanted(True, None) and not wanted(False, None)
    assert wanted(False, True) and not wanted(True, False)
