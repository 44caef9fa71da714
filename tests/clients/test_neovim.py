"""A second real LSP client: headless Neovim attached to `kernelbrain serve`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import EXAMPLES

LUA = Path(__file__).with_name("nvim_client.lua")
NVIM = shutil.which("nvim")
# The README test command installs Neovim and sets this, so CI can never silently skip.
REQUIRED = os.environ.get("KERNELBRAIN_REQUIRE_CLIENTS") == "1"


@pytest.mark.skipif(
    NVIM is None and not REQUIRED, reason="nvim is not installed (scripts/test.sh installs it)"
)
def test_neovim_receives_diagnostics_and_code_lenses(tmp_path):
    assert NVIM is not None, "nvim is required (KERNELBRAIN_REQUIRE_CLIENTS=1) but not installed"
    workspace = tmp_path / "ws"
    shutil.copytree(EXAMPLES, workspace)
    target = workspace / "ops" / "cross_entropy.py"
    out = tmp_path / "nvim-result.json"
    env = dict(
        os.environ,
        KB_FILE=str(target),
        KB_OUT=str(out),
        KB_ROOT=str(workspace),
        KB_CMD=json.dumps([sys.executable, "-m", "kernelbrain.server"]),
        HOME=str(tmp_path),  # no user config, shada or swap files leak in
    )
    proc = subprocess.run(
        [NVIM, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", f"luafile {LUA}"],
        env=env,
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert out.exists(), (
        f"nvim wrote no result (rc={proc.returncode}): {proc.stdout}\n{proc.stderr}"
    )
    result = json.loads(out.read_text())
    assert result["errors"] == []
    assert result["got_diagnostics"] is True
    codes = sorted(d["code"] for d in result["diagnostics"])
    assert codes == ["KB101", "KB104", "KB108", "KB108"]
    assert all(d["source"] == "kernelbrain" for d in result["diagnostics"])
    lines = target.read_text().splitlines()
    (lens,) = result["lenses"]
    assert lens["title"] == "⚡ Optimize kernel" and lens["command"] == "kernelbrain.optimize"
    assert lines[lens["line"]].startswith("def cross_entropy_kernel(")
