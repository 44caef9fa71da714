"""The `launcher-cleanup` mutator."""

from __future__ import annotations

from .helpers import example, propose


def test_launcher_cleanup_keeps_zeros_that_atomics_need():
    assert propose("launcher-cleanup", *example("col_sum")) == []
    p = propose("launcher-cleanup", *example("gelu"))[0]
    assert "torch.empty_like(x)" in p.source and "zeros_like" not in p.source
