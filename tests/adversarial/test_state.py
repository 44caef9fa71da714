"""Candidates that keep results between calls. In the judge every call gets fresh copies of its
inputs, so a memo keyed on a tensor's identity or address never hits there; in the user's
program the same buffers come back with new contents, and a memo serves stale results, a pool
of output buffers hands out memory the caller still reads. Each call's outputs must be memory
the call created and nothing else holds (`audit.held_elsewhere`, `AuditMode.kept`); a memo that
hands out copies is caught where its stale answer shows (a hit on a reused address or identity,
the ghost replay), not always (docs/judging.md).
The candidates reach their module state through an alias the gate does not follow
(`(_MEMO,)[0]`), and run past the gate (straight to the sandboxed harness)."""

from __future__ import annotations

import pytest

from kernelbrain.engine.evaluate.verify import run_harness

from .attacks import LAUNCH, RETURN, base_task, edit

TOP = "import triton.language as tl\n"
ENTRY = "def softmax(x):\n    x = x.contiguous()\n"


def _with(state: str, before: str, after: str) -> str:
    """The fixture with module state `state`, launcher lines `before` its launch and `after`
    it (before the return)."""
    indent = lambda text: "".join(f"    {line}\n" for line in text.strip("\n").splitlines())  # noqa: E731
    return edit(
        (TOP, TOP + state.strip("\n") + "\n"),
        (ENTRY, ENTRY + indent(before)),
        (RETURN, indent(after) + RETURN),
    )


KEEPING = {
    # the output itself, by the input's identity: a hit returns an earlier call's tensor
    "memo of outputs by identity": _with(
        "_MEMO = dict()",
        "memo = (_MEMO,)[0]\nif id(x) in memo:\n    return memo[id(x)]",
        "memo[id(x)] = out",
    ),
    # by the input's address
    "memo of outputs by address": _with(
        "_MEMO = dict()",
        "memo = (_MEMO,)[0]\nif x.data_ptr() in memo:\n    return memo[x.data_ptr()]",
        "memo[x.data_ptr()] = out",
    ),
    # a ring of eight output buffers per shape, filled as calls come
    "a ring of output buffers": _with(
        "_RING = dict()",
        "ring = (_RING,)[0].setdefault(tuple(x.shape), [])",
        "ring.append(out)\nif len(ring) > 8:\n    ring.pop(0)",
    ),
    # only a view of each output kept, or only its storage
    "a view of each output kept": _with(
        "_SEEN = list()", "seen = (_SEEN,)[0]", "seen.append(out.view(-1)[:1])"
    ),
    "each output's storage kept": _with(
        "_SEEN = list()", "seen = (_SEEN,)[0]", "seen.append(out.untyped_storage())"
    ),
}


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return base_task(tmp_path_factory.mktemp("state"))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(KEEPING))
def test_a_kernel_that_keeps_results_between_calls_is_rejected(pool, task, name):
    result = run_harness(pool, task, KEEPING[name], "cpu")
    assert not result.accepted, f"{name}: accepted"
    # a hit without a launch is told as such
    assert result.reason in (
        "stateful",
        "mismatch",
        "shape",
        "no-triton-launch",
        "kernels-unused",
    ), (
        name,
        result.reason,
        result.message,
    )


@pytest.mark.slow
def test_a_kernel_that_keeps_plain_values_between_calls_is_accepted(pool, task):
    """A memo of launch parameters by shape (numbers, not results) is what real launchers do."""
    honest = _with(
        "_BLOCKS = dict()",
        "blocks = (_BLOCKS,)[0]\nblock = blocks.setdefault(x.shape[1], triton.next_power_of_2(x.shape[1]))",
        "",
    )
    result = run_harness(pool, task, honest.replace(LAUNCH, LAUNCH), "cpu")
    assert result.accepted, (result.reason, result.message)
