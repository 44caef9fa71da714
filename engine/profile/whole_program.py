"""`kernelbrain profile SCRIPT`: which kernels matter, by share of GPU time (Amdahl).

The script runs under torch.profiler in a sandboxed child process; its GPU kernels are ranked by self
device time, Triton kernels are mapped back to where they are defined in the workspace, and each
gets its Amdahl ceiling: the most the whole program's GPU time could shrink by making that one
kernel infinitely fast, 1 / (1 - share).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import msgspec

from ..api.secrets import worker_environment
from ..evaluate import sandbox
from ..index import build_index
from ..index.files import iter_python_files


class KernelShare(msgspec.Struct):
    rank: int
    name: str
    device_us: float
    calls: int
    share: float
    amdahl: float  # 1 / (1 - share)
    triton: bool
    kernel: str | None = None  # the Triton kernel's name when mapped to the workspace
    file: str | None = None
    line: int | None = None


class ProfileResult(msgspec.Struct):
    script: str
    total_us: float
    kernels: list[KernelShare]


def workspace_kernels(root: Path) -> dict[str, tuple[str, int]]:
    """Triton kernel name -> (file, 1-based line) for every kernel under `root`."""
    out: dict[str, tuple[str, int]] = {}
    for path in iter_python_files(root):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if "triton" not in text:
            continue
        for k in build_index(text, str(path)).kernels:
            out.setdefault(k.name, (os.path.realpath(path), k.name_span.line + 1))
    return out


def run_profile(
    script: Path, args: list[str], root: Path, timeout_s: float = 1800.0
) -> ProfileResult:
    """The script under torch.profiler in the sandbox, as a worker runs: no network, no keys in
    its environment, nothing written outside its scratch folder (its own folder is read-only)
    and Triton's cache; it sees the GPU."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "rows.json"
        unsandboxed = sandbox.notice()
        if unsandboxed:
            sys.stderr.write(f"kernelbrain: {unsandboxed}\n")
        env = worker_environment()
        env["PYTHONUNBUFFERED"] = "1"
        # its own Triton cache, gone with the scratch folder: never the user's, which every
        # Triton process trusts (see `pool.private_triton_cache`)
        cache = os.path.join(d, "triton-cache")
        os.makedirs(cache)
        env["TRITON_CACHE_DIR"] = cache
        argv, env = sandbox.command(
            [
                sys.executable,
                "-m",
                "kernelbrain.engine.profile.torch_profile",
                "--out",
                str(out),
                str(script),
                *args,
            ],
            env,
            d,
            [cache],
            gpu=True,
            workspace_files=[str(script)],
        )
        # The script's own output goes to stderr: stdout belongs to `kernelbrain profile --json`
        # (on an H200 an inherited stdout made that JSON unreadable).
        proc = subprocess.run(
            argv, cwd=script.parent, env=env, timeout=timeout_s, stdout=sys.stderr
        )
        code = sandbox.normalise_returncode(proc.returncode)
        if code != 0 or not out.exists():
            raise RuntimeError(f"the script failed under the profiler (exit status {code})")
        rows = json.loads(out.read_text())
    return rank(str(script), rows, workspace_kernels(root))


def rank(script: str, rows: list[dict], kernels: dict[str, tuple[str, int]]) -> ProfileResult:
    total = sum(r["device_us"] for r in rows) or 1.0
    ordered = sorted(rows, key=lambda r: -r["device_us"])
    out = []
    for i, r in enumerate(ordered, 1):
        share = r["device_us"] / total
        name = r["name"]
        match = kernels.get(name) or kernels.get(name.split("(")[0].strip())
        out.append(
            KernelShare(
                i,
                name,
                r["device_us"],
                r["calls"],
                share,
                1 / (1 - share) if share < 1 else float("inf"),
                match is not None,
                name if match else None,
                match[0] if match else None,
                match[1] if match else None,
            )
        )
    return ProfileResult(script, total, out)
