"""Compiling ahead what the GPU harness will JIT: the harness stages' inputs are dry-run on a
compile worker and their specialisations land in Triton's on-disk cache, where any other
process (another compile worker here; the GPU worker in tests/gpu) finds them."""

from __future__ import annotations

from pathlib import Path

from kernelbrain.engine import protocol as m
from kernelbrain.engine.api import facts
from kernelbrain.engine.evaluate.pool import WorkerPool
from kernelbrain.engine.search.prewarm import Prewarm
from kernelbrain.engine.task import find_task

from .conftest import EXAMPLES, cache_entries


def test_stage_inputs_are_dry_run_and_compiled_ahead():
    task = find_task(EXAMPLES / "ops" / "matmul.py", "matmul_kernel")
    source = Path(task.file).read_text(encoding="utf-8")
    with WorkerPool() as pool:
        bench = pool.call("compile:0", m.Specialize(task, source, seed=0), 300.0)
        smoke = pool.call("compile:0", m.Specialize(task, source, seed=0, stages=["smoke"]), 300.0)
        full = pool.call(
            "compile:0", m.Specialize(task, source, seed=0, stages=["sweep", "edge"]), 300.0
        )
        # the small inputs (fp16, odd sizes) specialise the kernel differently from the benchmark cases
        assert [c.label.split(":")[0] for c in smoke.cases] == ["smoke", "smoke"]
        assert {a.dtype for c in smoke.cases for a in c.launches[0].args if a.kind == "ptr"} == {
            "fp16"
        }
        known = {facts.compile_key(r) for c in bench.cases for r in c.launches}
        smoke_keys = {facts.compile_key(r) for c in smoke.cases for r in c.launches}
        assert smoke_keys - known
        assert any("size" in c.label for c in full.cases) and any(
            "edge:" in c.label for c in full.cases
        )

        prewarm = Prewarm(task, 0, ["compile:0", "compile:1"], pool.call)
        try:
            new = smoke_keys - known
            assert prewarm.start(source, ["smoke"], known).result(timeout=600) == len(new) == 2
            assert smoke_keys <= known  # what it compiled is now known
            entries = cache_entries(Path(pool.triton_cache))
            assert any(
                "matmul_kernel.cubin" in {p.name for p in (Path(pool.triton_cache) / e).iterdir()}
                for e in entries
            )
            assert prewarm.start(source, ["smoke"], known).result(timeout=600) == 0
            # Another process compiling the same specialisation finds it in the cache: nothing new.
            rec = next(r for c in smoke.cases for r in c.launches)
            (compiled,) = pool.call(
                "compile:1", m.Compile(source, task.file, [rec], sass=False), 300.0
            ).facts
            assert compiled.ok and cache_entries(Path(pool.triton_cache)) == entries
        finally:
            prewarm.close()


def test_a_candidate_that_fails_its_dry_run_only_loses_the_head_start():
    task = find_task(EXAMPLES / "ops" / "gelu.py", "gelu_kernel")
    broken = (
        Path(task.file)
        .read_text(encoding="utf-8")
        .replace("def gelu(", "def gelu(*_):\n    raise RuntimeError('no')\n\ndef _unused(")
    )
    with WorkerPool() as pool:
        spec = pool.call("compile:0", m.Specialize(task, broken, seed=0, stages=["smoke"]), 300.0)
        assert isinstance(spec, facts.SpecializeResult) and spec.cases == []
        prewarm = Prewarm(task, 0, ["compile:0"], pool.call)
        try:
            assert prewarm.start(broken, ["smoke"], set()).result(timeout=300) == 0
        finally:
            prewarm.close()


