"""The least time a timed run can take: a claimed time below it is forged.

A candidate's runner times the candidate in the process that imported it, so whatever it reports
could be made up. Two bounds hold whatever it reports: the engine's own clock around the timing
(`verify.held_to_clock`, against an inflated original) and this one, against a deflated
candidate. Every timed run writes its case's outputs (the judge knows their size from the
reference, never from the runner), and writes beyond what the L2 can hold must reach memory
within the timed window (the flush before each run writes back what the previous one left),
at no more than the fill rate the judge measured. Cases whose outputs fit in the L2 have no
floor: nothing sound bounds them. Reads are left out: a correct kernel may skip inputs.
"""

from __future__ import annotations

import msgspec

from ..api import facts as m

# The measured fill rate is one kernel's; a better-written one may write faster. A claimed time
# has to beat the floor at this multiple of that rate to be rejected.
FLOOR_MARGIN = 1.5


class WorkFloor(msgspec.Struct):
    output_bytes: dict[str, int]  # per timing label, from the judge's reference
    l2_bytes: int
    write_gbps: float

    @classmethod
    def of(cls, harness: m.HarnessResult, ceilings: m.Ceilings | None) -> "WorkFloor | None":
        """The floor of a task from its harness result (GPU) and the device's ceilings; None
        when either lacks what it needs."""
        if ceilings is None or ceilings.write_gbps <= 0 or not harness.output_bytes:
            return None
        return cls(dict(harness.output_bytes), ceilings.l2_bytes, ceilings.write_gbps)

    def min_ms(self, label: str) -> float:
        """The least time (ms) a run of case `label` takes; 0 when nothing bounds it."""
        spill = self.output_bytes.get(label, 0) - self.l2_bytes
        if spill <= 0:
            return 0.0
        return spill / (FLOOR_MARGIN * self.write_gbps * 1e6)

    def held(self, result: m.TimingResult) -> m.TimingResult:
        """`result`, rejected as `less-work` when a case's candidate time beats its floor."""
        if result.rejection is not None:
            return result
        for case in result.cases:
            floor = self.min_ms(case.label)
            if case.candidate_ms < floor:
                written = self.output_bytes[case.label] / 1e6
                return msgspec.structs.replace(
                    result,
                    rejection=m.WorkerError(
                        "less-work",
                        f"on {case.label}: the timing claims {case.candidate_ms * 1000:.1f} us a "
                        f"run, but writing the case's {written:.1f} MB of outputs takes at least "
                        f"{floor * 1000:.1f} us on this device: it does less work than the task",
                    ),
                )
        return result


def held_to_floor(answer, floor: WorkFloor | None):
    """A timing answer (one result or several) held to `floor`; anything else as it is."""
    if floor is None:
        return answer
    if isinstance(answer, m.TimingResult):
        return floor.held(answer)
    if isinstance(answer, m.TimingResults):
        return m.TimingResults([floor.held(r) for r in answer.results])
    return answer
