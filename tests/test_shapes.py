"""Derived test cases keep what the user's inputs show: an index tensor's range and its sentinel
values (an `ignore_index` of -100), sizes tied across arguments, and `requires_grad`."""

from __future__ import annotations

import torch

from kernelbrain.engine.worker import shapes


def targets_with_ignored_rows(n: int = 64, vocab: int = 1000) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    t = torch.randint(0, vocab, (n,), generator=g)
    t[::8] = -100
    return t


def test_perturbed_targets_stay_valid_classes_or_the_ignore_index():
    logits, targets = torch.randn(64, 1000), targets_with_ignored_rows()
    derived = shapes.odd_sizes((logits, targets), [1024], seed=3) + shapes.size_one(
        (logits, targets), seed=3
    )
    assert derived
    for label, (x, t) in derived:
        assert t.shape[0] == x.shape[0], label  # the row count is one symbol: kept consistent
        valid = (t == -100) | ((t >= 0) & (t < x.shape[1]))
        assert bool(valid.all()), (label, t[~valid][:5])
        if t.numel() > 1:
            assert bool((t == -100).any()), label  # the sentinel's path is still exercised


def test_a_range_of_negative_values_is_a_range_not_sentinels():
    offsets = torch.arange(-50, 50)
    big = shapes.resize((offsets,), 100, 300, torch.Generator().manual_seed(1))[0]
    assert big.shape == (300,) and int(big.min()) >= -50 and int(big.max()) < 50
    assert len(torch.unique(big[big < 0])) > shapes.MAX_SENTINELS


def test_requires_grad_survives_every_perturbation():
    x = torch.randn(33, 70, requires_grad=True)
    w = torch.randn(70)
    args = (x, w)
    variants = [v for _, v in shapes.odd_sizes(args, [64], seed=0)]
    variants += [v for _, v in shapes.size_one(args, seed=0)]
    variants += [shapes.non_contiguous(args), shapes.transposed(args)]
    variants += [shapes.scaled(args, kind, 0) for kind in ("large", "small", "mixed", "neg-inf")]
    assert len(variants) > 8
    for v in variants:
        assert v[0].requires_grad and not v[1].requires_grad


def test_dimensions_equal_only_by_chance_change_apart():
    """Batch 2 and 2 KV heads: equal in one case, different in the user's other case, so the
    sweep grows them apart (K never gets more heads than Q by a shared perturbation); sizes the
    other case shows tied (the batch of q and k, the head size) still change together."""

    def case(batch):
        q = torch.randn(batch, 4, 8)  # batch, query heads, head size
        k = torch.randn(batch, 2, 8)  # batch, KV heads, head size
        return (q, k)

    args, other = case(2), case(3)
    variants = shapes.odd_sizes(args, [], seed=0, others=[other])
    variants += shapes.size_one(args, seed=0, others=[other])
    assert variants
    for label, (q, k) in variants:
        assert q.shape[0] == k.shape[0], label  # the batch stays tied
        assert q.shape[2] == k.shape[2], label  # so does the head size
    kv_only = [lab for lab, (q, k) in variants if k.shape[1] != 2 and q.shape[0] == 2]
    batch_only = [lab for lab, (q, k) in variants if q.shape[0] != 2 and k.shape[1] == 2]
    assert kv_only and batch_only
    # Without another case nothing tells them apart: they change together, as before.
    together = shapes.odd_sizes(args, [], seed=0)
    assert all((q.shape[0] == k.shape[1]) for _, (q, k) in together if q.shape[0] != 2)


def test_each_verification_draws_a_size_no_candidate_can_know():
    """Odd (no power of two divides it), past every size the seeded sweep takes and the largest
    block, within the growth bound, and different from one verification to the next."""
    import torch

    from kernelbrain.engine.worker import shapes

    args = (torch.randn(8, 128), torch.randn(128))
    seeded = shapes.odd_sizes(args, [128], 0)
    seeded_widths = {m[0].shape[1] for _, m in seeded}
    seeded_rows = {m[0].shape[0] for _, m in seeded}
    drawn, rows = set(), set()
    for _ in range(40):
        (label, made), (row_label, more_rows) = shapes.unpredictable_sizes(args, [128])
        t = made[0].shape[1]
        assert made[1].shape == (t,) and t % 2 == 1 and t > max(seeded_widths | {128}), label
        assert made[0].numel() + made[1].numel() <= shapes.MAX_GROWTH * (8 * 128 + 128)
        drawn.add(t)
        # the row count too: past every seeded one, the width kept
        r = more_rows[0].shape[0]
        assert more_rows[0].shape[1] == 128 and r % 2 == 1 and r > max(seeded_rows), row_label
        rows.add(r)
    assert len(drawn) > 5 and len(rows) > 2


def test_the_edge_and_precision_variants_keep_the_values():
    """Rows apart in memory (a slice of a wider buffer) and float32 copies of half inputs hold
    the same values; a case without half tensors has no float32 variant."""
    import torch

    from kernelbrain.engine.worker import shapes

    x = torch.randn(4, 33, dtype=torch.float16)
    (apart,) = shapes.padded_rows((x,))
    assert apart.stride() == (36, 1) and torch.equal(apart, x)
    (wide,) = shapes.in_float32((x,))
    assert wide.dtype == torch.float32 and torch.equal(wide, x.float())
    assert shapes.in_float32((x.float(),)) is None


def test_outputs_created_beside_inputs_with_rows_apart_have_room_for_the_inputs_strides():
    """A launcher that creates its output dense (`empty_like` of a view with gaps between rows)
    while its kernel indexes the output with the input's row stride writes past the output's
    end: under the audit such a call's created tensors carry room for the input's whole span,
    so the writes land there (the original is then found wrong on that input and the input left
    out) instead of in the heap of the process that judges. Dense inputs get tensors as asked."""
    from kernelbrain.engine.worker.audit import AuditMode, guard_span

    x = torch.randn(6, 40, dtype=torch.float16)
    (apart,) = shapes.clone_args(shapes.padded_rows((x,)))
    span = guard_span((apart,))
    assert span == apart.untyped_storage().nbytes() // 2 and apart.stride(0) == 43
    with AuditMode(guard_elements=span):
        out = torch.empty_like(apart)
        ones = torch.ones(6, 40, dtype=torch.float32)
    assert out.is_contiguous() and out.shape == apart.shape
    assert out.untyped_storage().nbytes() >= (6 * 40 + span) * 2
    assert torch.equal(ones, torch.ones(6, 40)) and ones.untyped_storage().nbytes() > 6 * 40 * 4
    # what the kernel writes: row r at r * 43, inside the room
    last = (6 - 1) * apart.stride(0) + 40
    assert last * out.element_size() <= out.untyped_storage().nbytes()
    assert guard_span((x,)) == 0
    with AuditMode(guard_elements=guard_span((x,))):
        dense = torch.empty_like(x)
    assert dense.untyped_storage().nbytes() == x.numel() * 2
