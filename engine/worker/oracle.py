"""The original as the accuracy oracle.

Where the original deviates from its reference within a documented bound (another summation
order; TF32 in `tl.dot` on fp32 inputs), it stands, the user is told how far and where, and
candidates are held to "no worse than the original"; only a grossly wrong original is refused.
"""

from __future__ import annotations

from typing import NamedTuple

from .compare import compare, mean_magnitude

# The original stands when it matches the reference within one of these multiples of the
# tolerance, or, last, within bf16's tolerance (ORACLE_FLOOR: only wider than 10x for fp32 and
# fp16 outputs); candidates are then held to no worse than it, with CANDIDATE_SLACK (their
# rounding differs from the original's). TF32 in `tl.dot` on fp32 inputs (a 10-bit mantissa,
# three bits more than bf16) lands off an fp32 reference by an absolute error that grows with the
# operands, not with each output value: on the H200 a 33x96 @ 96x70 case was 0.029 off where
# outputs average 7.8 in magnitude, and the elements near zero failed any per-element relative
# bound. The floor's atol is therefore bf16's rtol times the reference's mean magnitude (when
# that is wider than bf16's atol): a dot's rounding error, relative to the output's scale.
ORACLE_SCALES = (2.0, 5.0, 10.0)
ORACLE_FLOOR = (1e-2, 1e-2)  # rtol, atol: bf16's
CANDIDATE_SLACK = 2.0


class Widening(NamedTuple):
    """A tolerance the original may be held to instead of the task's: compare with `rtol`,
    `atol` (None: the dtype's) at `factor` times the stage's scale."""

    rtol: float | None
    atol: float | None
    factor: float
    rank: int
    label: str


class AccuracyOracle:
    """How far the original may be off its reference, at the task's tolerances; and the one note
    a harness run gives about it (the widest deviation seen)."""

    def __init__(self, rtol: float | None, atol: float | None):
        self.rtol, self.atol = rtol, atol
        self.notes: list[str] = []  # what a user should know about the verdict
        self._widest = 0  # 1 + the rank of the widest deviation noted

    def deviation(self, original_out, expected, scale: float) -> Widening | None:
        """The least widening of the tolerance (ORACLE_SCALES, then ORACLE_FLOOR) under which
        the original's output matches the reference's; None when the original matches at
        `scale` already or is further off than all of them (a grossly wrong original)."""
        if compare(original_out, expected, self.rtol, self.atol, scale).ok:
            return None
        for w in self.widenings(expected):
            if compare(original_out, expected, w.rtol, w.atol, scale * w.factor).ok:
                return w
        return None

    def widenings(self, expected) -> list[Widening]:
        """The widenings tried in order on one case: multiples of the task's tolerance, then the
        floor, whose atol follows the case's reference magnitude (ORACLE_FLOOR)."""
        r, a = self.rtol, self.atol
        out = [Widening(r, a, f, i, f"{f:g}x the tolerance") for i, f in enumerate(ORACLE_SCALES)]
        floor_r, floor_a = ORACLE_FLOOR
        floor_a = max(floor_a, floor_r * mean_magnitude(expected))
        out.append(
            Widening(
                floor_r if r is None else max(r * ORACLE_SCALES[-1], floor_r),
                floor_a if a is None else max(a * ORACLE_SCALES[-1], floor_a),
                1.0,
                len(out),
                f"bf16's tolerance (rtol {floor_r:g}, atol {floor_a:.3g}: {floor_r:g} of the "
                "output's mean magnitude where that is wider), as TF32 dots do",
            )
        )
        return out

    def judge_original(self, out, expected, scale: float, stage: str, label: str):
        """The original checking itself, off the reference at the task's tolerance: within the
        oracle's bound (TF32 in `tl.dot` on fp32 inputs, another summation order) it stands, and
        the note says how far; the comparison at that bound, or None beyond every bound."""
        widened = self.deviation(out, expected, scale)
        if widened is None:
            return None
        self.note(stage, label, widened)
        return compare(out, expected, widened.rtol, widened.atol, scale * widened.factor)

    def judge_candidate(self, out, original_out, expected, scale: float):
        """A candidate off the reference: where the original deviates from it too, the bar is
        "no worse than the original": agree with the original, or deviate from the reference by
        no more than CANDIDATE_SLACK times what the original does. (comparison, note) when it
        holds; None when it does not (the original matches the reference, or the candidate is
        further off)."""
        widened = self.deviation(original_out, expected, scale)
        if widened is None:
            return None
        vs_orig = compare(out, original_out, self.rtol, self.atol, scale)
        if vs_orig.ok:
            return vs_orig, " (matches the original, which deviates from the reference here too)"
        slack = scale * widened.factor * CANDIDATE_SLACK
        vs_ref = compare(out, expected, widened.rtol, widened.atol, slack)
        if vs_ref.ok:
            return vs_ref, (
                f" (no worse than the original, which deviates from the reference by up "
                f"to {widened.label} here)"
            )
        return None

    def note(self, stage: str, label: str, widened: Widening) -> None:
        """Say once per harness run how far the original is from its reference, and where."""
        if widened.rank >= self._widest:
            self._widest = widened.rank + 1
            self.notes[:] = [
                f"the original deviates from the reference by up to {widened.label} "
                f"({stage} stage, {label}); candidates are held to no worse than the original "
                "there"
            ]
