"""Nsight Compute (`ncu --clock-control none`) on one benchmark case, where it is installed.

Speed of light (compute and memory throughput as a share of peak), achieved occupancy,
registers, the top warp-stall reasons and local-memory (spill) traffic of each launch of the
kernel. Clocks are left as they are: the device is shared, and the figures should match what the
timings saw.
"""

from __future__ import annotations

import csv
import glob
import io
import os
import shutil
import subprocess
import sys
import tempfile

import msgspec

from ..task.spec import Task

BASE_METRICS = {
    "gpu__time_duration.sum": "duration_ns",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "compute_sol_pct",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory_sol_pct",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "launch__registers_per_thread": "registers",
    "smsp__sass_inst_executed_op_local_ld.sum": "local_loads",
    "smsp__sass_inst_executed_op_local_st.sum": "local_stores",
}
STALLS = [
    "long_scoreboard",
    "short_scoreboard",
    "wait",
    "math_pipe_throttle",
    "mio_throttle",
    "lg_throttle",
    "barrier",
    "not_selected",
    "no_instruction",
    "dispatch_stall",
    "drain",
    "membar",
    "branch_resolving",
    "tex_throttle",
    "imc_miss",
    "selected",
    "sleeping",
]
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"


class NcuKernel(msgspec.Struct):
    name: str
    duration_us: float
    compute_sol_pct: float | None
    memory_sol_pct: float | None
    dram_pct: float | None
    achieved_occupancy_pct: float | None
    registers: int | None
    local_loads: int | None
    local_stores: int | None
    top_stalls: list[tuple[str, float]]  # (reason, warps stalled per issued instruction)


class NcuReport(msgspec.Struct):
    available: bool
    message: str
    kernels: list[NcuKernel] = []


def find_ncu() -> str | None:
    found = shutil.which("ncu")
    if found:
        return found
    candidates = sorted(
        glob.glob("/opt/nvidia/nsight-compute/*/ncu") + glob.glob("/usr/local/cuda*/bin/ncu")
    )
    return candidates[-1] if candidates else None


def _num(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except (ValueError, AttributeError):
        return None


def parse_csv(text: str) -> list[NcuKernel]:
    start = text.find('"ID"')
    if start < 0:
        return []
    rows = list(csv.reader(io.StringIO(text[start:])))
    header, data = rows[0], rows[2:]  # row 1 holds the units
    col = {name: i for i, name in enumerate(header)}
    out = []
    for row in data:
        if len(row) != len(header):
            continue
        vals = {
            key: _num(row[col[metric]]) if metric in col else None
            for metric, key in BASE_METRICS.items()
        }
        stalls = [
            (r, _num(row[col[STALL_METRIC.format(r)]]) or 0.0)
            for r in STALLS
            if STALL_METRIC.format(r) in col
        ]
        stalls = sorted([s for s in stalls if s[0] != "selected"], key=lambda s: -s[1])[:3]
        name = row[col["Kernel Name"]] if "Kernel Name" in col else "?"
        out.append(
            NcuKernel(
                name,
                (vals["duration_ns"] or 0) / 1000,
                vals["compute_sol_pct"],
                vals["memory_sol_pct"],
                vals["dram_pct"],
                vals["achieved_occupancy_pct"],
                int(vals["registers"]) if vals["registers"] is not None else None,
                int(vals["local_loads"]) if vals["local_loads"] is not None else None,
                int(vals["local_stores"]) if vals["local_stores"] is not None else None,
                stalls,
            )
        )
    return out


def ncu_report(
    task: Task, case: int = 0, candidate: str | None = None, timeout_s: float = 300.0
) -> NcuReport:
    ncu = find_ncu()
    if ncu is None:
        return NcuReport(
            False, "Nsight Compute (ncu) is not installed: no speed-of-light or stall data"
        )
    metrics = list(BASE_METRICS) + [STALL_METRIC.format(r) for r in STALLS]
    with tempfile.TemporaryDirectory() as d:
        task_json = os.path.join(d, "task.json")
        with open(task_json, "wb") as f:
            f.write(msgspec.json.encode(task))
        cmd = [
            ncu,
            "--clock-control",
            "none",
            "--target-processes",
            "all",
            "--kernel-name",
            f"regex:^{task.kernel}",
            "--launch-skip",
            "1",
            "--launch-count",
            "1",
            "--csv",
            "--page",
            "raw",
            "--metrics",
            ",".join(metrics),
            sys.executable,
            "-m",
            "kernelbrain.engine.worker.ncu_target",
            task_json,
            str(case),
        ]
        if candidate is not None:
            cand = os.path.join(d, "candidate.py")
            with open(cand, "w") as f:
                f.write(candidate)
            cmd.append(cand)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return NcuReport(True, f"ncu did not finish within {timeout_s:.0f} s")
    kernels = parse_csv(proc.stdout)
    if not kernels:
        tail = (proc.stderr or proc.stdout)[-800:]
        return NcuReport(True, f"ncu reported no kernel (exit {proc.returncode}): {tail}")
    return NcuReport(True, "ok", kernels)
