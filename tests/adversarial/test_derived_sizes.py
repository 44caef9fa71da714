"""The shape sweep skips a size it made up when the task's reference refuses it (RoPE's `cos`
is tied to half the head size, which the sweep cannot see), and only then: a candidate that
drops its mask still fails on the sizes the reference takes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ..test_evaluate_cli import cli

SUITE = Path(__file__).parents[2] / "bench" / "suite"
CONFIG = """[[tasks]]
file = "rope.py"
kernel = "rope_kernel"
entry = "rope"
reference = "rope_ref"
inputs = "rope_inputs"
small_inputs = "rope_small_inputs"
"""
MASK = "mask = offs < head_dim // 2"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    shutil.copy(SUITE / "rope.py", tmp_path / "rope.py")
    (tmp_path / "kernelbrain.toml").write_text(CONFIG)
    return tmp_path


def verify(ws: Path, candidate: Path) -> dict:
    proc = cli("verify", "rope.py::rope_kernel", "--candidate", str(candidate), "--device", "cpu",
               "--json", cwd=ws)  # fmt: skip
    return json.loads(proc.stdout)


@pytest.mark.slow
def test_sizes_the_reference_refuses_are_skipped_and_a_dropped_mask_still_fails(ws):
    original = verify(ws, ws / "rope.py")
    assert original["accepted"] is True, original  # the sweep's odd head sizes: refused, skipped
    source = (ws / "rope.py").read_text()
    assert MASK in source
    unmasked = ws / "rope_unmasked.py"
    unmasked.write_text(source.replace(MASK, "mask = offs < HALF"))
    verdict = verify(ws, unmasked)
    assert verdict["accepted"] is False, verdict
    assert verdict["stage"] in ("smoke", "sweep"), verdict
