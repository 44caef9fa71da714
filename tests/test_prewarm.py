"""Compiling ahead what the GPU harness will JIT: the harness stages' inputs are dry-run on a
compile worker and their specialisations land in Triton's on-disk cache, where any other
process (another compile worker here; the GPU worker in tests/gpu) finds them."""

from __future__ import annotations

from pathlib import Path


from kernelbrain.engine.evaluate import messages as m
from kernelbrain.engine.evaluate.pool import WorkerPool
from kernelbrain.engine.search.prewarm import Prewarm
from kernelbrain.engine.task import find_task

from .conftest import EXAMPLES, cache_entries


def test_stage_inputs_are_dry_run_and_compiled_ahead(private_cache):
    task = find_task(EXAMPLES / "ops" / "matmul.py", "matmul_kernel")
    source = Path(task.file).read_text(encoding="utf-8")
    with WorkerPool() as pool:
        bench = pool.call("compile:0", m.Specialize(task, source, seed=0), 300.0)
        smoke = pool.call("compile:0", m.Specialize(task, source, seed=0, stages=["smoke"]), 300.0)
        full = pool.call("compile:0", m.Specialize(task, source, seed=0, stages=["sweep", "edge"]), 300.0)
        # the small inputs (fp16, odd sizes) specialise the kernel differently from the benchmark cases
        assert [c.label.split(":")[0] for c in smoke.cases] == ["smoke", "smoke"]
        assert {a.dtype for c in smoke.cases for a in c.launches[0].args if a.kind == "ptr"} == {"fp16"}
        known = {m.compile_key(r) for c in bench.cases for r in c.launches}
        smoke_keys = {m.compile_key(r) for c in smoke.cases for r in c.launches}
        assert smoke_keys - known
        assert any("size" in c.label for c in full.cases) and any("edge:" in c.label for c in full.cases)

        prewarm = Prewarm(task, 0, ["compile:0", "compile:1"], pool.call)
        try:
            new = smoke_keys - known
            assert prewarm.start(source, ["smoke"], known).result(timeout=600) == len(new) == 2
            assert smoke_keys <= known  # what it compiled is now known
            entries = cache_entries(private_cache)
            assert any("matmul_kernel.cubin" in {p.name for p in (private_cache / e).iterdir()} for e in entries)
            assert prewarm.start(source, ["smoke"], known).result(timeout=600) == 0
            # Another process compiling the same specialisation finds it in the cache: nothing new.
            rec = next(r for c in smoke.cases for r in c.launches)
            (facts,) = pool.call("compile:1", m.Compile(source, task.file, [rec], sass=False), 300.0).facts
            assert facts.ok and cache_entries(private_cache) == entries
        finally:
            prewarm.close()


def test_a_candidate_that_fails_its_dry_run_only_loses_the_head_start(private_cache):
    task = find_task(EXAMPLES / "ops" / "gelu.py", "gelu_kernel")
    broken = Path(task.file).read_text(encoding="utf-8").replace("def gelu(", "def gelu(*_):\n    raise RuntimeError('no')\n\ndef _unused(")
    with WorkerPool() as pool:
        spec = pool.call("compile:0", m.Specialize(task, broken, seed=0, stages=["smoke"]), 300.0)
        assert isinstance(spec, m.SpecializeResult) and spec.cases == []
        prewarm = Prewarm(task, 0, ["compile:0"], pool.call)
        try:
            assert prewarm.start(broken, ["smoke"], set()).result(timeout=300) == 0
        finally:
            prewarm.close()
