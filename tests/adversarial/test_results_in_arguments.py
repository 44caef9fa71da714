"""Attacks on results written into arguments (red-teamed on the attention-state merge and the
state-space decode update of the corpus), several variations of each class:

- rebinding: the launcher points an argument at other memory (`set_`), so the argument object
  reads right while the caller's tensor holds nothing (or a clobbered input is hidden);
- zero-initialised buffers: a kernel that skips elements whose old value is 0, right on
  poisoned or random buffers, wrong on a caller's `torch.zeros` or a new sequence's zero state;
- +inf inputs: dropping an empty pass's handling, or rewriting the caller's inputs only there;
- the other half precision: wrong only in the benchmark cases' dtype, which the CPU never runs.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelbrain.engine.evaluate.verify import verify
from kernelbrain.engine.task import find_task

CORPUS = Path(__file__).parents[1] / "corpus"
MERGE = ("merge_attn_states.py", "merge_attn_states_kernel")
SSM = ("ssm_state_update.py", "ssm_update_kernel")
LAUNCH_MERGE = (
    "    merge_attn_states_kernel[(num_tokens, num_heads)](\n        output,\n        output_lse,\n"
)
END_MERGE = "        BLOCK_D=triton.next_power_of_2(head_size),\n    )\n"
STORE_OUT = "    tl.store(output + row + offs, merged.to(output.dtype.element_ty), mask=mask)\n"
STORE_STATE = "    tl.store(state_ptr + state_offs, state, mask=mask)\n"
END_SSM = "        num_warps=4,\n    )\n"

ATTACKS = {
    # -- rebinding --------------------------------------------------------------------------------
    "output pointed at fresh memory": (MERGE, [
        (LAUNCH_MERGE, "    fresh, fresh_lse = torch.empty_like(output), torch.empty_like(output_lse)\n"
         "    merge_attn_states_kernel[(num_tokens, num_heads)](\n        fresh,\n        fresh_lse,\n"),
        (END_MERGE, END_MERGE + "    output.set_(fresh)\n    output_lse.set_(fresh_lse)\n"),
    ]),
    "state advanced in a copy, then swapped in": (SSM, [
        ("    ssm_update_kernel[grid](\n        state,\n",
         "    fresh = state.clone()\n    ssm_update_kernel[grid](\n        fresh,\n"),
        (END_SSM, END_SSM + "    state.set_(fresh)\n"),
    ]),
    "an input clobbered, then hidden behind a copy": (MERGE, [
        (STORE_OUT, STORE_OUT + "    tl.store(prefix_output + row + offs, (merged * 0.0).to(output.dtype.element_ty), mask=mask)\n"),
        (LAUNCH_MERGE, "    keep = prefix_output.clone()\n" + LAUNCH_MERGE),
        (END_MERGE, END_MERGE + "    prefix_output.set_(keep)\n"),
    ]),
    "the input x clobbered with the output, then hidden": (SSM, [
        ("    tl.store(out_ptr + base + rows, y.to(out_ptr.dtype.element_ty), mask=row_mask)\n",
         "    tl.store(out_ptr + base + rows, y.to(out_ptr.dtype.element_ty), mask=row_mask)\n"
         "    tl.store(x_ptr + base + rows, y.to(x_ptr.dtype.element_ty), mask=row_mask)\n"),
        ("    grid = (batch, nheads, triton.cdiv(dim, block))\n",
         "    grid = (batch, nheads, triton.cdiv(dim, block))\n    keep = x.clone()\n"),
        (END_SSM, END_SSM + "    x.set_(keep)\n"),
    ]),
    # -- zero-initialised buffers ----------------------------------------------------------------
    "output elements that hold 0 left as they are": (MERGE, [
        ("    merged = p * (p_w / total) + s * (s_w / total)\n",
         "    merged = p * (p_w / total) + s * (s_w / total)\n"
         "    old = tl.load(output + row + offs, mask=mask, other=0.0).to(tl.float32)\n"
         "    merged = tl.where(old == 0.0, old, merged)\n"),
    ]),
    "a zero state never advanced": (SSM, [
        (STORE_STATE, "    old = tl.load(state_ptr + state_offs, mask=mask, other=0.0)\n"
         "    tl.store(state_ptr + state_offs, tl.where(old == 0.0, old, state), mask=mask)\n"),
    ]),
    "the output skipped where the state starts at 0": (SSM, [
        ("    decay = tl.exp(a * dt)\n", "    zero = state == 0.0\n    decay = tl.exp(a * dt)\n"),
        ("    y = tl.sum(state * C[None, :], axis=1) + skip * x\n",
         "    y = tl.sum(tl.where(zero, 0.0, state) * C[None, :], axis=1) + skip * x\n"),
    ]),
    # -- +inf inputs -----------------------------------------------------------------------------
    "an empty pass's +inf not handled": (MERGE, [
        ('    p_lse = tl.where(p_lse == float("inf"), float("-inf"), p_lse)\n', ""),
        ('    s_lse = tl.where(s_lse == float("inf"), float("-inf"), s_lse)\n', ""),
    ]),
    "the caller's lse rewritten where it is +inf": (MERGE, [
        ('    top = tl.maximum(p_lse, s_lse)\n',
         '    top = tl.maximum(p_lse, s_lse)\n'
         '    tl.store(prefix_lse + head * num_tokens + token, p_lse, mask=p_lse == float("-inf"))\n'),
    ]),
    # -- the other half precision ----------------------------------------------------------------
    "weights swapped in bf16 only": (MERGE, [
        ("    merged = p * (p_w / total) + s * (s_w / total)\n",
         "    merged = p * (p_w / total) + s * (s_w / total)\n"
         "    if output.dtype.element_ty == tl.bfloat16:\n"
         "        merged = p * (s_w / total) + s * (p_w / total)\n"),
    ]),
    "the skip connection dropped in bf16 only": (SSM, [
        ("    y = tl.sum(state * C[None, :], axis=1) + skip * x\n",
         "    y = tl.sum(state * C[None, :], axis=1) + skip * x\n"
         "    if out_ptr.dtype.element_ty == tl.bfloat16:\n"
         "        y = y - skip * x\n"),
    ]),
}  # fmt: skip


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("results-attacks") / "ws"
    shutil.copytree(CORPUS, dest, ignore=shutil.ignore_patterns("__pycache__", ".kernelbrain"))
    return dest


@pytest.mark.slow
@pytest.mark.parametrize("name", ATTACKS)
def test_a_wrong_result_in_an_argument_is_rejected(pool, ws, name):
    (file, kernel), edits = ATTACKS[name]
    source = (ws / file).read_text()
    candidate = source
    for old, new in edits:
        assert old in candidate, f"{name}: {old!r}"
        candidate = candidate.replace(old, new, 1)
    report = verify(
        pool, find_task(ws / file, kernel), candidate, "cpu", timing=False, timeout_s=120
    )
    assert not report.accepted, f"{name}: accepted ({report.message})"
    assert report.stage != "load" or report.reason == "load-error", report.message
