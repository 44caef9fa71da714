"""The original as the oracle. Of accuracy: an original that deviates from its reference within
10x the tolerance (another summation order), or for fp32 outputs within bf16's relative
tolerance (TF32 in `tl.dot`), stands, with a note saying how far and where, and candidates are
held to no worse than it; a grossly wrong original is refused with
how far off it is (`verify` and the search share the verdict: one harness). Of behaviour: what
the original does on a case (PyTorch ops, launches) is learned on that case before a candidate
is blamed for doing the same."""

from __future__ import annotations

import pytest

from kernelbrain.engine.evaluate.pool import WorkerPool
from kernelbrain.engine.evaluate.verify import run_harness, verify
from kernelbrain.engine.task import find_task

from .test_harness_errors import KERNEL, workspace

KERNEL_LINE = "mask=offs < n) * 2"


def scaled(factor: str) -> str:
    """The scale kernel multiplying by `factor` where the reference multiplies by 2."""
    return KERNEL.replace("FACTOR", "2").replace(KERNEL_LINE, f"mask=offs < n) * {factor}")


@pytest.fixture(scope="module")
def pool():
    with WorkerPool() as p:
        yield p


def test_an_original_slightly_off_its_reference_stands_and_bounds_candidates(pool, tmp_path):
    # 3e-4 relative off an fp32 reference (rtol 1e-4): within 5x the tolerance
    ws = workspace(tmp_path, (KERNEL_LINE, "mask=offs < n) * 2.0006"))
    task = find_task(ws / "ops" / "scale.py", "scale_kernel")
    original = run_harness(pool, task, None, "cpu")
    assert original.accepted, original.message
    assert len(original.notes) == 1 and "up to 5x the tolerance" in original.notes[0]
    assert "no worse than the original" in original.notes[0]
    exact = verify(pool, task, scaled("2"), "cpu")
    assert exact.accepted, exact.message  # more accurate than the original: fine
    twice_as_far = verify(pool, task, scaled("2.0012"), "cpu")
    assert twice_as_far.accepted, twice_as_far.message
    assert any("no worse than the original" in c.message for c in twice_as_far.cases)
    ten_times_as_far = verify(pool, task, scaled("2.006"), "cpu")
    assert (ten_times_as_far.accepted, ten_times_as_far.reason) == (False, "mismatch")


def test_an_fp32_original_as_far_off_as_tf32_stands(pool, tmp_path):
    """2e-3 relative off an fp32 reference, as TF32 dots land: beyond 10x fp32's tolerance,
    within bf16's: the original stands and bounds the candidates."""
    ws = workspace(tmp_path, (KERNEL_LINE, "mask=offs < n) * 2.004"))
    task = find_task(ws / "ops" / "scale.py", "scale_kernel")
    original = run_harness(pool, task, None, "cpu")
    assert original.accepted, original.message
    assert "up to bf16's tolerance" in original.notes[0], original.notes
    assert verify(pool, task, scaled("2"), "cpu").accepted
    assert not verify(pool, task, scaled("2.02"), "cpu").accepted  # 10x further off


def test_a_grossly_wrong_original_is_refused_with_how_far_off_it_is(pool, tmp_path):
    ws = workspace(tmp_path, (KERNEL_LINE, "mask=offs < n) * 2.2"))
    task = find_task(ws / "ops" / "scale.py", "scale_kernel")
    original = run_harness(pool, task, None, "cpu")
    assert (original.accepted, original.reason) == (False, "mismatch")
    assert "further off the reference than the accuracy oracle allows" in original.message
    assert original.notes == []


def test_what_the_original_does_is_learned_on_the_case_itself(pool, tmp_path):
    """An original that computes with PyTorch only above a size (here a rescale past 100
    elements) does so on the sweep's larger cases, not on the first small case: a copy of it is
    accepted (its ops are the original's on that case), while a candidate that adds PyTorch
    compute the original never does is still refused."""
    branch = (
        "        return out\n",
        "        if x.numel() > 100:\n            out = out * 1.0\n        return out\n",
    )
    ws = workspace(tmp_path, tuple(s.replace("        ", "    ") for s in branch))
    task = find_task(ws / "ops" / "scale.py", "scale_kernel")
    source = (ws / "ops" / "scale.py").read_text()
    copy = verify(pool, task, source + "\n# a copy\n", "cpu")
    assert copy.accepted, copy.message
    added = source.replace("    return out\n", "    out = out + 0.0\n    return out\n", 1)
    assert added != source
    refused = verify(pool, task, added, "cpu")
    assert (refused.accepted, refused.reason) == (False, "torch-fallback"), refused.message
