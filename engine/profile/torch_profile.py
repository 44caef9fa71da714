"""Run a user's script under torch.profiler (a separate process: `python -m ... --out F SCRIPT ARGS`).

Writes every GPU kernel's self device time and call count, as torch.profiler's own table has them.
The script runs as `__main__` with its own arguments, in its own folder.
"""

from __future__ import annotations

import json
import os
import runpy
import sys


def main() -> None:
    out = sys.argv[2]
    script, args = sys.argv[3], sys.argv[4:]
    import torch
    from torch.profiler import ProfilerActivity, profile

    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        runpy.run_path(script, run_name="__main__")
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        us = getattr(e, "self_device_time_total", None)
        if us is None:
            us = getattr(e, "self_cuda_time_total", 0)
        if us and us > 0:
            rows.append({"name": e.key, "device_us": float(us), "calls": int(e.count)})
    with open(out, "w") as f:
        json.dump(rows, f)


if __name__ == "__main__":
    main()
