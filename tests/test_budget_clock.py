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
