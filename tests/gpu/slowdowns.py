"""Candidates with a known timing relation to the original, for checking the timing verdicts."""

from __future__ import annotations

from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def identical_copy(source: str) -> str:
    """Same code (a comment differs): must time as no significant difference."""
    return source + "\n# an identical copy\n"


def slowed_softmax(source: str) -> str:
    """examples/ops/softmax.py that also runs its kernel on a tenth of the rows into a scratch
    buffer: about 10% more work on the large cases, the output unchanged.

    (Re-reading a row inside the kernel does not work as a slowdown: the row was just read and
    the second read hits L2; measured on the H200, such a copy was not slower.)
    """
    anchor = "    return out\n\n\ndef softmax_ref"
    extra = (
        "    extra = max(1, n_rows // 10)\n"
        "    scratch = torch.empty((extra, n_cols), device=x.device, dtype=x.dtype)\n"
        "    softmax_kernel[(extra,)](scratch, x, x.stride(0), scratch.stride(0), n_cols, BLOCK_SIZE=1024)\n"
    )
    assert anchor in source
    return source.replace(anchor, extra + anchor)


def illegal_address(source: str) -> str:
    """The adversarial softmax storing 2^40 elements past its output: a CUDA illegal address."""
    return source.replace(
        "tl.store(out_ptr + row * n_cols + cols,",
        "tl.store(out_ptr + row * n_cols + cols + (1 << 40),",
    )
