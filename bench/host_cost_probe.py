"""Where does a GPU worker wait on its own CPU? Two host-side costs inside every harness run and
every timed A/B, each measured the old way and the new way:

  compare    checking one output against the reference: in float64 on the CPU (before) or on
             the output's own device (now), for a 4096x4096 bf16 output (matmul's)
  bootstrap  the 95% interval of a speedup from n paired timings: the pure-Python resampling
             loop (before) or numpy (now), n = 365 (a precise timing) and 1333 (a final A/B)

Usage (GPU machine, package installed): python3 bench/host_cost_probe.py --out probe.json
"""

import argparse
import json
import random
import statistics
import time

import torch

from kernelbrain.engine.api import stats
from kernelbrain.engine.worker.compare import compare


def seconds(fn, reps=3):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def python_bootstrap(a, b, iters=2000, seed=0):
    """The loop `stats.bootstrap_speedup` replaced, kept here to time it."""
    rng = random.Random(seed)
    n = len(a)
    ratios = []
    for _ in range(iters):
        idx = [rng.randrange(n) for _ in range(n)]
        ratios.append(statistics.median(a[i] for i in idx) / statistics.median(b[i] for i in idx))
    ratios.sort()
    return ratios[int(0.025 * iters)], ratios[int(0.975 * iters) - 1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    result = {"torch": torch.__version__, "cpu_threads": torch.get_num_threads()}
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    out = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    ref = out.float()
    result["compare_cpu_s"] = seconds(lambda: compare(out.cpu(), ref.cpu()))
    result[f"compare_{dev}_s"] = seconds(lambda: compare(out, ref))
    rng = random.Random(0)
    for n in (365, 1333):
        a = [rng.gauss(1.0, 0.02) for _ in range(n)]
        b = [rng.gauss(0.98, 0.02) for _ in range(n)]
        result[f"bootstrap_python_{n}_s"] = seconds(lambda: python_bootstrap(a, b), reps=1)
        result[f"bootstrap_numpy_{n}_s"] = seconds(lambda: stats.bootstrap_speedup(a, b))
    print(json.dumps(result, indent=1))
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
