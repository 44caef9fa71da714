"""`AutotuneChoice` in a real Triton interpreter process: the harness's choice of configuration
replaces the tuner's timing while it is entered, and the tuner is as it was afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCRIPT = r"""
import json
import torch
import triton
import triton.language as tl
from kernelbrain.engine.worker.autotune_choice import AutotuneChoice

@triton.autotune(configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})],
                 key=["n"])
@triton.jit
def add_one(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + BLOCK, mask=offs < n)

def run(n=40):
    x = torch.zeros(n)
    out = torch.empty(n)
    add_one[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n)
    return out[0].item()  # each configuration adds its own BLOCK

sentinel = add_one.configs[0]
add_one.cache[("earlier-key",)] = sentinel  # what an earlier timing tuned
own_bench = "do_bench" in add_one.__dict__
add_one.cache_results = True  # as with TRITON_CACHE_AUTOTUNING: switched off inside, back after
seen = []
with AutotuneChoice() as choice:
    for want in range(4):
        choice.select(want)
        seen.append([run(), choice.widest, choice.describe()])
print(json.dumps({"seen": seen, "cache": [list(k) for k in add_one.cache],
                  "picks_kept": add_one.cache.get(("earlier-key",)) is sentinel,
                  "do_bench_back": ("do_bench" in add_one.__dict__) == own_bench,
                  "cache_results": add_one.cache_results}))
"""


def test_choice_runs_the_asked_configuration_and_restores_the_tuner():
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    # configuration `want` ran (its BLOCK is added), cycling past the last; three were kept. Nothing
    # was timed: this process has no GPU for Triton's benchmarker, which would have raised.
    assert [s[0] for s in out["seen"]] == [16.0, 32.0, 64.0, 16.0]
    assert all(s[1] == 3 for s in out["seen"])
    assert out["seen"][1][2] == "BLOCK=32, num_warps=4, num_stages=3"
    # afterwards: the tuner's own picks are back, the harness's are gone, nothing else changed
    assert out["cache"] == [["earlier-key"]] and out["picks_kept"]
    assert out["do_bench_back"] and out["cache_results"] is True
