"""On the GPU: a candidate whose kernel is the original's but which changes the runner it is timed
in (so the original, timed beside it, does more work) earns nothing. Past the gate (the timing
request goes straight to the runner) each is rejected as `tampered`; the same kernel without the
patch measures 1.00x within noise in the runner that replaced it."""

from __future__ import annotations

import pytest

from kernelbrain.engine import protocol as m
from kernelbrain.engine.api import facts
from kernelbrain.engine.task import find_task

from ..adversarial.attacks import BASE, SOURCE, at_top
from ..adversarial.test_tamper import ORIGINAL_MODULE, TAMPERING

pytestmark = pytest.mark.gpu

# Each slows whatever runs after it in the same process (the original included); its own kernel
# is the original's.
SLOWING_THE_ORIGINAL = {
    "allocations that copy": at_top(
        "_empty_like = torch.empty_like",
        "def _copying(*a, **k):",
        "    out = _empty_like(*a, **k)",
        "    for _ in range(3):",
        "        out.copy_(a[0] if a else out)",
        "    return out",
        "torch.empty_like = _copying",
    ),
    "every launch twice": TAMPERING["Triton's launcher launching twice"],
    "the original's entry made to copy its input": at_top(
        *ORIGINAL_MODULE,
        "_real = _orig.softmax",
        "_orig.softmax = lambda x: _real(x.clone().clone())",
    ),
    "a launch hook that synchronises": at_top(
        "triton.knobs.runtime.launch_enter_hook = lambda *a, **k: torch.cuda.synchronize()",
    ),
    # what the original's kernel compiles from, swapped for a slower body (a GPU `JITFunction`)
    "the original kernel's source swapped": at_top(
        *ORIGINAL_MODULE,
        "_k = _orig.softmax_kernel",
        "_k._unsafe_update_src(_k.src.replace('e = tl.exp(x - m)', "
        "'e = tl.exp(tl.exp(tl.log(tl.exp(x - m))) * 0 + (x - m))'))",
    ),
}


@pytest.fixture(scope="module")
def task():
    return find_task(BASE, "softmax_kernel")


def test_a_candidate_that_slows_the_original_beside_it_is_rejected(pool, task):
    for name, source in SLOWING_THE_ORIGINAL.items():
        answer = pool.call("cuda:0", m.TimeAB(task, source, name, rep_ms=100.0), 600.0)
        assert isinstance(answer, facts.WorkerError), (name, answer)
        assert answer.reason == "tampered", (name, answer.message)
        assert not pool.worker("cuda:0").alive, name  # the changed runner is gone
    # The same kernel, honestly: about 1.00x in the fresh runner.
    same = pool.call("cuda:0", m.TimeAB(task, SOURCE + "\n# same\n", "same", rep_ms=100.0), 600.0)
    assert isinstance(same, facts.TimingResult) and same.rejection is None, same
    assert 0.9 < same.speedup < 1.1, same


def test_the_harness_on_the_gpu_rejects_a_tampering_candidate(pool, task):
    from kernelbrain.engine.evaluate.verify import run_harness

    result = run_harness(pool, task, SLOWING_THE_ORIGINAL["every launch twice"], "cuda:0")
    assert (result.accepted, result.reason) == (False, "tampered"), result.message
    assert run_harness(pool, task, SOURCE + "\n# same\n", "cuda:0").accepted
