"""The `showcase` mutator."""

from __future__ import annotations

import pytest

from kernelbrain.engine.evaluate.verify import verify

from .helpers import MUTATORS, SHOWCASE, example, propose


def test_every_mutator_has_a_showcase():
    assert set(SHOWCASE) == set(MUTATORS)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SHOWCASE))
def test_mutator_output_is_a_verified_variant(pool, name):
    op, _, first = SHOWCASE[name].partition(" after ")
    task, source = example(op)
    if first:
        source = propose(first, task, source)[-1].source
    proposals = propose(name, task, source)
    assert proposals, f"{name} proposed nothing on {SHOWCASE[name]}"
    p = proposals[0]
    assert p.source != source and p.origin == name and len(p.description) > 20
    report = verify(pool, task, p.source, "cpu")
    assert report.accepted, f"{name}: {report.stage}/{report.reason}: {report.message}"
