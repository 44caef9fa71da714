"""Candidates that change the process they run in, so that the original (timed next to them in
the same runner) runs slower or differently: a patch of PyTorch, of Triton's launcher, of the
original's globals, of Triton's knobs, of PyTorch's global modes, a thread left running.

The static gate refuses each of them; these tests bypass it (`run_harness` straight to the
sandboxed runner), as an attacker who found a way past it would, and check the runner's tamper
watch (`engine/worker/tamper.py`): rejected as `tampered`, the runner replaced, and honest
variants (a plain copy, an autotuned one) still accepted in the same pool after it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from kernelbrain.engine.evaluate.policy import static_gate
from kernelbrain.engine.evaluate.pool import WorkerPool
from kernelbrain.engine.evaluate.verify import run_harness

from .attacks import HONEST, LAUNCH, SOURCE, at_top, base_task, edit

# The original runs as `kb_softmax_<hash>` (`worker/loader.py`); the candidate is another module
# of the same file name.
ORIGINAL_MODULE = (
    "import sys as _s",
    "_orig = [m for n, m in list(_s.modules.items()) if n.startswith('kb_softmax_') "
    "and n != __name__][0]",
)

TAMPERING: dict[str, str] = {
    "an allocation function wrapped": at_top(
        "_empty_like = torch.empty_like",
        "torch.empty_like = lambda *a, **k: _empty_like(*a, **k).clone()",
    ),
    "Triton's launcher launching twice": at_top(
        "from triton.runtime.jit import JITFunction as _J",
        "_run = _J.run",
        "def _twice(self, *a, **k):",
        "    _run(self, *a, **k)",
        "    return _run(self, *a, **k)",
        "_J.run = _twice",
    ),
    "a Tensor method shadowed on the class": at_top(
        "torch.Tensor.contiguous = lambda self, *a, **k: self.clone()",
    ),
    "the original's own global replaced": at_top(
        *ORIGINAL_MODULE,
        "_real = _orig.softmax",
        "_orig.softmax = lambda x: _real(x.clone())",
    ),
    "the original's kernel object given a hook": at_top(
        *ORIGINAL_MODULE,
        "_orig.softmax_kernel.run = lambda *a, **k: None",
    ),
    "a Triton launch hook": at_top(
        "triton.knobs.runtime.launch_enter_hook = lambda *a, **k: None",
    ),
    "grad mode switched off": at_top("torch.set_grad_enabled(False)"),
    "a function mode left on": at_top(
        "from torch.overrides import TorchFunctionMode as _M",
        "_M().__enter__()",
    ),
    "a thread left running": at_top(
        "import threading as _th, time as _t",
        "_th.Thread(target=_t.sleep, args=(120,), daemon=True).start()",
    ),
    "a process left running": at_top(
        "import subprocess as _sp",
        "_sp.Popen(['sleep', '120'])",
    ),
    "a forked child left running": at_top(
        "import os as _os, time as _t",
        "if _os.fork() == 0:",
        "    _t.sleep(120)",
        "    _os._exit(0)",
    ),
    "a grandchild orphaned by a double fork": at_top(
        "import os as _os, time as _t",
        "if _os.fork() == 0:",
        "    _os.setsid()",
        "    if _os.fork() == 0:",
        "        _t.sleep(120)",
        "    _os._exit(0)",
        "_os.waitpid(-1, 0)",
    ),
    "a judge's constant rebound": at_top(
        "from kernelbrain.engine.worker import timing as _tm",
        "_tm.STALE_SCALE = 1e30",
    ),
    "a judge's constant written in place through memory": at_top(
        "import ctypes as _c",
        "from kernelbrain.engine.worker import stages as _st",
        "_c.c_double.from_address(id(_st.STABILITY_SCALE) + 16).value = 1e30",
    ),
    "the environment changed": at_top("import os as _os", "_os.environ['OMP_NUM_THREADS'] = '1'"),
    "a patch made on the third call": edit(
        ("def softmax(x):\n", "_CALLS = [0]\n\n\ndef softmax(x):\n"),
        (
            LAUNCH,
            "    _CALLS[0] += 1\n"
            "    if _CALLS[0] == 3:\n"
            "        _e = torch.empty_like\n"
            "        torch.empty_like = lambda *a, **k: _e(*a, **k)\n" + LAUNCH,
        ),
    ),
    "a patch made on a call, then a wrong answer": edit(
        ("def softmax(x):\n", "_CALLS = [0]\n\n\ndef softmax(x):\n"),
        (
            LAUNCH,
            "    _CALLS[0] += 1\n"
            "    if _CALLS[0] == 2:\n"
            "        _e = torch.empty_like\n"
            "        torch.empty_like = lambda *a, **k: _e(*a, **k)\n"
            "    if _CALLS[0] >= 3:\n"
            "        raise RuntimeError('wrong from here on')\n" + LAUNCH,
        ),
    ),
}


@pytest.fixture(scope="module")
def pool():
    with WorkerPool() as p:
        yield p


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return base_task(tmp_path_factory.mktemp("tamper") / "workspace")


@pytest.mark.slow
def test_a_candidate_that_changes_its_runner_is_rejected_and_the_runner_replaced(pool, task):
    def judged(pool: WorkerPool, name: str) -> str | None:
        """What is wrong with `pool`'s verdict on the attack `name`, if anything."""
        source = TAMPERING[name]
        assert static_gate(task, SOURCE, source) is not None, f"the gate let {name!r} through"
        result = run_harness(pool, task, source, "cpu")
        if (result.accepted, result.reason) != (False, "tampered"):
            return f"{name}: {result.accepted, result.stage, result.reason}: {result.message}"
        if pool.worker("cpu").alive:
            return f"{name}: the runner it changed was kept"
        return None

    # Every attack costs a runner (its replacement starts PyTorch again): two pools share them.
    names = list(TAMPERING)
    with WorkerPool() as other, ThreadPoolExecutor(max_workers=2) as ex:
        halves = [
            ex.submit(lambda p, part: [judged(p, n) for n in part], p, names[i::2])
            for i, p in enumerate((pool, other))
        ]
        wrong = [w for half in halves for w in half.result() if w]
    assert not wrong, "\n".join(wrong)
    # What a candidate changed never reaches the next one: honest variants still pass, in one
    # runner (nothing of theirs counts as a change).
    for name in ("the original with a comment", "autotuned warps", "dispatching on the width"):
        result = run_harness(pool, task, HONEST[name], "cpu")
        assert result.accepted, f"{name}: {result.message}"
    assert pool.worker("cpu").alive


