"""Does the way the L2 is flushed before each timed run change what a kernel is charged?

Why: Triton's benchmark flush (`clear_cache`: zero-fill a 256 MB buffer) leaves the L2 full of
dirty lines, and the timed kernel then pays for writing them back. A fixed charge like that
weighs on a 30 us kernel and hardly on the 1 GiB copy the ceiling is measured with. Measured
here: each workload under three flushes, CUDA events, median of flushed runs.

  zero   Triton's flush (what `triton.testing.do_bench` and the search measured with)
  read   a read-only pass over the same buffer (`timing.l2_flush`, what the engine now times
         with): evicts everything, leaves clean lines
  none   no flush (inputs that fit may be served from L2)

Usage (GPU): python3 bench/flush_probe.py --out flush.json
"""

import argparse
import json
import statistics
import sys

import torch
import triton

sys.path.insert(0, "bench")
sys.path.insert(0, "examples")
import structure_probe as sp  # noqa: E402

from kernelbrain.engine.worker.timing import l2_flush  # noqa: E402


def flushes():
    cache = triton.runtime.driver.active.get_empty_cache_for_benchmark()
    clear = triton.runtime.driver.active.clear_cache
    return {
        "zero": lambda: clear(cache),
        "read": l2_flush(),  # what the engine's timing runs
        "none": lambda: None,
    }


def time_ms(fn, flush, reps=60):
    fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        flush()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def workloads():
    w = {}
    for mb in (64, 256, 1024):
        src = torch.empty(mb * 2**20, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        w[f"copy {mb} MB"] = (lambda s=src, d=dst: d.copy_(s), 2 * src.numel())
    read = sp.read_sum_launch(2048, 8, 8)
    for mb in (16, 128, 256):
        x = torch.randn(mb * 2**19, dtype=torch.bfloat16, device="cuda")
        w[f"triton read {mb} MB"] = (lambda x=x: read(x), x.numel() * 2)
        if mb == 256:
            w[f"torch.sum {mb} MB"] = (lambda x=x: x.sum(dtype=torch.float32), x.numel() * 2)
    ((xc,),) = sp.col_sum_mod.col_sum_inputs("cuda")[:1]
    cs = sp.col_sum_strip_launch(1024, 32, 256, 8, 3)
    w["col_sum 16384x4096 (strip 1024 of 32x256 w8)"] = (
        lambda: cs(xc),
        xc.numel() * 2 + xc.shape[1] * 4,
    )
    logits, target = sp.ce_mod.cross_entropy_inputs("cuda")[0]
    ce = sp.ce_launch(sp.ce_online_scalar, 4096, 4, 1, "no check")
    ce_chk = sp.ce_launch(sp.ce_online_scalar, 4096, 4, 1, "assert max/min (search best)")
    ce_bytes = logits.numel() * 2 + target.numel() * target.element_size() + logits.shape[0] * 4
    w["cross_entropy 4096x32768 (online 4096 w4, no check)"] = (
        lambda: ce(logits, target),
        ce_bytes,
    )
    w["cross_entropy 4096x32768 (online 4096 w4, assert)"] = (
        lambda: ce_chk(logits, target),
        ce_bytes,
    )
    return w


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    opts = ap.parse_args()
    record = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "rows": [],
    }
    fl = flushes()
    for name, (fn, nbytes) in workloads().items():
        row = {"workload": name, "bytes": nbytes}
        for mode, flush in fl.items():
            ms = time_ms(fn, flush)
            row[mode] = {"us": round(ms * 1e3, 2), "gbps": round(nbytes / ms / 1e6, 1)}
        record["rows"].append(row)
        print(
            f"{name:55s} "
            + "  ".join(f"{m} {row[m]['us']:8.1f} us {row[m]['gbps']:7.0f} GB/s" for m in fl),
            flush=True,
        )
    if opts.out:
        with open(opts.out, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
