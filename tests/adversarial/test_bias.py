"""Outputs that lean one way inside the tolerance: every element passes, the whole does not. A
candidate is held to the original's mean error per result (`engine/worker/bias.py`)."""

from __future__ import annotations

import pytest

from kernelbrain.engine.evaluate.verify import verify

from .attacks import STORE, base_task, edit

LEANING = {
    # all outputs 0.005% too large: within fp32's rtol (0.01%) element by element
    "scaled up": edit((STORE, "(e / d * 1.00005).to(out_ptr.dtype.element_ty), mask=mask)")),
    # a constant added, inside the absolute tolerance
    "offset": edit((STORE, "(e / d + 4e-6).to(out_ptr.dtype.element_ty), mask=mask)")),
    # the normaliser shrunk: every output a little high
    "shrunk denominator": edit(
        (STORE, "(e / (d * 0.99995)).to(out_ptr.dtype.element_ty), mask=mask)")
    ),
    # low instead of high
    "scaled down": edit((STORE, "(e / d * 0.99994).to(out_ptr.dtype.element_ty), mask=mask)")),
}


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return base_task(tmp_path_factory.mktemp("bias"))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(LEANING))
def test_outputs_that_lean_inside_the_tolerance_are_rejected(pool, task, name):
    report = verify(pool, task, LEANING[name], "cpu", timing=False)
    assert not report.accepted and report.reason == "bias", (report.reason, report.message)
    assert "leans" in report.message and "original" in report.message


@pytest.mark.slow
def test_a_rounding_that_differs_from_the_originals_is_no_bias(pool, task):
    """The same softmax normalised by a reciprocal (another rounding of every element, no
    direction to it) is accepted."""
    honest = edit((STORE, "(e * (1.0 / d)).to(out_ptr.dtype.element_ty), mask=mask)"))
    report = verify(pool, task, honest, "cpu", timing=False)
    assert report.accepted, report.message
