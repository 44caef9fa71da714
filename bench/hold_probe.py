"""Does a spin in front of an eagerly timed run keep a launcher's host time out of the timing?

Two launchers of the same 256 MB copy, one of which busy-waits 0.4 ms on the host first; both
timed by `timing.measure`-style loops with a fixed spin length in front of the flush. Prints the
spin calibration and the busy/plain ratio per spin length. Usage: python bench/hold_probe.py
"""

from __future__ import annotations

import json
import sys
import time

import torch

from kernelbrain.engine.api import stats
from kernelbrain.engine.worker import timing


def main() -> int:
    x = torch.randn(1 << 27, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    flush = timing.l2_flush()

    def launch():
        y.copy_(x)

    def busy():
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 4e-4:
            pass
        y.copy_(x)

    rate = timing._spin_cycles_per_ms()
    out = {
        "cycles_per_ms (max SM clock)": rate,
        "host_ms": [timing._host_ms(launch), timing._host_ms(busy)],
        "flush_ms": timing._flush_ms(flush),
        "rows": [],
    }
    for spin_ms in (0.0, 0.25, 0.5, 1.0, 2.0):
        cycles = int(spin_ms * rate)
        times = {0: [], 1: []}
        for r in range(40):
            for g, fn in ((0, launch), (1, busy)) if r % 2 else ((1, busy), (0, launch)):
                a = torch.cuda.Event(enable_timing=True)
                s = torch.cuda.Event(enable_timing=True)
                e = torch.cuda.Event(enable_timing=True)
                a.record()
                if cycles:
                    torch.cuda._sleep(cycles)
                flush()
                s.record()
                fn()
                e.record()
                times[g].append((a, s, e))
        torch.cuda.synchronize()
        med = {g: stats.median([s.elapsed_time(e) for _, s, e in v]) for g, v in times.items()}
        held = stats.median([a.elapsed_time(s) for a, s, _ in times[0]])  # spin + flush, as run
        out["rows"].append(
            {
                "spin_ms": spin_ms,
                "plain_ms": med[0],
                "busy_ms": med[1],
                "ratio": med[1] / med[0],
                "spin_plus_flush_ms": held,
            }
        )
        print(out["rows"][-1], flush=True)
    (plain, busyt), graphed = timing.measure([launch, busy], 100.0)
    out["measure_ratio"] = stats.median(busyt[0]) / stats.median(plain[0])
    print(json.dumps({k: v for k, v in out.items() if k != "rows"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
