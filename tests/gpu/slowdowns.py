"""Candidates with a known timing relation to the original, for checking the timing verdicts."""

from __future__ import annotations

from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def identical_copy(source: str) -> str:
    """Same code (a comment differs): must time as no significant difference."""
    return source + "\n# an identical copy\n"


def slowed_softmax(source: str) -> str:
    """examples/ops/softmax.py with one extra read of the row on 40% of rows.

    The original moves 4 row-sized units per row (three reads, one write); an extra read on 40%
    of rows adds 0.4 units: about 10% more memory traffic, so about 10% slower.
    """
    anchor = "    row_max = tl.max(m, axis=0)\n"
    extra = (
        "    if row % 5 < 2:\n"
        "        for start in range(0, n_cols, BLOCK_SIZE):\n"
        "            cols = start + tl.arange(0, BLOCK_SIZE)\n"
        "            x = tl.load(x_row + cols, mask=cols < n_cols, other=float(\"-inf\")).to(tl.float32)\n"
        "            m = tl.maximum(m, x)\n"
    )
    assert anchor in source
    return source.replace(anchor, extra + anchor)


def illegal_address(source: str) -> str:
    """The adversarial softmax storing 2^40 elements past its output: a CUDA illegal address."""
    return source.replace("tl.store(out_ptr + row * n_cols + cols,", "tl.store(out_ptr + row * n_cols + cols + (1 << 40),")
