"""Ghost replay: a candidate whose Triton kernels compute nothing of its results is rejected,
wherever around the launch the real work hides (a heuristic, an autotune pre-hook, a grid
function). The candidates run past the gate (straight to the sandboxed harness), as if the gate
had been bypassed: the judge must hold on its own."""

from __future__ import annotations

import pytest

from kernelbrain.engine.evaluate.verify import run_harness

from .attacks import LAUNCH, SOURCE, STORE, base_task

# The kernel keeps its loads and math but stores nothing.
NO_STORE = SOURCE.replace(
    "    tl.store(out_ptr + row * n_cols + cols, " + STORE, "    tl.debug_barrier()\n"
)
assert NO_STORE != SOURCE

HIDDEN = {
    # the answer computed in a heuristic, which runs before every launch
    "in a heuristic": NO_STORE.replace(
        "@triton.jit\ndef softmax_kernel(",
        "@triton.heuristics({'KB': lambda a: a['out_ptr'].copy_(torch.softmax(a['x_ptr'], -1))"
        " is None})\n@triton.jit\ndef softmax_kernel(",
    ).replace("BLOCK: tl.constexpr):", "BLOCK: tl.constexpr, KB: tl.constexpr):"),
    # the answer computed in an autotune pre-hook
    "in an autotune pre-hook": NO_STORE.replace(
        "@triton.jit\ndef softmax_kernel(",
        "def kb_hook(nargs):\n    nargs['out_ptr'].copy_(torch.softmax(nargs['x_ptr'], -1))\n\n\n"
        "@triton.autotune([triton.Config({}, num_warps=4, pre_hook=kb_hook)], key=['n_cols'])\n"
        "@triton.jit\ndef softmax_kernel(",
    ),
    # the answer computed in the grid function, which runs at every launch
    "in the grid function": NO_STORE.replace(
        LAUNCH,
        "    softmax_kernel[lambda meta: (out.copy_(torch.softmax(x, -1)) is not None) and (n_rows,)]"
        "(out, x, n_cols, BLOCK=triton.next_power_of_2(n_cols))\n",
    ),
}


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return base_task(tmp_path_factory.mktemp("ghost"))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HIDDEN))
def test_kernels_that_compute_nothing_are_caught(pool, task, name):
    result = run_harness(pool, task, HIDDEN[name], "cpu")
    assert not result.accepted, f"{name}: accepted"
    assert result.reason in ("kernels-unused", "torch-fallback"), (result.reason, result.message)


@pytest.mark.slow
def test_kernels_that_compute_the_result_pass_the_ghost_replay(pool, task):
    honest = SOURCE.replace(
        "@triton.jit\ndef softmax_kernel(",
        "@triton.autotune([triton.Config({}, num_warps=w) for w in (2, 4)], key=['n_cols'])\n"
        "@triton.jit\ndef softmax_kernel(",
    )
    for source in (SOURCE, honest):
        result = run_harness(pool, task, source, "cpu")
        assert result.accepted, result.message


@pytest.mark.slow
def test_a_launcher_that_reads_what_its_kernels_wrote_passes_the_ghost_replay(pool, task):
    """The kernel counts its programs; the launcher raises when the count is short. With its
    kernels skipped it raises: they compute the result, so the ghost replay holds nothing
    against it."""
    checked = (
        SOURCE.replace(
            "def softmax_kernel(out_ptr, x_ptr, n_cols,",
            "def softmax_kernel(out_ptr, x_ptr, seen_ptr, n_cols,",
        )
        .replace(
            "    row = tl.program_id(0)\n",
            "    row = tl.program_id(0)\n    tl.atomic_add(seen_ptr, 1)\n",
        )
        .replace(
            LAUNCH,
            "    seen = torch.zeros(1, dtype=torch.int32, device=x.device)\n"
            + LAUNCH.replace("(out, x, n_cols", "(out, x, seen, n_cols")
            + "    if seen.item() != n_rows:\n"
            "        raise RuntimeError('the kernel did not run on every row')\n",
        )
    )
    assert checked.count("seen") == 5
    result = run_harness(pool, task, checked, "cpu")
    assert result.accepted, (result.reason, result.message)


# The kernel does token work on what a heuristic computed in PyTorch: its results change when it
# is skipped, so the ghost replay passes it; the audit, which covers heuristics, does not.
TOKEN_WORK = {
    "halving what a heuristic doubled": SOURCE.replace(
        "@triton.jit\ndef softmax_kernel(",
        "@triton.heuristics({'KB': lambda a: a['out_ptr'].copy_(torch.softmax(a['x_ptr'].float(),"
        " -1) * 2).dim()})\n@triton.jit\ndef softmax_kernel(",
    )
    .replace("BLOCK: tl.constexpr):", "BLOCK: tl.constexpr, KB: tl.constexpr):")
    .replace(
        "    tl.store(out_ptr + row * n_cols + cols, " + STORE,
        "    y = tl.load(out_ptr + row * n_cols + cols, mask=mask, other=0.0)\n"
        "    tl.store(out_ptr + row * n_cols + cols, y * 0.5, mask=mask)\n",
    ),
    "normalising what a heuristic exponentiated": SOURCE.replace(
        "@triton.jit\ndef softmax_kernel(",
        "@triton.heuristics({'KB': lambda a: a['out_ptr'].copy_((a['x_ptr'] - a['x_ptr']"
        ".amax(-1, keepdim=True)).exp()).dim()})\n@triton.jit\ndef softmax_kernel(",
    )
    .replace("BLOCK: tl.constexpr):", "BLOCK: tl.constexpr, KB: tl.constexpr):")
    .replace(
        "    tl.store(out_ptr + row * n_cols + cols, " + STORE,
        "    y = tl.load(out_ptr + row * n_cols + cols, mask=mask, other=0.0)\n"
        "    tl.store(out_ptr + row * n_cols + cols, y / tl.sum(y, axis=0), mask=mask)\n",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TOKEN_WORK))
def test_work_done_in_a_heuristic_is_audited(pool, task, name):
    assert TOKEN_WORK[name].count("KB") == 2
    result = run_harness(pool, task, TOKEN_WORK[name], "cpu")
    assert not result.accepted, f"{name}: accepted"
    assert result.reason == "torch-fallback", (result.reason, result.message)
