"""BENCHMARKS.md's tables are what `bench/render_benchmarks.py` makes of bench/results/*.json,
and every result file says where it came from."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_benchmarks_tables_are_generated_from_the_result_files():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "render_benchmarks.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr


def test_every_result_file_is_small_and_says_date_gpu_versions_and_command():
    files = sorted((ROOT / "bench" / "results").glob("*.json"))
    assert files
    for path in files:
        record = json.loads(path.read_text())
        assert path.stat().st_size < 20_000, path
        for key in ("kind", "run", "date", "gpu", "versions", "command", "op"):
            assert record.get(key), (path.name, key)
    assert len((ROOT / "BENCHMARKS.md").read_text().splitlines()) < 400
