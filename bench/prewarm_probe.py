"""Where a GPU search's first seconds go before its baseline: the ahead-of-time compiles of the
original's harness specialisations (`search/prewarm.py`), timed call by call.

Why: on the H200, suite searches at 120 s waited 22-54 s in `prewarm-wait` before the baseline,
while the same prewarm on the 2-core development machine takes about a second (10 keys for the
bf16 matmul). This times, on the machine it runs on, the compile workers' start, the dry run of
every stage's inputs and each compile, for each kernel given, with the search's worker count.

Usage: python3 bench/prewarm_probe.py --out probe.json FILE::KERNEL ...
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from kernelbrain.engine import protocol as m
from kernelbrain.engine.api import facts
from kernelbrain.engine.evaluate.pool import WorkerPool, default_compile_workers
from kernelbrain.engine.search.prewarm import Prewarm
from kernelbrain.engine.task import find_task


def probe(pool: WorkerPool, devices: list[str], target: str) -> dict:
    file, kernel = target.split("::")
    task = find_task(Path(file), kernel)
    source = Path(task.file).read_text()
    calls: list[dict] = []

    def call(device, request, timeout):
        t = time.monotonic()
        answer = pool.call(device, request, timeout)
        calls.append({"what": type(request).__name__, "on": device,
                      "s": round(time.monotonic() - t, 3)})  # fmt: skip
        return answer

    out = {"target": target}
    for label, text in (("first", source), ("second source", source + "\n# again\n")):
        warm = Prewarm(task, 0, devices, call)
        t = time.monotonic()
        keys = warm.start(text, list(facts.STAGES), set()).result(timeout=600)
        out[label] = {"keys": keys, "wall_s": round(time.monotonic() - t, 2)}
        warm.close()
    out["calls"] = calls
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("targets", nargs="+")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--workers", type=int, default=default_compile_workers())
    args = ap.parse_args()
    devices = [f"compile:{i}" for i in range(args.workers)]
    rows = []
    with WorkerPool() as pool:
        t = time.monotonic()
        for d in devices:
            pool.call(d, m.Ping(), 300)
        started = round(time.monotonic() - t, 2)
        print(
            f"{len(devices)} compile workers started one after another in {started} s", flush=True
        )
        for target in args.targets:
            row = probe(pool, devices, target)
            compiles = [c["s"] for c in row["calls"] if c["what"] == "Compile"]
            dry = [c["s"] for c in row["calls"] if c["what"] == "Specialize"]
            print(f"{target}: first {row['first']}, second {row['second source']}; dry runs "
                  f"{dry} s; compiles {len(compiles)}, {sum(compiles):.1f} s in all, longest "
                  f"{max(compiles, default=0):.1f} s", flush=True)  # fmt: skip
            rows.append(row)
    args.out.write_text(json.dumps({"workers": len(devices), "start_s": started, "rows": rows},
                                   indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
