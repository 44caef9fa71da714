"""Results written into arguments are checked (`engine/worker/results.py`): kernels whose
launcher returns nothing and writes `output` tensors, or updates a state in place, are compared
on every argument they write, against a reference that writes its own copies the same way or
returns the values under the task's `outputs`. Wrong variants of each kind are rejected, an
honest one is accepted, and a verification that would compare nothing is a harness error."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelbrain.engine.evaluate.verify import verify
from kernelbrain.engine.task import find_task

CORPUS = Path(__file__).parent / "corpus"
MERGE = ("merge_attn_states.py", "merge_attn_states_kernel")
SSM = ("ssm_state_update.py", "ssm_update_kernel")


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("args") / "ws"
    shutil.copytree(CORPUS, dest, ignore=shutil.ignore_patterns("__pycache__", ".kernelbrain"))
    return dest


def check(pool, ws: Path, which, edit=None, config: str | None = None):
    file, kernel = which
    if config is not None:
        (ws / "kernelbrain.toml").write_text(config)
    source = (ws / file).read_text()
    candidate = source if edit is None else edit(source)
    assert candidate != source or edit is None, "the edit changed nothing"
    return verify(pool, find_task(ws / file, kernel), candidate, "cpu", timing=False)


def replace(old: str, new: str):
    def edit(source: str) -> str:
        assert old in source, old
        return source.replace(old, new, 1)

    return edit


WRONG = {
    "never stores the merged output": (
        MERGE,
        "    tl.store(output + row + offs, merged.to(output.dtype.element_ty), mask=mask)\n",
        "",
        "argument `output`",
    ),
    "drops the suffix's term": (
        MERGE,
        "merged = p * (p_w / total) + s * (s_w / total)",
        "merged = p * (p_w / total)",
        "argument `output`",
    ),
    "never stores the merged log-sum-exp": (
        MERGE,
        "    tl.store(output_lse + head * num_tokens + token, tl.log(total) + top)\n",
        "",
        "argument `output_lse`",
    ),
    "skips the state write-back": (
        SSM,
        "    tl.store(state_ptr + state_offs, state, mask=mask)\n",
        "",
        "argument `state`",
    ),
    "drops the skip connection": (
        SSM,
        "+ skip * x",
        "",
        "argument `out`",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", WRONG)
def test_a_wrong_variant_of_a_result_in_an_argument_is_rejected(pool, ws, kind):
    which, old, new, where = WRONG[kind]
    report = check(pool, ws, which, replace(old, new))
    assert not report.accepted, f"{kind}: accepted ({report.message})"
    assert report.reason in ("mismatch", "nan-output", "unwritten-output"), report.message
    assert where in report.message, report.message


@pytest.mark.slow
@pytest.mark.parametrize("which", [MERGE, SSM], ids=lambda w: w[1])
def test_an_honest_variant_is_accepted_and_every_written_argument_compared(pool, ws, which):
    honest = (
        replace(
            "BLOCK_D=triton.next_power_of_2(head_size),",
            "BLOCK_D=triton.next_power_of_2(head_size), num_warps=2,",
        )
        if which == MERGE
        else replace(
            "block = min(triton.next_power_of_2(dim), 64)",
            "block = min(triton.next_power_of_2(dim), 16)",
        )
    )
    report = check(pool, ws, which, honest)
    assert report.accepted, report.message
    smoke = [c for c in report.cases if c.stage == "smoke"]
    assert smoke and all(c.elements > 0 for c in smoke)
    # Both written arguments count: more elements than the largest of them alone.
    tokens, heads, size = (5, 3, 40) if which == MERGE else (2, 3, 10)
    assert smoke[0].elements > tokens * heads * size


@pytest.mark.slow
def test_a_reference_that_accounts_for_no_written_argument_is_the_harnesss_to_fix(pool, ws):
    """The original writes `out` and `state`; without `outputs`, a reference returning a tuple
    says nothing about which is which: a harness error that names them and the fix."""
    config = (ws / "kernelbrain.toml").read_text()
    try:
        report = check(pool, ws, SSM, config=config.replace('outputs = ["out", "state"]\n', ""))
    finally:
        (ws / "kernelbrain.toml").write_text(config)
    assert not report.accepted and report.reason == "harness-error", report.message
    assert "`state`" in report.message and "outputs = [" in report.message


@pytest.mark.slow
def test_a_verification_that_compares_nothing_fails(pool, ws):
    """A launcher that returns nothing and writes nothing the caller sees, against a reference
    that returns nothing: no element compared, which is never a pass."""
    file = ws / "merge_attn_states.py"
    source = file.read_text()
    try:
        file.write_text(
            source.replace(
                "    merge_attn_states_kernel[(num_tokens, num_heads)](\n        output,\n        output_lse,",
                "    output, output_lse = torch.empty_like(output), torch.empty_like(output_lse)\n"
                "    merge_attn_states_kernel[(num_tokens, num_heads)](\n        output,\n        output_lse,",
            )
        )
        report = check(pool, ws, MERGE)
    finally:
        file.write_text(source)
    assert not report.accepted and report.reason == "harness-error", report.message
    assert "no element" in report.message


def test_init_scaffolds_a_reference_that_writes_what_a_launcher_returning_nothing_writes(tmp_path):
    from kernelbrain.engine.task.scaffold import plan

    for file, kernel, says in [
        (*MERGE, "which returns nothing"),
        ("gelu_bf16.py", "gelu_tanh_kernel", "the expected result"),
    ]:
        shutil.copy(CORPUS / file, tmp_path / file)
        stub = plan(tmp_path / file, kernel).harness_text
        assert says in stub, stub
        compile(stub, file, "exec")
    assert 'outputs = ["out"]' in plan(tmp_path / MERGE[0], MERGE[1]).harness_text
