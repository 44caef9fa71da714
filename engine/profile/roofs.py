"""Which bandwidth a memory-bound case is held to.

A kernel that reads and writes about as much (an elementwise op, a softmax, a norm) is held to the
device's copy bandwidth, which reads a byte for every byte it writes. A reduction reads much and
writes little (a cross-entropy's loss per row, a column sum), and DRAM serves a read-only stream
faster than a copy (on an H200: 4,535 GB/s read, 4,274 copied). Such a case is held
to the measured read stream (`timing.read_stream_gbps`) instead, so that a reduction is not
flattered by the slower roof.
"""

from __future__ import annotations

from typing import NamedTuple

# A case that reads at least this many times what it writes is a reduction. The suite's cases
# read either 1-3 times what they write (elementwise ops, softmax, norms, matmul, attention) or 250
# times and more (cross-entropy, column sums): any ratio between the two sorts them alike.
READ_STREAM_RATIO = 8


class Roof(NamedTuple):
    name: str  # "copy" | "read stream"
    gbps: float


def bandwidth_roof(nbytes: int, written: int | None, copy_gbps: float, read_gbps: float) -> Roof:
    """The roof of a case that moves `nbytes`, `written` of them written (None: not known, and
    then the copy, as everywhere before the read stream was measured)."""
    if written is not None and read_gbps > 0 and written * READ_STREAM_RATIO <= nbytes - written:
        return Roof("read stream", read_gbps)
    return Roof("copy", copy_gbps)
