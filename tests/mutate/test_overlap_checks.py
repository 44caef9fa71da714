"""The `overlap-checks` mutator."""

from __future__ import annotations

import ast

from .helpers import example, propose


def test_overlap_checks_fork_and_join_around_the_launch_and_refuse_racing_writes():
    """The checks move into a side-stream block opened before them and joined right after the
    launch (so the call returns ordered after them); a check on a tensor the launcher or the
    kernel writes afterwards would race with that write, and is left alone."""
    task, source = example("cross_entropy")
    asserted = propose("host-sync", task, source)[-1].source
    (p,) = propose("overlap-checks", task, asserted)
    body = p.source.split("def cross_entropy(")[1]
    fork, check = body.index("check_stream.wait_stream("), body.index("torch._assert_async(")
    launch, join = body.index("cross_entropy_kernel[("), body.index(".wait_stream(check_stream)")
    assert (
        fork
        < body.index("with torch.cuda.stream(check_stream):")
        < check
        < launch
        < join
        < body.index("return loss")
    )
    assert (
        "check_stream = torch.cuda.Stream(device=target.device, priority=-1) if target.is_cuda else None"
        in body
    )
    ast.parse(p.source)
    clamped = asserted.replace(
        "    loss = torch.empty(", "    target.clamp_(0, n_cols - 1)\n    loss = torch.empty("
    )
    assert propose("overlap-checks", task, clamped) == []
    assert propose("overlap-checks", task, source) == []  # no device-side check to move
    # a check that reads the kernel's output (written while the check would run) is not moved
    reads_output = asserted.replace(
        "    loss = torch.empty(n_rows, dtype=torch.float32, device=logits.device)\n", ""
    )
    reads_output = reads_output.replace(
        "    torch._assert_async(",
        "    loss = torch.empty(n_rows, dtype=torch.float32, "
        "device=logits.device)\n    torch._assert_async(loss.isfinite().all())\n"
        "    torch._assert_async(",
        1,
    )
    assert "loss.isfinite" in reads_output and propose("overlap-checks", task, reads_output) == []
    # the stream follows a tensor argument's device, never a scalar one's
    scalar_first = asserted.replace(
        "def cross_entropy(logits: torch.Tensor, target: torch.Tensor)",
        "def cross_entropy(logits: torch.Tensor, target: torch.Tensor, limit: int = 0)",
    )
    scalar_first = scalar_first.replace("(target.min() < 0)", "(target.min() < limit)")
    only_scalar = scalar_first.replace(
        "(target.max() >= n_cols) | (target.min() < limit)", "limit < 0"
    )
    assert "device=target.device" in propose("overlap-checks", task, scalar_first)[0].source
    assert propose("overlap-checks", task, only_scalar) == []
