"""What the experience memory saves: a second search of a similar kernel, with and without it.

    python bench/memory_effect.py [--budget 90] [--run M2] [--out FILE.json]

On the CPU (cost-model estimates, the interpreter's harness), seed 0: search the bundled softmax
draft with an empty memory (it learns); then search a similar kernel (the same draft, other
shapes) once with that memory and once without. For each second search: when its best first
reached the first search's best estimate (or, if the two differ, the lower of that and the
memory-less search's final best), with how many candidates it had compiled by then (its work,
whatever the machine's load), and its time to best. The record is a small JSON for
bench/results (BENCHMARKS.md's memory table).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelbrain.engine.api.request import OptimizeRequest  # noqa: E402
from kernelbrain.engine.service import optimize  # noqa: E402
from kernelbrain.engine.store.memory import Memory  # noqa: E402

SIMILAR_SHAPES = "[(8192, 2048), (2048, 8192), (512, 16384)]"
SIMILAR_SMALL = "[(7, 65), (4, 2000)]"


def workspace(similar: bool) -> Path:
    ws = Path(tempfile.mkdtemp(prefix="kb-mem-")) / "ws"
    shutil.copytree(
        ROOT / "examples", ws, ignore=shutil.ignore_patterns(".kernelbrain", "__pycache__")
    )
    if similar:
        path = ws / "ops" / "softmax.py"
        text = path.read_text()
        text = text.replace(
            "shapes = [(16384, 4096), (4096, 1024), (1024, 32768)]", f"shapes = {SIMILAR_SHAPES}"
        )
        text = text.replace("shapes = [(5, 33), (3, 1500)]", f"shapes = {SIMILAR_SMALL}")
        assert SIMILAR_SHAPES in text and SIMILAR_SMALL in text
        path.write_text(text)
    return ws


def search(ws: Path, budget: float, memory_dir: Path | None):
    import os

    if memory_dir is not None:
        os.environ["KERNELBRAIN_MEMORY_DIR"] = str(memory_dir)
    return optimize(
        OptimizeRequest(
            str(ws / "ops" / "softmax.py"),
            "softmax_kernel",
            budget_s=budget,
            device="cpu",
            seed=0,
            memory=memory_dir is not None,
        )
    )


def reached(result, threshold: float):
    """The trajectory point where the search's best first reached `threshold` (None: never)."""
    for p in result.trajectory:
        if p.outcome == "verified" and p.speedup is not None and p.speedup >= threshold:
            return p
    return None


def second(result, threshold: float) -> dict:
    point = reached(result, threshold)
    return {
        "reached_s": point.t if point else None,
        "compiled_by_then": point.compiled if point else None,
        "best": best(result),
        "time_to_best_s": result.time_to_best_s,
        "best_origin": next((v.origin for v in result.variants if v.id == result.best), None),
    }


def best(result) -> float:
    return next((v.speedup for v in result.variants if v.id == result.best), 1.0)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=float, default=90.0)
    ap.add_argument("--run", default="M2")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    memory_dir = Path(tempfile.mkdtemp(prefix="kb-memory-"))
    t0 = time.time()
    first = search(workspace(False), args.budget, memory_dir)
    remembered = Memory(memory_dir).summary()
    with_memory = search(workspace(True), args.budget, memory_dir)
    without = search(workspace(True), args.budget, None)
    threshold = min(best(first), best(without)) * 0.99
    row = {
        "kind": "memory",
        "run": args.run,
        "date": time.strftime("%Y-%m-%d"),
        "op": "softmax (other shapes)",
        "gpu": "none (CPU interpreter, cost-model estimates)",
        "versions": f"python {platform.python_version()}",
        "command": f"python bench/memory_effect.py --budget {args.budget:g} --run {args.run}",
        "budget_s": args.budget,
        "first_best": best(first),
        "first_best_origin": next((v.origin for v in first.variants if v.id == first.best), None),
        "threshold": threshold,
        "remembered_mutators": len(remembered),
        "with_memory": second(with_memory, threshold),
        "without_memory": second(without, threshold),
        "wall_s": round(time.time() - t0, 1),
    }
    on, off = row["with_memory"]["reached_s"], row["without_memory"]["reached_s"]
    row["saved"] = (1 - on / off) if on is not None and off else None
    print(json.dumps(row, indent=1))
    if args.out:
        args.out.write_text(json.dumps(row, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
