"""`kernelbrain check`: ruff-style output, JSON, exit codes, recursion, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .conftest import EXAMPLES

# The true findings of each first-draft example, and nothing else (a wrong finding fails too).
EXPECTED = {
    "gelu.py": {"KB102", "KB106"},
    "softmax.py": {"KB101", "KB104"},
    "rmsnorm.py": {"KB101", "KB104"},
    "col_sum.py": {"KB104", "KB110"},
    "cross_entropy.py": {"KB101", "KB104", "KB108"},
    "matmul.py": {"KB104", "KB106", "KB112"},
}


def run_check(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernelbrain.engine.cli.main", "check", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )


def test_examples_get_exactly_their_true_findings():
    proc = run_check(str(EXAMPLES), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    records = json.loads(proc.stdout)
    by_file: dict[str, set[str]] = {}
    for r in records:
        by_file.setdefault(Path(r["path"]).name, set()).add(r["code"])
        assert r["line"] >= 1 and r["column"] >= 1
        assert r["severity"] in ("error", "warning", "information", "hint")
        assert r["kernel"] == Path(r["path"]).stem + "_kernel"
    assert by_file == EXPECTED


def test_text_output_is_ruff_style(tmp_path):
    proc = run_check("ops/gelu.py", cwd=EXAMPLES)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("ops/gelu.py:25:11: KB106 `out` is zero-filled")
    assert any(l.startswith("ops/gelu.py:27:5: KB102 BLOCK=64") for l in lines)
    assert lines[-1] == "Found 2 findings in 1 file checked."


def test_clean_file_exits_zero_and_exit_zero_flag(tmp_path):
    clean = tmp_path / "clean.py"
    clean.write_text("import torch\n\ndef f(x):\n    return x\n")
    proc = run_check(str(clean))
    assert proc.returncode == 0 and "Found 0 findings" in proc.stdout
    assert run_check(str(EXAMPLES), "--exit-zero").returncode == 0


def test_syntax_error_is_a_finding_not_a_traceback(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import triton\n\n@triton.jit\ndef k(x_ptr:\n    pass\n")
    proc = run_check(str(bad), "--format", "json")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    (rec,) = json.loads(proc.stdout)
    assert rec["code"] == "KB001" and rec["line"] == 4 and "syntax error" in rec["message"]


def test_directories_recurse_and_skip_non_python_and_venvs(tmp_path):
    (tmp_path / "pkg" / "deep").mkdir(parents=True)
    (tmp_path / "pkg" / "deep" / "k.py").write_text((EXAMPLES / "ops" / "gelu.py").read_text())
    (tmp_path / "notes.txt").write_text("@triton.jit is not python here")
    (tmp_path / "binary.py").write_bytes(b"\xff\xfe\x00garbage")
    venv = tmp_path / "env"
    (venv / "lib").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr\n")
    (venv / "lib" / "k.py").write_text((EXAMPLES / "ops" / "gelu.py").read_text())
    proc = run_check(str(tmp_path), "--format", "json")
    records = json.loads(proc.stdout)
    paths = {Path(r["path"]).relative_to(tmp_path).as_posix() for r in records}
    assert paths == {"pkg/deep/k.py", "binary.py"}
    assert [r["code"] for r in records if r["path"].endswith("binary.py")] == ["KB001"]


def test_explicit_non_python_file_is_skipped_with_a_note(tmp_path):
    txt = tmp_path / "notes.md"
    txt.write_text("# notes\n")
    proc = run_check(str(txt))
    assert proc.returncode == 0
    assert "not a Python file" in proc.stderr


def test_usage_errors_exit_two(tmp_path):
    assert run_check(str(tmp_path / "missing.py")).returncode == 2
    proc = subprocess.run(
        [sys.executable, "-m", "kernelbrain.engine.cli.main", "check"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    proc = subprocess.run(
        [sys.executable, "-m", "kernelbrain.engine.cli.main", "frobnicate"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2


def test_select_and_ignore():
    proc = run_check(str(EXAMPLES), "--format", "json", "--select", "KB10", "--ignore", "KB104")
    found = {r["code"] for r in json.loads(proc.stdout)}
    assert found == {"KB101", "KB102", "KB106", "KB108"}


def test_an_unknown_code_is_a_usage_error_and_codes_are_any_case():
    """A typo in `--select` would select nothing and report a clean file: it says so instead."""
    proc = run_check(str(EXAMPLES), "--select", "KB9")
    assert proc.returncode == 2 and not proc.stdout
    assert "--select KB9: no diagnostic code starts with it" in proc.stderr
    assert "KB101" in proc.stderr  # what there is to choose from
    proc = run_check(str(EXAMPLES), "--ignore", "XYZ")
    assert proc.returncode == 2 and "--ignore XYZ" in proc.stderr
    proc = run_check(str(EXAMPLES), "--format", "json", "--select", "kb101")
    assert proc.returncode == 1 and {r["code"] for r in json.loads(proc.stdout)} == {"KB101"}
