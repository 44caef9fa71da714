"""One optimize service behind both front ends: the CLI's `optimize` and the editor's search
jobs (what the engine agent runs for the language server) give the same verified variants for
the same kernel, seed and candidate cap."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kernelbrain.engine.agent.jobs import JobManager
from kernelbrain.engine.api.request import OptimizeRequest

from .conftest import EXAMPLES

CAP = 5


def copy(tmp: Path) -> Path:
    shutil.copytree(
        EXAMPLES, tmp / "ws", ignore=shutil.ignore_patterns(".kernelbrain", "__pycache__")
    )
    return tmp / "ws"


@pytest.mark.slow
def test_the_cli_and_an_editor_job_find_the_same_verified_variants(tmp_path):
    cli_ws, editor_ws = copy(tmp_path / "cli"), copy(tmp_path / "editor")
    # The editor's job and the CLI run side by side (a fixed candidate cap, no time limit that
    # binds): the same seed finds the same variants, whatever the other does to the machine.
    done = threading.Event()
    finished = []
    jobs = JobManager(
        lambda info, event: None, lambda info, result: (finished.append((info, result)), done.set())
    )
    jobs.start(
        OptimizeRequest(
            file=str(editor_ws / "ops" / "gelu.py"),
            kernel="gelu_kernel",
            budget_s=600,
            max_candidates=CAP,
            device="cpu",
            seed=3,
        )
    )
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
            "10m",
            "--max-candidates",
            str(CAP),
            "--seed",
            "3",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=cli_ws,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    cli = json.loads(proc.stdout)
    assert done.wait(900)
    info, editor = finished[0]
    assert info.state == "finished" and editor is not None, info.error
    assert cli["variants"], cli["candidates"]  # something to compare
    assert sorted(v["id"] for v in cli["variants"]) == sorted(v.id for v in editor.variants)
    assert cli["best"] == editor.best
    assert cli["candidates"]["per_stage"] == editor.candidates.per_stage
