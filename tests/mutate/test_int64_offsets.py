"""The `int64-offsets` mutator."""

from __future__ import annotations

from .helpers import example, propose


def test_int64_offsets_only_where_kb104_applies():
    task, source = example("softmax")
    p = propose("int64-offsets", task, source)[0]
    assert "row = tl.program_id(0).to(tl.int64)" in p.source
    assert propose("int64-offsets", task, p.source) == []
    assert propose("int64-offsets", *example("gelu")) == []
