"""Which devices can evaluate, found without importing torch (the server must stay light)."""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import lru_cache


@lru_cache(maxsize=1)
def gpu_count() -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return 0
    count = 0
    proc_dir = "/proc/driver/nvidia/gpus"
    if os.path.isdir(proc_dir):
        count = len(os.listdir(proc_dir))
    elif shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(
                ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10
            ).stdout
            count = sum(1 for line in out.splitlines() if line.startswith("GPU "))
        except (OSError, subprocess.SubprocessError):
            count = 0
    if visible:
        count = min(count, len([x for x in visible.split(",") if x.strip()]))
    return count


def resolve_device(requested: str | None) -> str:
    """`auto`/None -> the first GPU if there is one, else the CPU interpreter; `cuda` -> `cuda:0`."""
    if requested in (None, "", "auto"):
        return "cuda:0" if gpu_count() else "cpu"
    if requested == "cuda":
        requested = "cuda:0"
    if requested.startswith("cuda"):
        index = int(requested.split(":")[1]) if ":" in requested else 0
        if index >= gpu_count():
            raise ValueError(f"device {requested} requested but {gpu_count()} GPU(s) are visible")
        return requested
    if requested != "cpu":
        raise ValueError(f"unknown device {requested!r}: use auto, cpu, cuda or cuda:N")
    return requested


def is_gpu(device: str) -> bool:
    return device.startswith("cuda")
