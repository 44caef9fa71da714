"""The `host-sync` mutator."""

from __future__ import annotations

import pytest

from kernelbrain.engine.evaluate.verify import verify

from .helpers import example, propose


@pytest.mark.slow
def test_host_sync_variants_verify_and_still_catch_a_bad_target(pool):
    """Both rewrites of cross_entropy's `.item()` bounds check verify, and on an out-of-range
    target the merged check still raises the ValueError; the asserted one stops the call too (on
    the CPU at once; on a GPU at the next synchronisation)."""
    import importlib.util

    import torch

    task, source = example("cross_entropy")
    merged, asserted = propose("host-sync", task, source)
    assert "if ((target.max() >= n_cols) | (target.min() < 0)).item():" in merged.source
    assert "torch._assert_async(~((target.max() >= n_cols) | (target.min() < 0))" in asserted.source
    assert (
        "device-side assertion" in asserted.description and "same exception" in merged.description
    )
    for variant, error in ((merged, ValueError), (asserted, RuntimeError)):
        assert verify(pool, task, variant.source, "cpu").accepted
        spec = importlib.util.spec_from_loader("ce_variant", loader=None)
        mod = importlib.util.module_from_spec(spec)
        exec(compile(variant.source, task.file, "exec"), mod.__dict__)
        with pytest.raises(error, match="target index out of range"):
            mod.cross_entropy(torch.randn(2, 8), torch.tensor([3, 8]))


def test_host_sync_refuses_checks_it_cannot_move_to_the_device():
    task, source = example("cross_entropy")
    check = '    if target.max().item() >= n_cols or target.min().item() < 0:\n        raise ValueError("target index out of range")\n'
    assert check in source
    # the body does more than raise: leave it
    assert (
        propose(
            "host-sync",
            task,
            source.replace(
                check, check.replace("        raise", "        print(1)\n        raise")
            ),
        )
        == []
    )
    # no .item(): nothing to move
    assert (
        propose(
            "host-sync",
            task,
            source.replace(check, '    if n_cols > 10**9:\n        raise ValueError("big")\n'),
        )
        == []
    )
    # a sync buried in arithmetic, or a comparison without a sync, cannot become a device expression
    assert (
        propose(
            "host-sync",
            task,
            source.replace("target.max().item() >= n_cols", "target.max().item() + 1 > n_cols"),
        )
        == []
    )
    assert propose("host-sync", task, source.replace("target.min().item() < 0", "n_cols < 0")) == []
    # one sync: only the asserted form (nothing to merge)
    one = propose("host-sync", task, source.replace(" or target.min().item() < 0", ""))
    assert [("_assert_async" in m.source) for m in one] == [True]
