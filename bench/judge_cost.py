"""What judging costs: candidates fully judged per minute by the CPU harness (all five stages).

Runs `verify` on the honest variants of the adversarial suite with whatever `kernelbrain` this
Python imports, so the same script measures an older tree too:

    python bench/judge_cost.py --run after --out /tmp/after.json
    PYTHONPATH=DIR_WITH_AN_OLDER_kernelbrain python bench/judge_cost.py --run before --out ...

The first verify (worker start-up, imports) is left out; each candidate is judged `--repeats`
times. The record has the fields `bench/render_benchmarks.py` reads.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests/adversarial/attacks.py: candidate texts only

from kernelbrain.engine.evaluate.pool import WorkerPool  # noqa: E402
from kernelbrain.engine.evaluate.verify import verify  # noqa: E402
from kernelbrain.engine.task import find_task  # noqa: E402
from tests.adversarial.attacks import BASE, HONEST, SOURCE  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True, help="a label for this tree, e.g. before / after")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    import torch
    import triton

    import kernelbrain.engine as engine

    task = find_task(BASE, "softmax_kernel")
    seconds, accepted = [], 0
    with WorkerPool() as pool:
        verify(pool, task, SOURCE + "\n# warm-up\n", "cpu")
        for _ in range(args.repeats):
            for source in HONEST.values():
                t0 = time.perf_counter()
                report = verify(pool, task, source, "cpu")
                seconds.append(time.perf_counter() - t0)
                accepted += report.accepted
    record = {
        "kind": "judge-cost",
        "run": args.run,
        "date": dt.date.today().isoformat(),
        "op": "softmax (adversarial fixture), CPU interpreter",
        "gpu": f"none: {platform.machine()} CPU, {__import__('os').cpu_count()} cores",
        "versions": f"python {platform.python_version()} torch {torch.__version__} "
        f"triton {triton.__version__}",
        "command": f"python bench/judge_cost.py --run {args.run} --repeats {args.repeats}",
        "tree": str(Path(engine.__file__).resolve().parents[1].name),
        "candidates": len(seconds),
        "accepted": accepted,
        "seconds_per_candidate": sum(seconds) / len(seconds),
        "candidates_per_minute": 60 * len(seconds) / sum(seconds),
    }
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
