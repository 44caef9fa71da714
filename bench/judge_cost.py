"""What judging costs: candidates fully judged per minute (all five harness stages, and on a GPU
the timing too), and on a GPU the speedup an honest faster variant is measured at.

Runs `verify` on the honest variants of the adversarial suite with whatever `kernelbrain` this
Python imports, so the same script measures an older tree too:

    python bench/judge_cost.py --run after --out /tmp/after.json [--device cuda:0]
    pip install -e OLDER_TREE && python bench/judge_cost.py --run before --out ...

The first verify (worker start-up, imports, the device's ceilings) is left out; each candidate
is judged `--repeats` times. On a GPU the bundled softmax is also verified against a copy of
itself slowed by about 10% (`tests/gpu/slowdowns.py`), `--repeats` times: the speedups the
timing measures for that honest faster variant. The record has the fields
`bench/render_benchmarks.py` reads.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests/: candidate texts only

from kernelbrain.engine.evaluate.pool import WorkerPool  # noqa: E402
from kernelbrain.engine.evaluate.verify import verify  # noqa: E402
from kernelbrain.engine.task import find_task  # noqa: E402
from tests.adversarial.attacks import BASE, HONEST, SOURCE  # noqa: E402
from tests.gpu.slowdowns import EXAMPLES, slowed_softmax  # noqa: E402


def honest_speedups(pool: WorkerPool, device: str, repeats: int) -> list[float]:
    """The measured speedup of the bundled softmax over its slowed copy, `repeats` times."""
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "examples"
        shutil.copytree(
            EXAMPLES, workspace, ignore=shutil.ignore_patterns(".kernelbrain", "__pycache__")
        )
        path = workspace / "ops" / "softmax.py"
        fast = path.read_text()
        path.write_text(slowed_softmax(fast))
        task = find_task(path, "softmax_kernel")
        out = []
        for i in range(repeats):
            report = verify(pool, task, fast + f"\n# repeat {i}\n", device)
            if not report.accepted or report.timing is None:
                raise SystemExit(f"the honest faster variant was refused: {report.message}")
            out.append(report.timing.speedup)
        return out


class Phases:
    """Where a verify's seconds go, as the engine sees them: the time from one progress message
    of the workers to the next, named by the earlier one (`load`, each harness stage, `timing`),
    the time before the first under `before load` (the gate, the original's timeout check); the
    mean over the candidates, so two trees' records show which part of judging grew."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self.count = 0
        self._last: tuple[float, str] = (0.0, "")

    def start(self) -> None:
        self._last = (time.perf_counter(), "before load")

    def saw(self, progress) -> None:
        now, name = time.perf_counter(), getattr(progress, "stage", "?")
        if name != self._last[1]:
            self._add(now)
            self._last = (now, name)

    def _add(self, now: float) -> None:
        started, name = self._last
        self.totals[name] = self.totals.get(name, 0.0) + now - started

    def end(self, stages=()) -> None:
        """The verify is over; `stages`: its harness stages, whose seconds in Triton's JIT (new
        specialisations compiled for the cases' sizes) add up under `jit` (on a GPU)."""
        self._add(time.perf_counter())
        self.count += 1
        jit = sum(getattr(s, "jit_seconds", 0.0) for s in stages)
        self.totals["jit (within the stages)"] = (
            self.totals.get("jit (within the stages)", 0.0) + jit
        )

    def means(self) -> dict[str, float]:
        return {k: round(v / max(self.count, 1), 3) for k, v in self.totals.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True, help="a label for this tree, e.g. before / after")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--tree", default=None, help="what the tree is, for the table")
    args = ap.parse_args()
    import torch
    import triton

    import kernelbrain.engine as engine

    gpu = args.device.startswith("cuda")
    task = find_task(BASE, "softmax_kernel")
    seconds, accepted, phases = [], 0, Phases()
    with WorkerPool() as pool:
        verify(pool, task, SOURCE + "\n# warm-up\n", args.device)
        for _ in range(args.repeats):
            for source in HONEST.values():
                phases.start()
                t0 = time.perf_counter()
                report = verify(pool, task, source, args.device, on_progress=phases.saw)
                seconds.append(time.perf_counter() - t0)
                phases.end(report.stages)
                accepted += report.accepted
        speedups = honest_speedups(pool, args.device, args.repeats) if gpu else []
    if gpu:
        name = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        op = "softmax (adversarial fixture), harness + timing on the GPU"
    else:
        name = f"none: {platform.machine()} CPU, {os.cpu_count()} cores"
        op = "softmax (adversarial fixture), CPU interpreter"
    command = f"python bench/judge_cost.py --run {args.run} --repeats {args.repeats}"
    record = {
        "kind": "judge-cost",
        "run": args.run,
        "date": dt.date.today().isoformat(),
        "op": op,
        "device": args.device,
        "gpu": name,
        "versions": f"python {platform.python_version()} torch {torch.__version__} "
        f"triton {triton.__version__}",
        "command": command + (f" --device {args.device}" if gpu else ""),
        "tree": args.tree or str(Path(engine.__file__).resolve().parents[1].name),
        "candidates": len(seconds),
        "accepted": accepted,
        "seconds_per_candidate": sum(seconds) / len(seconds),
        "candidates_per_minute": 60 * len(seconds) / sum(seconds),
    }
    record["phase_seconds"] = phases.means()
    if speedups:
        record["honest_speedups"] = speedups
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
