"""`kernelbrain verify`, `bench` and `init` from the command line (CPU interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelbrain.engine.evaluate.pool import WorkerPool
from kernelbrain.engine.evaluate.verify import run_harness
from kernelbrain.engine.task import find_task

from .adversarial.attacks import ATTACKS, BASE, CORRECT
from .conftest import EXAMPLES


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernelbrain.engine.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
    )


@pytest.mark.slow
def test_every_example_passes_its_own_harness_on_cpu():
    with WorkerPool() as pool:
        for path in sorted((EXAMPLES / "ops").glob("*.py")):
            result = run_harness(pool, find_task(path, f"{path.stem}_kernel"), None, "cpu")
            assert result.accepted, f"{path.name}: {result.message}"
            assert [s.name for s in result.stages] == [
                "smoke",
                "sweep",
                "stability",
                "determinism",
                "edge",
            ]
            assert all(s.cases > 0 for s in result.stages), path.name


@pytest.mark.slow
def test_verify_of_a_hanging_candidate_ends_within_a_minute_by_default(tmp_path):
    """No --timeout: the per-call timeout follows from the original's own check (a floor plus a
    multiple of its stages), so a candidate that hangs ends in seconds, not in the constant
    default's ten minutes, and the message says where the figure comes from."""
    hang = tmp_path / "hang.py"
    hang.write_text(ATTACKS["infinite loop"].source)
    start = time.monotonic()
    proc = cli(
        "verify", f"{BASE}::softmax_kernel", "--candidate", str(hang), "--json", "--device", "cpu"
    )
    wall = time.monotonic() - start
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and report["reason"] == "timeout", proc.stdout[-2000:]
    assert "the original's own check took" in report["message"] and "--timeout" in report["message"]
    assert wall < 60, f"{wall:.0f} s"


def test_verify_json_accepted_and_rejected(tmp_path):
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text(CORRECT)
    bad.write_text(ATTACKS["wrong values"].source)
    target = f"{BASE}::softmax_kernel"
    ok = cli("verify", target, "--candidate", str(good), "--json", "--device", "cpu")
    assert ok.returncode == 0, ok.stderr
    report = json.loads(ok.stdout)
    assert report["accepted"] is True and report["stage"] is None and report["device"] == "cpu"
    assert report["cases"] and all(
        {"stage", "label", "ok", "max_abs_err"} <= set(c) for c in report["cases"]
    )
    no = cli("verify", target, "--candidate", str(bad), "--json", "--device", "cpu")
    assert no.returncode == 1
    report = json.loads(no.stdout)
    assert (report["accepted"], report["stage"], report["reason"]) == (False, "smoke", "mismatch")
    assert "differ beyond" in report["message"]


def test_verify_usage_errors(tmp_path):
    cand = tmp_path / "c.py"
    cand.write_text(CORRECT)
    assert cli("verify", f"{BASE}::nope", "--candidate", str(cand)).returncode == 2
    assert (
        cli(
            "verify", f"{BASE}::softmax_kernel", "--candidate", str(tmp_path / "none.py")
        ).returncode
        == 2
    )
    r = cli("verify", f"{BASE}::softmax_kernel", "--candidate", str(cand), "--device", "cuda:3")
    assert r.returncode == 2 and "GPU" in r.stderr
    # One colon, as `module:function` is written elsewhere: the message says what was meant.
    for command in ("verify", "optimize", "bench", "init"):
        extra = ["--candidate", str(cand)] if command == "verify" else []
        r = cli(command, f"{BASE}:softmax_kernel", *extra)
        assert r.returncode == 2, (command, r.stderr)
        assert f"two colons: {BASE}::softmax_kernel" in r.stderr, (command, r.stderr)


def test_bench_on_cpu_runs_the_harness_and_says_why_no_timing():
    r = cli("bench", f"{EXAMPLES / 'ops' / 'gelu.py'}::gelu_kernel", "--device", "cpu")
    assert r.returncode == 0, r.stderr
    assert "passed all 5 stages" in r.stdout and "No timing" in r.stdout
    r = cli("bench", f"{EXAMPLES / 'ops' / 'gelu.py'}::gelu_kernel", "--device", "cpu", "--json")
    data = json.loads(r.stdout)
    assert (
        data["harness"]["accepted"] and data["bench"] is None and data["timing"].startswith("none")
    )


def test_init_then_harness_says_fill_me_in(tmp_path):
    src = (EXAMPLES / "ops" / "gelu.py").read_text().split("def gelu_ref")[0]
    (tmp_path / "gelu.py").write_text(src)
    r = cli("init", f"{tmp_path / 'gelu.py'}::gelu_kernel")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "gelu_harness.py").exists() and (tmp_path / "kernelbrain.toml").exists()
    # The next step init names is a command that runs as printed.
    step = r.stdout.split("`kernelbrain ", 1)[1].split("`", 1)[0].split()
    assert step[0] == "bench", r.stdout
    r = cli(*step, "--json")
    assert r.returncode == 2  # the harness is at fault, not the kernel
    data = json.loads(r.stdout)["harness"]
    assert (
        data["reason"] == "harness-incomplete" and "fill in `gelu_small_inputs`" in data["message"]
    )
    assert cli("init", f"{tmp_path / 'gelu.py'}::gelu_kernel").returncode == 2  # already there


def test_bench_and_optimize_refuse_a_raising_inputs_alike_naming_its_line(examples_copy):
    """`inputs` (the benchmark cases) raises while `small_inputs` works: on the CPU the stages
    never call it, yet `optimize` needs it for its dry run; `bench` checks it the same way, and
    both say which file and line raised."""
    path = examples_copy / "ops" / "softmax.py"
    source = path.read_text()
    broken = source.replace(
        'def softmax_inputs(device="cuda"):\n',
        'def softmax_inputs(device="cuda"):\n    raise ValueError("no such checkpoint")\n',
    )
    assert broken != source
    path.write_text(broken)
    line = broken.splitlines().index('    raise ValueError("no such checkpoint")') + 1
    target = "ops/softmax.py::softmax_kernel"
    bench = cli("bench", target, "--device", "cpu", "--json", cwd=examples_copy)
    assert bench.returncode == 2, bench.stdout[-2000:]
    message = json.loads(bench.stdout)["harness"]["message"]
    assert "no such checkpoint" in message and f"softmax.py:{line}" in message, message
    opt = cli("optimize", target, "--device", "cpu", "--budget", "30s", "--json", cwd=examples_copy)
    assert opt.returncode == 2
    assert f"softmax.py:{line}" in json.loads(opt.stdout)["error"]["message"]
