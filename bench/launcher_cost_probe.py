"""Where a launcher that compiles ahead of time on every call spends its host time (GPU).

    python bench/launcher_cost_probe.py [--out FILE.json]

The corpus's `softmax_warmup.py` launcher calls `kernel.warmup(...)`, `_init_handles()` and
`torch.cuda.get_device_properties(...)` on every call, then launches the compiled kernel. This
times, on the host (perf_counter around N calls, the GPU drained before and after), each piece
alone and the launcher whole, against the same kernel launched through the JIT: what a rewrite
that hoists or caches the per-call work can save, piece by piece.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"
sys.path.insert(0, str(CORPUS))


def host_us(fn, n: int = 200) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / n * 1e6


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    import torch
    import triton
    from softmax_warmup import softmax, softmax_kernel

    rows = {}
    for n_rows, n_cols in ((8192, 4096), (32768, 1000), (64, 512)):
        x = torch.randn(n_rows, n_cols, device="cuda")
        y = torch.empty_like(x)
        block = triton.next_power_of_2(n_cols)
        stages = 4 if block <= 4096 else 2
        params = (y, x, x.stride(0), y.stride(0), n_rows, n_cols)
        kw = dict(BLOCK_SIZE=block, num_stages=stages, num_warps=8)
        compiled = softmax_kernel.warmup(*params, **kw, grid=(1,))
        compiled._init_handles()
        programs = min(132 * 4, n_rows)
        rows[f"{n_rows}x{n_cols}"] = {
            "launcher_us": host_us(lambda: softmax(x)),
            "warmup_us": host_us(lambda: softmax_kernel.warmup(*params, **kw, grid=(1,))),
            "init_handles_us": host_us(compiled._init_handles),
            "device_properties_us": host_us(lambda: torch.cuda.get_device_properties(x.device)),
            "compiled_launch_us": host_us(
                lambda: compiled[(programs, 1, 1)](*params, block, stages)
            ),
            "jit_launch_us": host_us(lambda: softmax_kernel[(programs,)](*params, **kw)),
            "gpu_us": triton.testing.do_bench(lambda: softmax(x), return_mode="median") * 1e3,
        }
        print(n_rows, n_cols, {k: round(v, 1) for k, v in rows[f"{n_rows}x{n_cols}"].items()})
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
