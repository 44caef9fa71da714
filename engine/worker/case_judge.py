"""Judging one run of one case: every result of the call (`results.py`) against the reference's
answer, with the original as the accuracy oracle and as the judge of what a made-up case means."""

from __future__ import annotations

from typing import NamedTuple

from ..api.facts import CaseResult
from ..task.spec import Task
from .bias import systematic_bias
from .compare import Mismatch, compare
from .failures import FatalDeviceError, HarnessFailure
from .oracle import ORACLE_SCALES, AccuracyOracle
from .original import OriginalBehaviour
from .results import ResultNames
from .runs import Run


class PreparedCase(NamedTuple):
    """A case as the judge holds it while the candidate runs it: the reference's answer as it
    returned it (`ref_out`) and as it left its copies of the arguments (`ref_after`)."""

    label: str
    args: tuple
    desc: str
    ref_out: object
    ref_after: tuple
    scale: float
    derived: bool = False  # an input the stage made up (an odd size), not one the user wrote


class CaseJudge:
    """Decides a run of the entry under test (`candidate`: a candidate's, else the original
    checking itself) on a prepared case; each decision is appended to `cases`."""

    def __init__(
        self,
        task: Task,
        candidate: bool,
        original: OriginalBehaviour,
        oracle: AccuracyOracle,
        names: ResultNames,
        cases: list[CaseResult],
    ):
        self.rtol, self.atol = task.rtol, task.atol
        self.candidate, self.original, self.oracle, self.names = candidate, original, oracle, names
        self.cases = cases

    def try_original(self, args, expected):
        """The original's results on `args` under the keys of `expected`, or its failure."""
        try:
            run = self.original.learn(args, self.original.run_original(args))
        except FatalDeviceError:
            raise
        except HarnessFailure as f:
            return None, f
        return self.names.of_call(run.output, run.args_after, expected), None

    def expected(self, case: PreparedCase):
        """The reference's answer on a case as `Results` (`results.py`), over the arguments the
        original is known to write by now."""
        return self.names.expected(
            case.ref_out, case.args, case.ref_after, self.original.writes, self.original.returned
        )

    def original_failure(self, case: PreparedCase) -> str | None:
        """How the original fails on a case the reference accepts (raises, or is further off
        than the oracle allows); None when it passes."""
        expected = self.expected(case)
        out, err = self.try_original(case.args, expected)
        if err is not None:
            return err.message
        verdict = compare(out, expected, self.rtol, self.atol, case.scale)
        if verdict.ok or self.oracle.deviation(out, expected, case.scale) is not None:
            return None
        return verdict.message

    def original_disagrees(self, args, expected, scale: float) -> bool:
        """Whether the original's output differs from the reference's in structure (count of
        values, types or shapes) on these inputs."""
        if not self.candidate:
            return True  # the output checked is the original's
        out, err = self.try_original(args, expected)
        if err is not None:
            return False
        verdict = compare(out, expected, self.rtol, self.atol, scale)
        return not verdict.ok and verdict.reason in ("shape", "type")

    def check_run(self, stage: str, case: PreparedCase, run: Run) -> None:
        """Judge one run of a case: every result (`results.py`) against the reference's."""
        label, args, desc, scale = case.label, case.args, case.desc, case.scale
        if run.config:
            desc += f" with autotune config {run.config}"
        original_out = None
        if self.candidate:
            self.original.check(desc, args, run)
        else:
            self.original.learn(args, run)
        expected = self.expected(case)
        out = self.names.of_call(run.output, run.args_after, expected)
        if self.candidate:
            baseline = self.original.baseline(args)
            original_out = self.names.of_call(baseline.output, baseline.args_after, expected)
        result = compare(out, expected, self.rtol, self.atol, scale, check_dtype_of=original_out)
        if result.ok and self.candidate:
            leaning = systematic_bias(out, original_out, expected, self.rtol)
            if leaning is not None:
                result = Mismatch("bias", leaning, result.max_abs_err, result.max_rel_err)
        note = ""
        if not result.ok and result.reason == "mismatch" and not self.candidate:
            result = self.oracle.judge_original(out, expected, scale, stage, label) or result
        elif not result.ok and result.reason == "mismatch":
            orig_out, orig_err = self.try_original(args, expected)
            if orig_err is None:
                result, note = self.oracle.judge_candidate(out, orig_out, expected, scale) or (
                    result,
                    "",
                )
        case = CaseResult(
            stage,
            f"{label}: {desc}",
            result.ok,
            result.reason,
            result.message + note,
            result.max_abs_err,
            result.max_rel_err,
            result.mismatched,
            result.elements,
        )
        self.cases.append(case)
        if (
            not result.ok
            and result.reason in ("shape", "type")
            and self.original_disagrees(args, expected, scale)
        ):
            # The original and the reference return different structures: values may be wrong
            # in either, but a structure they disagree on is the harness's to fix.
            raise HarnessFailure(
                "harness-error",
                f"{stage} stage, {label} ({desc}): the kernel's entry and the harness's "
                f"reference return different outputs ({result.message}): check that the "
                "reference computes what the entry returns",
                case,
            )
        if not result.ok:
            bound = (
                f" (further off the reference than the accuracy oracle allows: "
                f"{ORACLE_SCALES[-1]:g}x the tolerance, or bf16's where that is wider)"
                if not self.candidate and result.reason == "mismatch"
                else ""
            )
            raise HarnessFailure(
                result.reason or "mismatch",
                f"{stage} stage, {label} ({desc}): {result.message}{bound}",
                case,
            )
