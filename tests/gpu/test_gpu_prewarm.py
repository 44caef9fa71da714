"""On the GPU: the harness's JIT finds the specialisations the compile workers built ahead of it
(engine/search/prewarm.py), so the GPU worker compiles no kernel itself (only the C launcher
per signature and the driver helpers, which no AOT compile builds and every candidate shares)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelbrain.engine import protocol as m
from kernelbrain.engine.api import facts
from kernelbrain.engine.evaluate.pool import WorkerPool
from kernelbrain.engine.evaluate.verify import run_harness
from kernelbrain.engine.search.prewarm import Prewarm
from kernelbrain.engine.task import find_task

from ..conftest import cache_entries
from .slowdowns import EXAMPLES

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("op", ["matmul", "softmax"])
def test_gpu_harness_jit_loads_what_was_compiled_ahead(op):
    task = find_task(EXAMPLES / "ops" / f"{op}.py", f"{op}_kernel")
    source = Path(task.file).read_text(encoding="utf-8")
    with WorkerPool() as pool:
        bench = pool.call("compile:0", m.Specialize(task, source, seed=0), 300.0)
        records = {facts.compile_key(r): r for c in bench.cases for r in c.launches}
        pool.call(
            "compile:0", m.Compile(source, task.file, list(records.values()), sass=False), 600.0
        )
        known = set(records)
        prewarm = Prewarm(task, 0, ["compile:0", "compile:1"], pool.call)
        try:
            ahead = prewarm.start(source, list(facts.STAGES), known).result(timeout=600)
        finally:
            prewarm.close()
        before = cache_entries(Path(pool.triton_cache))
        smoke = run_harness(pool, task, source, "cuda:0", 0, stages=["smoke"])
        after_smoke = cache_entries(Path(pool.triton_cache))
        full = run_harness(pool, task, source, "cuda:0", 0)
        after_full = cache_entries(Path(pool.triton_cache))
    print(
        f"{op}: {len(known)} benchmark + {ahead} harness specialisations compiled ahead; the GPU JIT then "
        f"compiled {len(after_smoke - before)} in smoke, {len(after_full - after_smoke)} in the other stages"
    )
    assert smoke.accepted and full.accepted, (smoke.message, full.message)
    assert ahead >= 1
    assert after_smoke == before, after_smoke - before
    assert after_full == before, after_full - before
