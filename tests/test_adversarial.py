"""Adversarial candidates: each must be rejected for the right reason, in one run, by one worker
pool that survives all of them (hangs, exits, segfaults and huge allocations included)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelbrain.engine.evaluate.pool import WorkerPool
from kernelbrain.engine.evaluate.verify import verify
from kernelbrain.engine.task import find_task

BASE = Path(__file__).parent / "fixtures" / "adversarial" / "softmax.py"
SOURCE = BASE.read_text()
LAUNCH = "    softmax_kernel[(n_rows,)](out, x, n_cols, BLOCK=triton.next_power_of_2(n_cols))\n"
STORE = "(e / d).to(out_ptr.dtype.element_ty), mask=mask)"


def edit(*pairs: tuple[str, str]) -> str:
    src = SOURCE
    for old, new in pairs:
        assert old in src, old
        src = src.replace(old, new)
    return src


def in_launcher(code: str) -> str:
    return edit((LAUNCH, f"    {code}\n" + LAUNCH))


# name -> (candidate source, expected stage, expected reason)
ADVERSARIES = {
    "wrong values": (
        edit((STORE, "(e / d * 1.01).to(out_ptr.dtype.element_ty), mask=mask)")),
        "smoke",
        "mismatch",
    ),
    "partially unwritten output": (
        edit(
            (
                "(e / d).to(out_ptr.dtype.element_ty), mask=mask)",
                "(e / d).to(out_ptr.dtype.element_ty), mask=mask & (cols < n_cols - 1))",
            )
        ),
        "smoke",
        "unwritten-output",
    ),
    "NaN output": (
        edit(
            (
                STORE,
                "tl.where(cols == 3, float('nan'), e / d).to(out_ptr.dtype.element_ty), mask=mask)",
            )
        ),
        "smoke",
        "nan-output",
    ),
    "infinite loop": (
        in_launcher("while n_cols > 0:\n        n_rows = n_rows + 0"),
        "smoke",
        "timeout",
    ),
    "os._exit": (
        in_launcher(
            'getattr(getattr(getattr(torch, "seri" + "alization"), "o" + "s"), "_ex" + "it")(7)'
        ),
        "smoke",
        "exit",
    ),
    "segfault via ctypes": (
        in_launcher('getattr(getattr(torch, "_o" + "ps"), "ct" + "ypes").string_at(8)'),
        "smoke",
        "segfault",
    ),
    "huge allocation": (
        in_launcher("scratch = torch.empty(1 << 44, dtype=torch.uint8, device=x.device)"),
        "smoke",
        "out-of-memory",
    ),
    "torch fallback": (
        edit(
            (
                "    return out\n\n\ndef softmax_ref",
                "    return torch.softmax(x, dim=-1)\n\n\ndef softmax_ref",
            )
        ),
        "smoke",
        "torch-fallback",
    ),
    # comparisons are exempt on scalars only (a launcher's checks), never on the inputs
    "comparison on the input": (in_launcher("finite = x == x"), "smoke", "torch-fallback"),
    "output cached across calls": (
        edit(
            ("def softmax(x):\n", "_SEEN = {}\n\n\ndef softmax(x):\n"),
            (
                "    return out\n\n\ndef softmax_ref",
                "    _SEEN[x.shape] = out\n    return out\n\n\ndef softmax_ref",
            ),
        ),
        "gate",
        "stateful",
    ),
    "result hard-coded for one shape": (
        edit((LAUNCH, LAUNCH.replace("(out, x, n_cols,", "(out, x, 64,"))),
        "gate",
        "hard-coded-shape",
    ),
    "correct only at power-of-two sizes": (
        edit(('other=float("-inf")', "other=0.0")),
        "sweep",
        "mismatch",
    ),
    "correct only for small sizes": (
        edit(("BLOCK=triton.next_power_of_2(n_cols)", "BLOCK=128")),
        "sweep",
        "unwritten-output",
    ),
    "import os": (
        edit(("import torch\n", "import os\nimport torch\n")),
        "gate",
        "forbidden-import",
    ),
    "import subprocess": (
        edit(("import torch\n", "import subprocess\nimport torch\n")),
        "gate",
        "forbidden-import",
    ),
    "import socket": (
        edit(("import torch\n", "from socket import socket\nimport torch\n")),
        "gate",
        "forbidden-import",
    ),
    "exec": (in_launcher('exec("n_rows = n_rows")'), "gate", "forbidden-call"),
    "eval": (in_launcher('n_cols = eval("n_cols")'), "gate", "forbidden-call"),
    "changed kernel signature": (
        edit(
            (
                "def softmax_kernel(out_ptr, x_ptr, n_cols, BLOCK",
                "def softmax_kernel(out_ptr, x_ptr, n_cols, stride, BLOCK",
            ),
            ("(out, x, n_cols, BLOCK", "(out, x, n_cols, n_cols, BLOCK"),
        ),
        "gate",
        "signature-changed",
    ),
    "changed entry signature": (
        edit(("def softmax(x):", "def softmax(x, dim=-1):")),
        "gate",
        "signature-changed",
    ),
    "nondeterministic atomics": (
        edit(
            (
                "tl.store(out_ptr + row * n_cols + cols, (e / d)",
                "tl.atomic_add(out_ptr + row * n_cols + cols, (e / d)",
            ),
            ("out = torch.empty_like(x)", "out = torch.zeros_like(x)"),
        ),
        "gate",
        "nondeterministic-atomics",
    ),
    "calls the reference": (
        edit(
            (
                "    return out\n\n\ndef softmax_ref",
                "    return softmax_ref(x)\n\n\ndef softmax_ref",
            )
        ),
        "gate",
        "calls-reference",
    ),
}

# Tuned over two tiles, one of which covers only 128 columns: whichever the tuner would time
# fastest, every configuration must be correct.
AUTOTUNED = edit(
    (
        "@triton.jit\n",
        '@triton.autotune(configs=[triton.Config({"BLOCK": 4096}), '
        'triton.Config({"BLOCK": 128})], key=["n_cols"])\n@triton.jit\n',
    ),
    (LAUNCH, "    softmax_kernel[(n_rows,)](out, x, n_cols)\n"),
)
ADVERSARIES["one autotune config wrong"] = (AUTOTUNED, "sweep", "unwritten-output")

# A different, correct implementation: exp2 with a log2(e) scale, two warps, no contiguous copy.
CORRECT = edit(
    ("e = tl.exp(x - m)", "e = tl.exp2((x - m) * 1.4426950408889634)"),
    (
        LAUNCH,
        LAUNCH.replace(
            "BLOCK=triton.next_power_of_2(n_cols))",
            "BLOCK=triton.next_power_of_2(n_cols), num_warps=2)",
        ),
    ),
)

CRASHERS = {"infinite loop", "os._exit", "segfault via ctypes"}


@pytest.fixture(scope="module")
def pool():
    with WorkerPool() as p:
        yield p


@pytest.fixture(scope="module")
def task():
    return find_task(BASE, "softmax_kernel")


@pytest.mark.slow
def test_adversaries_rejected_for_the_right_reason_and_pool_survives(pool, task):
    outcomes = {}
    for name, (source, stage, reason) in ADVERSARIES.items():
        timeout = 25.0 if name == "infinite loop" else None
        report = verify(pool, task, source, "cpu", timeout_s=timeout)
        outcomes[name] = (report.accepted, report.stage, report.reason, report.message)
    wrong = {
        n: o for n, o in outcomes.items() if (o[0], o[1], o[2]) != (False, *ADVERSARIES[n][1:])
    }
    assert not wrong, "\n".join(
        f"{n}: expected {ADVERSARIES[n][1:]}, got {o}" for n, o in wrong.items()
    )
    assert len(ADVERSARIES) >= 15
    # Every crash ended only its worker; the same pool still accepts a correct candidate.
    assert pool.restarts >= len(CRASHERS)
    report = verify(pool, task, CORRECT, "cpu")
    assert report.accepted, report.message
    assert [s.name for s in report.stages] == ["smoke", "sweep", "stability", "determinism", "edge"]


def test_rejections_say_what_and_where(pool, task):
    report = verify(pool, task, ADVERSARIES["correct only at power-of-two sizes"][0], "cpu")
    assert report.stage == "sweep" and "->" in report.message  # names the perturbed size
    failing = [c for c in report.cases if not c.ok]
    assert failing and failing[-1].mismatched > 0 and failing[-1].max_abs_err > 0
    report = verify(pool, task, AUTOTUNED, "cpu")
    assert report.stage == "sweep" and "autotune config BLOCK=128" in report.message, report.message
    report = verify(pool, task, ADVERSARIES["torch fallback"][0], "cpu")
    assert "aten._softmax" in report.message and report.torch_ops == ["_softmax"]
    report = verify(pool, task, ADVERSARIES["import os"][0], "cpu")
    assert report.line == 7 and "import os" in report.message


def test_identical_candidate_is_accepted_with_per_case_details(pool, task):
    report = verify(pool, task, SOURCE + "\n# a comment changes nothing\n", "cpu")
    assert report.accepted and report.reason is None
    assert all(c.ok for c in report.cases)
    assert {c.stage for c in report.cases} == {"smoke", "sweep", "stability", "determinism", "edge"}
    assert report.timing is None  # no timing without a GPU
