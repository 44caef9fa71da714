"""A budget is the user's wait: it counts from the command's process start (start-up, workers
and the original's check included), and worker calls get no more time than it has left."""

from __future__ import annotations

import subprocess
import sys

from kernelbrain.engine.api.budget import Budget
from kernelbrain.engine.search.meter import Meter, StopKind


class FakeClock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_the_wall_budget_counts_from_when_the_wait_began():
    clock = FakeClock(110.0)
    meter = Meter(Budget(wall_s=60.0, started_at=100.0), clock=clock, exit_s=0.0)
    assert meter.tick().wall_s == 10.0  # the ten seconds before the search object existed count
    meter.reserve(15.0)
    assert meter.left_s() == 35.0 and meter.wall_left_s() == 50.0
    clock.now = 145.0
    assert meter.exhausted().kind is StopKind.WALL  # 45 s spent: the reserve's share is reached
    clock.now = 170.0
    assert meter.wall_left_s() == 0.0
    assert Meter(Budget(wall_s=60.0), clock=clock).tick().wall_s == 0.0  # no start: from now


def test_the_search_leaves_the_command_time_to_exit_within_the_budget():
    """Storing the result and stopping the workers happen after the search, inside the user's
    wait: the search's own time is the budget less that allowance."""
    clock = FakeClock(0.0)
    meter = Meter(Budget(wall_s=30.0, started_at=0.0), clock=clock, exit_s=2.0)
    assert meter.wall_left_s() == 28.0 and meter.left_s() == 28.0
    clock.now = 28.0
    assert meter.exhausted().kind is StopKind.WALL
    tiny = Meter(Budget(wall_s=2.0, started_at=0.0), clock=FakeClock(0.0), exit_s=2.0)
    assert tiny.wall_left_s() == 1.0  # never less than half a tiny budget


def test_the_process_start_is_read_from_the_kernel_not_from_our_first_import():
    """A process that spends two seconds before importing anything of ours: its start is still
    two seconds back."""
    code = (
        "import time; time.sleep(2.0)\n"
        "from kernelbrain.engine.cli.process_clock import process_started_at\n"
        "print(time.monotonic() - process_started_at())\n"
    )
    age = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               check=True, timeout=60).stdout)  # fmt: skip
    assert 2.0 <= age < 30.0, age


def test_gpu_busy_share_counts_from_the_first_candidate_and_overlaps_once():
    """The original's check before any candidate does not count; overlapping GPU calls count
    once; the idle time between calls (compiles, the CPU) is what lowers the share."""
    from kernelbrain.engine.api.budget import Spent
    from kernelbrain.engine.cli.report_text import busy_words

    clock = FakeClock(0.0)
    meter = Meter(Budget(wall_s=100.0, started_at=0.0), clock=clock)

    def gpu_call(start: float, end: float) -> None:
        clock.now = start
        with meter.gpu_clock():
            clock.now = end

    gpu_call(0.0, 10.0)  # the original's check and timing
    assert meter.gpu_busy_share() is None
    clock.now = 20.0
    meter.candidate_on_gpu()
    gpu_call(20.0, 26.0)
    clock.now = 28.0
    with meter.gpu_clock():  # a call inside another: its seconds are already busy
        gpu_call(28.5, 29.0)
        clock.now = 30.0
    clock.now = 40.0  # idle: waiting on compiles
    share = meter.gpu_busy_share()
    assert share == (6.0 + 2.0) / 20.0
    assert meter.spent.gpu_s == 10.0 + 6.0 + 0.5 + 2.0  # charged time is per call
    assert "busy 40%" in busy_words(Spent(gpu_busy_share=share))
    assert busy_words(Spent()) == ""  # off a GPU: no claim at all


def optimize_with_a_slow(tmp_path, name: str, params: str) -> subprocess.CompletedProcess:
    """`optimize --budget 15s` of the bundled gelu, its harness function `name` (taking
    `params`) sleeping 60 s before it answers."""
    import shutil
    from pathlib import Path

    examples = Path(__file__).resolve().parent.parent / "examples"
    shutil.copytree(examples, tmp_path / "ws", ignore=shutil.ignore_patterns(".kernelbrain"))
    gelu = tmp_path / "ws" / "ops" / "gelu.py"
    text = gelu.read_text()
    assert f"def {name}(" in text
    call = ", ".join(p.split("=")[0] for p in params.split(", "))
    gelu.write_text(
        text.replace(f"def {name}(", f"def _{name}(")
        + f"\n\ndef {name}({params}):\n    import time\n\n    time.sleep(60)\n"
        + f"    return _{name}({call})\n"
    )
    return subprocess.run(
        [sys.executable, "-m", "kernelbrain.engine.cli.main", "optimize",
         "ops/gelu.py::gelu_kernel", "--device", "cpu", "--budget", "15s", "--json"],
        capture_output=True, text=True, cwd=tmp_path / "ws", timeout=120,
    )  # fmt: skip


def test_an_original_check_the_budget_cannot_hold_exits_2_with_a_figure(tmp_path):
    """A harness whose reference takes longer than the whole budget: the check is cut at the
    budget, and the command exits 2 saying how long it ran and what budget to give, instead of
    running past the budget and blaming the original."""
    import json
    import time

    start = time.monotonic()
    proc = optimize_with_a_slow(tmp_path, "gelu_ref", "x")
    wall = time.monotonic() - start
    assert proc.returncode == 2, (proc.stdout[-1500:], proc.stderr[-1500:])
    error = json.loads(proc.stdout)["error"]["message"]
    assert "checking the original needs more than this 15 s budget" in error, error
    assert "--budget " in error
    assert wall <= 15 * 1.05 + 3, f"{wall:.1f} s on a 15 s budget"


def test_an_original_whose_benchmark_launches_cannot_be_compiled_in_the_budget_exits_2(tmp_path):
    """The benchmark inputs take longer to draw than the budget holds (the dry run that finds
    the original's launches to compile draws them): exit 2 with the figure, not a traceback."""
    import json

    proc = optimize_with_a_slow(tmp_path, "gelu_inputs", "device='cuda'")
    assert proc.returncode == 2, (proc.stdout[-1500:], proc.stderr[-1500:])
    error = json.loads(proc.stdout)["error"]["message"]
    assert "checking the original needs more than this 15 s budget" in error, error
    assert "Traceback" not in proc.stderr, proc.stderr[-1500:]