@pytest.mark.slow
def test_the_rejection_names_what_changed(pool, task):
    result = run_harness(pool, task, TAMPERING["an allocation function wrapped"], "cpu")
    assert result.reason == "tampered"
    assert "torch.empty_like" in result.message
    result = run_harness(pool, task, TAMPERING["grad mode switched off"], "cpu")
    assert "grad enabled (True -> False)" in result.message


def test_what_triton_fills_in_on_first_use_is_no_change_and_a_method_added_to_a_class_is():
    """On a GPU, Triton's driver keeps a singleton on its class on first use
    (`CudaUtils.instance`): not a candidate's patch. A method put on a class that only inherited
    it is (the dry run's `JITFunction.warmup` stand-in must leave none: tests/test_prewarm.py)."""
    from triton.runtime.jit import JITFunction

    from kernelbrain.engine.worker import tamper

    watch = tamper.Watch(is_workspace=lambda module: False)
    watch.before_candidate()
    JITFunction.instance = object()
    try:
        assert watch.changes() == []
        JITFunction.warmup = JITFunction.warmup  # inherited, now the class's own
        try:
            assert watch.changes() == ["triton.runtime.jit.JITFunction (names: +warmup)"]
        finally:
            del JITFunction.warmup
    finally:
        del JITFunction.instance


def test_no_other_process_of_the_sandbox_opens_the_runners_memory(pool, task):
    """A process a candidate starts could write the runner's memory through `/proc/PID/mem`
    (below anything Python can watch); the runner is not dumpable, so the open fails."""
    probe = at_top(
        "import os as _os, subprocess as _sp, sys as _s",
        "_rc = _sp.run([_s.executable, '-c', f'open(\"/proc/{_os.getpid()}/mem\", \"r+b\")'],",
        "              capture_output=True).returncode",
        "raise RuntimeError(f'kb-mem-open-exit-{_rc}')",
    )
    result = run_harness(pool, task, probe, "cpu")
    assert "kb-mem-open-exit-1" in result.message, result.message
