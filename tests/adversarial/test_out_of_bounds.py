"""Candidates that write outside what a call gave them, and candidates that compute right only
when they can tell the judge is calling. The edge stage hands the entry inputs whose rows sit
apart in a wider buffer (as a slice of a user's tensor does) and leaves created tensors room
after their end; a kernel that writes into either changes the user's memory, wherever it
computes the right answer. The judge poisons what a call allocates and calls without PyTorch's
grad mode for its own comparisons; a kernel that computes right only when it reads the poison,
or only without grad, is wrong in the user's program. The candidates run past the gate (straight
to the sandboxed harness), as if it had been bypassed."""

from __future__ import annotations

import pytest

from kernelbrain.engine.evaluate.verify import run_harness

from .attacks import base_task, edit

KERNEL_HEAD = "def softmax_kernel(out_ptr, x_ptr, n_cols, BLOCK: tl.constexpr):"
LOAD = "x = tl.load(x_ptr + row * n_cols + cols,"
STORE_LINE = (
    "    tl.store(out_ptr + row * n_cols + cols, (e / d).to(out_ptr.dtype.element_ty), mask=mask)\n"
)
CONTIGUOUS = "    x = x.contiguous()\n"
LAUNCH_ARGS = "(out, x, n_cols, BLOCK=triton.next_power_of_2(n_cols))"


def strided(extra_kernel: str = "", head_args: str = "") -> str:
    """The fixture reading rows where they are (the input's row stride), plus `extra_kernel`."""
    return edit(
        (KERNEL_HEAD, KERNEL_HEAD.replace("BLOCK: tl.constexpr", "STRIDE, BLOCK: tl.constexpr")),
        (LOAD, "x = tl.load(x_ptr + row * STRIDE + cols,"),
        (STORE_LINE, STORE_LINE + extra_kernel),
        (CONTIGUOUS, "    if x.stride(1) != 1:\n        x = x.contiguous()\n"),
        (LAUNCH_ARGS, "(out, x, n_cols, x.stride(0), BLOCK=triton.next_power_of_2(n_cols))"),
    )


OUT_OF_BOUNDS = {
    # zeroes the caller's columns between the rows it was given
    "into the gaps between an input's rows": strided(
        "    gap = n_cols + cols\n"
        "    tl.store(x_ptr + row * STRIDE + gap, tl.zeros([BLOCK], tl.float32).to("
        "x_ptr.dtype.element_ty), mask=(gap < STRIDE) & (row < tl.num_programs(0) - 1))\n"
    ),
    # one value into each gap, only where there is one (which is only the rows-apart case)
    "one element into each gap, only when there are gaps": strided(
        "    tl.store(x_ptr + row * STRIDE + n_cols, tl.load(x_ptr + row * STRIDE), "
        "mask=(STRIDE > n_cols) & (row < tl.num_programs(0) - 1))\n"
    ),
    # past the output's end, only when the input's rows sit apart (when the judge leaves room)
    "past the created output, only when the rows sit apart": strided(
        "    past = out_ptr + (tl.num_programs(0) + row) * n_cols + cols\n"
        "    tl.store(past, tl.full([BLOCK], 12345.0, tl.float32).to(out_ptr.dtype.element_ty), "
        "mask=mask & (STRIDE != n_cols))\n"
    ),
    # a single element just past the output's last one
    "one element past the created output": strided(
        "    tl.store(out_ptr + tl.num_programs(0) * n_cols, 1.0, mask=(row == 0) & "
        "(STRIDE != n_cols))\n"
    ),
}