def test_ahead_of_time_cache_key_is_the_jits(tmp_path):
    """Triton's cache key covers the specialisation's exact spelling: an integer that is not a
    multiple of 16 is an empty attribute entry for the JIT. On the H200 the smoke inputs' cubins
    compiled ahead were all missed until the AOT side spelled it the same way."""
    import torch
    from triton import knobs
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.compiler import ASTSource

    from kernelbrain.engine.worker.compiled import _jit_function, _signature
    from kernelbrain.engine.worker.loader import ModuleLoader
    from kernelbrain.engine.worker.specialize import _arg_spec

    loader = ModuleLoader()
    module = loader.load(
        (EXAMPLES / "ops" / "matmul.py").read_text(encoding="utf-8"),
        str(EXAMPLES / "ops" / "matmul.py"),
        [],
    )
    fn = _jit_function(module, "matmul_kernel")
    backend = CUDABackend(GPUTarget("cuda", 90, 32))
    for m_, n_, k_, shift in [
        (33, 65, 17, 0),
        (70, 40, 96, 0),
        (64, 64, 64, 0),
        (1, 48, 0, 0),
        (64, 64, 64, 1),
    ]:
        a, b = (
            torch.empty(m_ * k_ + shift, dtype=torch.float16)[shift:].view(m_, k_),
            torch.empty(k_, n_, dtype=torch.float16),
        )
        c = torch.empty(m_, n_, dtype=torch.float16)
        args = [
            a,
            b,
            c,
            m_,
            n_,
            k_,
            a.stride(0),
            a.stride(1),
            b.stride(0),
            b.stride(1),
            c.stride(0),
            c.stride(1),
            64,
            64,
            32,
        ]
        spec = [
            ("constexpr", v)
            if p.is_constexpr
            else native_specialize_impl(CUDABackend, v, p.is_const, True, True)
            for p, v in zip(fn.params, args)
        ]
        bound = dict(zip(fn.arg_names, args))
        _, jit_sig, jit_consts, jit_attrs = fn._pack_args(backend, {}, bound, spec, None)
        rec = facts.LaunchRecord(
            kernel="matmul_kernel",
            grid=(1,),
            num_warps=4,
            num_stages=3,
            args=[
                _arg_spec(n, v, p.is_constexpr) for n, v, p in zip(fn.arg_names, args, fn.params)
            ],
        )
        aot_sig, aot_consts, aot_attrs = _signature(rec)
        assert (
            ASTSource(fn, aot_sig, aot_consts, aot_attrs).hash()
            == ASTSource(fn, jit_sig, jit_consts, jit_attrs).hash()
        ), ((m_, n_, k_, shift), aot_attrs, jit_attrs)
    # the options the JIT adds to a launch's (debug, instrumentation) are the defaults the AOT side gets
    jit_options = backend.parse_options(
        {
            "num_warps": 4,
            "num_stages": 3,
            "debug": False,
            "instrumentation_mode": knobs.compilation.instrumentation_mode,
        }
    )
    assert jit_options.hash() == backend.parse_options({"num_warps": 4, "num_stages": 3}).hash()


def test_a_worker_outlives_the_thread_that_started_it():
    """The prewarm's pool and every other search thread start workers and then end; the
    sandbox kills a child when the thread that forked it ends (PR_SET_PDEATHSIG), so each worker
    is forked from the pool's one long-lived thread. Otherwise every search started its compile
    workers again (about 9 s each on the H200 machine)."""
    import threading

    with WorkerPool() as pool:
        starter = threading.Thread(target=pool.call, args=("compile:0", m.Ping(), 120.0))
        starter.start()
        starter.join()
        worker = pool.worker("compile:0")
        pid = worker.proc.pid
        assert isinstance(pool.call("compile:0", m.Ping(), 120.0), m.Ready)
        assert worker.proc.pid == pid and worker.alive and pool.restarts == 0


def test_compile_workers_grow_with_a_large_host_but_stay_bounded():
    """Small machines keep one a core (up to four); a 16-core GPU host gets eight, so candidates'
    compiles keep pace with the GPU; no host gets more than eight."""
    from kernelbrain.engine.evaluate.pool import default_compile_workers

    assert [default_compile_workers(c) for c in (1, 2, 4, 8)] == [1, 2, 4, 4]
    assert default_compile_workers(16) == 8 and default_compile_workers(128) == 8
    assert default_compile_workers(12) == 6
