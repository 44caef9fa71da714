"""GPU evaluation figures for BENCHMARKS.md: A/A and 10%-slowed verdicts, baselines vs ceilings.

    python bench/gpu_verify.py --out results.json

Runs `verify` of examples/ops/softmax.py against an identical copy and against a copy with
about 10% more memory traffic, and `bench` of every example. Needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelbrain.engine.evaluate.pool import WorkerPool  # noqa: E402
from kernelbrain.engine.evaluate.verify import bench, verify  # noqa: E402
from kernelbrain.engine.task import find_task  # noqa: E402
from tests.gpu.slowdowns import identical_copy, slowed_softmax  # noqa: E402

OPS = ["gelu", "softmax", "rmsnorm", "col_sum", "cross_entropy", "matmul"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument(
        "--skip-bench", action="store_true", help="only the A/A and slowed-copy verdicts"
    )
    args = ap.parse_args()
    out: dict = {}
    with WorkerPool() as pool:
        task = find_task(ROOT / "examples/ops/softmax.py", "softmax_kernel")
        source = Path(task.file).read_text()
        for name, cand in (
            ("identical", identical_copy(source)),
            ("slowed_10pct", slowed_softmax(source)),
        ):
            t = time.time()
            r = verify(pool, task, cand, "cuda:0")
            out[f"verify_{name}"] = msgspec.to_builtins(r.timing) if r.timing else r.message
            if r.timing:
                print(
                    f"{name}: verdict={r.timing.verdict} geomean={r.timing.speedup:.4f} ({time.time() - t:.0f}s)"
                )
                for c in r.timing.cases:
                    print(
                        f"   {c.label}: {c.baseline_ms:.4f} vs {c.candidate_ms:.4f} ms speedup {c.speedup:.4f} "
                        f"[{c.ci_low:.4f}, {c.ci_high:.4f}] p={c.p_value:.2g} noise={c.noise_floor:.4f} "
                        f"{c.verdict} reps={c.reps} graph={c.cuda_graph}"
                    )
            else:
                print(name, "FAILED", r.message)
        for op in [] if args.skip_bench else OPS:
            result = bench(
                pool, find_task(ROOT / f"examples/ops/{op}.py", f"{op}_kernel"), "cuda:0"
            )
            out[f"bench_{op}"] = msgspec.to_builtins(result)
            for c in result.cases:
                frac = f"{c.fraction_of_ceiling:.1%}" if c.fraction_of_ceiling is not None else "-"
                rate = f"{c.tflops:.0f} TFLOP/s" if c.tflops else f"{c.gbps:.0f} GB/s"
                print(
                    f"bench {op:14s} {c.label:40s} {c.median_ms:9.4f} ms {rate:>14s} {frac:>7s} of {c.bound} ceiling"
                )
            if result.ceilings:
                print("ceilings:", msgspec.to_builtins(result.ceilings))
    args.out.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