JUDGE_ONLY = {
    # normalises only when its output still holds the judge's poison (NaN) before it writes
    "right only over the judge's poison": edit(
        (
            "    m = tl.max(x, axis=0)\n",
            "    prev = tl.load(out_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)\n"
            "    watched = tl.sum((prev != prev).to(tl.int32), axis=0) == n_cols\n"
            "    m = tl.max(x, axis=0)\n",
        ),
        ("(e / d).to(", "tl.where(watched, e / d, e).to("),
    ),
    # the same, told by one element's bits rather than by NaN
    "right only when the first element is NaN": edit(
        (
            "    m = tl.max(x, axis=0)\n",
            "    first = tl.load(out_ptr + row * n_cols).to(tl.float32)\n"
            "    m = tl.max(x, axis=0)\n",
        ),
        ("(e / d).to(", "tl.where(first != first, e / d, e * 0.5).to("),
    ),
    # exact only without grad, as the judge used to call
    "right only without grad mode": edit(
        (
            KERNEL_HEAD,
            KERNEL_HEAD.replace("BLOCK: tl.constexpr", "BLOCK: tl.constexpr, EXACT: tl.constexpr"),
        ),
        ("(e / d).to(", "(e / d if EXACT else e).to("),
        (LAUNCH_ARGS, LAUNCH_ARGS[:-1] + ", EXACT=not torch.is_grad_enabled())"),
    ),
}


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return base_task(tmp_path_factory.mktemp("bounds"))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(OUT_OF_BOUNDS))
def test_a_kernel_that_writes_outside_what_it_was_given_is_rejected(pool, task, name):
    result = run_harness(pool, task, OUT_OF_BOUNDS[name], "cpu")
    assert not result.accepted, f"{name}: accepted"
    assert result.reason == "out-of-bounds", (name, result.reason, result.message)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(JUDGE_ONLY))
def test_a_kernel_right_only_when_the_judge_calls_is_rejected(pool, task, name):
    result = run_harness(pool, task, JUDGE_ONLY[name], "cpu")
    assert not result.accepted, f"{name}: accepted"
    # its repeated runs allocate noise (it differs from its first), and it runs with grad on
    assert result.reason in ("nondeterministic", "mismatch"), (name, result.reason, result.message)


@pytest.mark.slow
def test_a_kernel_that_reads_rows_where_they_are_is_accepted(pool, task):
    result = run_harness(pool, task, strided(), "cpu")
    assert result.accepted, (result.reason, result.message)


def test_arguments_that_view_one_buffer_may_each_be_written():
    """Two arguments viewing one buffer (a cache's keys and values side by side): writing either
    is the call's own; writing the columns neither views is out of bounds."""
    import torch

    from kernelbrain.engine.worker.bounds import Outside

    buffer = torch.zeros(4, 12)
    keys, values = buffer[:, :4], buffer[:, 4:8]
    watch = Outside([keys, values])
    keys.fill_(1.0)
    values.fill_(2.0)
    assert watch.changed() == []
    buffer[:, 10] = 3.0
    assert watch.changed() == [0, 1]


def test_the_judge_s_allocations_cannot_be_told_from_a_user_s():
    """What a call allocates holds, in the determinism stage's three runs, the poison, random
    values from a seed drawn per process (a fixed seed let a kernel recognise the judge's
    allocations by their first values and compute right only then), and what the allocator
    hands out, as in the user's program."""
    import torch

    from kernelbrain.engine.worker import audit
    from kernelbrain.engine.worker.runs import LocalRunner

    firsts = []
    for _ in range(2):  # a fresh process's generator each time
        audit._noise.clear()
        t = torch.empty(64)
        audit.scramble(t)
        firsts.append(t.clone())
    assert not torch.equal(firsts[0], firsts[1])
    with audit.AuditMode(fill="poison"):
        poisoned = torch.empty(8)
    assert bool(audit.unwritten(poisoned).all())
    with audit.AuditMode(fill="as-allocated"):
        kept = torch.zeros(8).add_(5.0)  # a fill op: what the entry wrote stays
    assert torch.equal(kept, torch.full((8,), 5.0))

    fills = []

    class Choice:
        widest = 1

        def select(self, i):
            pass

    runner = LocalRunner(lambda *a, **k: None, Choice(), lambda: None)
    runner.once = lambda args, ghost=False, fill="poison": fills.append(fill)
    runner.run((), repeats=3, turn=0)
    runner.run((), repeats=3)
    assert fills == list(audit.FILLS) * 2
