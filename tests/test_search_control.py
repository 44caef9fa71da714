"""A search under the user's control from the terminal: Ctrl-C stops it within 3 s, prints what
it verified and stores it as cancelled; a second search of the same kernel says the first is
running (exit 3), or waits for it with --wait."""

from __future__ import annotations

import json
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kernelbrain.engine.store import Store

from .conftest import EXAMPLES

TARGET = "ops/softmax.py::softmax_kernel"


def _optimize(ws: Path, *extra: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "kernelbrain.engine.cli.main", "optimize", TARGET, "--device", "cpu"]
        + list(extra),
        cwd=ws,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C reaches it as a user's would: a child inherits an ignored SIGINT (an earlier
        # test in this process may leave it ignored), and Python then keeps ignoring it
        preexec_fn=_default_sigint,
        **kw,
    )


def _default_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _lines(stream) -> queue.Queue:
    q: queue.Queue = queue.Queue()

    def pump():
        for line in stream:
            q.put(line)
        q.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return q


def _wait_for(q: queue.Queue, text: str, timeout_s: float) -> list[str]:
    seen, deadline = [], time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            line = q.get(timeout=1)
        except queue.Empty:
            continue
        if line is None:
            break
        seen.append(line)
        if text in line:
            return seen
    raise AssertionError(f"no {text!r} within {timeout_s} s; stderr so far:\n{''.join(seen)}")


@pytest.mark.slow
def test_ctrl_c_busy_and_wait(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLES, ws, ignore=shutil.ignore_patterns(".kernelbrain", "__pycache__"))
    first = _optimize(ws, "--budget", "300s")
    progress = _lines(first.stderr)
    try:
        # Progress on a pipe is plain lines, one a step; the search verifies something first.
        seen = _wait_for(progress, "best so far", 200)
        assert all("\r" not in line and "\x1b" not in line for line in seen), seen

        busy = subprocess.run(
            [sys.executable, "-m", "kernelbrain.engine.cli.main", "optimize", TARGET]
            + ["--device", "cpu", "--budget", "20s", "--json"],
            cwd=ws,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert busy.returncode == 3, busy.stderr
        error = json.loads(busy.stdout)["error"]
        assert error["kind"] == "busy" and f"process {first.pid}" in error["message"]

        waiting = _optimize(ws, "--budget", "15s", "--max-candidates", "3", "--json", "--wait")
        time.sleep(3)
        assert waiting.poll() is None  # it waits for the first, not refused

        start = time.monotonic()
        first.send_signal(signal.SIGINT)
        out, _ = first.communicate(timeout=30)
        stopped_after = time.monotonic() - start
        assert first.returncode == 130
        assert stopped_after < 3.0, f"Ctrl-C took {stopped_after:.1f} s"
        assert "stopped: cancelled" in out and "best" in out, out[-2000:]

        after, err = waiting.communicate(timeout=120)
        assert waiting.returncode == 0, err[-2000:]
        assert "already running" in err and "waiting" in err
        assert json.loads(after)["kernel"] == "softmax_kernel"
    finally:
        for p in (first,):
            if p.poll() is None:
                p.kill()
    store = Store(ws)
    statuses = [s["status"] for s in store.searches()]
    assert statuses == ["cancelled", "finished"], statuses
    assert store.running_search(str(ws / "ops/softmax.py"), "softmax_kernel") is None
