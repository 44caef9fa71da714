"""The search's candidates and how they score: estimates, quick and precise timings, the best so
far, per-case speedups, and what a dispatching variant could reach."""

from __future__ import annotations

import math

import msgspec

from ..api import facts as m
from ..api.results import CaseValue
from ..api.stats import geomean
from .node import ORIGINAL, Fate, Node, structure

IMPROVEMENT = 0.01  # progress: a best beats the old by 1%; a first best must beat 1.0 by 1%


class Population:
    """Every node of one search, keyed by candidate id, with the original's reference figures
    (`labels`, `baseline_us` measured or estimated, `baseline_est` estimated) they are scored
    against, and the best verified variant so far."""

    def __init__(self, gpu: bool):
        self.gpu = gpu
        self.nodes: dict[str, Node] = {}
        self.labels: list[str] = []
        self.baseline_us: list[float] = []
        self.baseline_est: list[float] = []
        self.roofline: list[str] = []  # the original's place per case, measured (GPU only)
        # torch.compile of the reference per case, µs per mode (GPU, where the lowering ran)
        self.compile_us: list[dict[str, float]] = []
        self.compiler_kernels = ""  # Inductor's kernels of the reference, for the LLM's prompt
        self.compiler_configs: list[dict[str, int]] = []  # what it chose, for the config mutator
        self.best_id: str | None = None
        self.best_speedup = 1.0
        self.time_to_best: float | None = None

    # -- scores ---------------------------------------------------------------------------------
    def estimated_speedup(self, node: Node) -> float | None:
        est, base = node.estimate_us, self.baseline_est
        if est is None or not base or len(est) != len(base):
            return None
        if any(not math.isfinite(v) for v in est):
            return 0.0
        return geomean([b / v for b, v in zip(base, est) if v > 0])

    def score(self, node: Node) -> float | None:
        """The best-fidelity figure a node has: precise timing, quick timing (GPU), estimate."""
        if node.timing is not None:
            return node.timing.speedup
        if self.gpu and node.quick is not None:
            return node.quick
        return self.estimated_speedup(node)

    def per_case(self, node: Node) -> list[CaseValue]:
        timing = node.timing or node.quick_timing
        if timing is not None:
            return [
                CaseValue(
                    c.label,
                    c.baseline_ms * 1000,
                    c.candidate_ms * 1000,
                    c.speedup,
                    c.verdict,
                    c.p_value,
                )
                for c in timing.cases
            ]
        if node.estimate_us is not None and len(node.estimate_us) == len(self.baseline_est):
            labels = self.labels or [f"case {i}" for i in range(len(node.estimate_us))]
            return [
                CaseValue(label, b, v, b / v if v else 0.0)
                for label, b, v in zip(labels, self.baseline_est, node.estimate_us)
            ]
        return []

    def case_speedups(self, node: Node) -> list[float]:
        return [c.speedup for c in self.per_case(node)]

    def rebased(self, t: m.TimingResult) -> m.TimingResult:
        """`t` with its speedups taken against the original's reference times (timed once, before
        the search) instead of the original's runs inside that A/B; the verdicts stay the A/B's.
        Speedups from separate A/Bs rank candidates only if the original times alike in each, and
        one that syncs with the host does not: a candidate's own time is what the A/Bs agree on."""
        ref = dict(zip(self.labels, self.baseline_us))
        cases = []
        for c in t.cases:
            if c.label not in ref or c.baseline_ms <= 0 or c.candidate_ms <= 0:
                return t
            k = ref[c.label] / 1000 / c.baseline_ms
            cases.append(
                msgspec.structs.replace(
                    c,
                    baseline_ms=ref[c.label] / 1000,
                    speedup=c.speedup * k,
                    ci_low=c.ci_low * k,
                    ci_high=c.ci_high * k,
                )
            )
        return msgspec.structs.replace(t, cases=cases, speedup=geomean([c.speedup for c in cases]))

    # -- the best -------------------------------------------------------------------------------
    def consider_best(self, node: Node, t: float) -> bool:
        """Make `node` the best when it scores higher (a measured one only with a verdict of
        faster or mixed); True when it did. The best is the best measured: the 1% margin decides
        only a first best and whether a generation made progress."""
        score = self.score(node)
        if score is None:
            return False
        if self.gpu and node.timing is not None and node.timing.verdict not in ("faster", "mixed"):
            return False
        if (score > self.best_speedup) if self.best_id is not None else (score > 1 + IMPROVEMENT):
            self.best_speedup, self.best_id, self.time_to_best = score, node.id, t
            return True
        return False

    # -- what the generations made ----------------------------------------------------------------
    def dispatch_ingredients(self) -> list[Node]:
        """Per-case figures of one kind only: measured ones on a GPU (an estimate is not
        comparable with a measurement), estimates on the CPU. On a GPU the ingredients include
        candidates only quick-timed: a variant that loses on average may win one shape, and the
        dispatching variant is fully verified and timed as a whole."""
        return [
            n
            for n in self.nodes.values()
            if n.id != ORIGINAL
            and not n.dispatch
            and ((n.timing is not None or n.quick_timing is not None) if self.gpu else n.verified)
            and n.outcome in (Fate.VERIFIED, Fate.STONE, Fate.PRUNED)
        ]

    def per_shape_best(self) -> float:
        """The geomean over cases of the best speedup on each case among the dispatch
        ingredients: what a dispatching variant could reach."""
        n_cases = len(self.labels)
        rows = [
            v for n in self.dispatch_ingredients() if len(v := self.case_speedups(n)) == n_cases
        ]
        if not rows or not n_cases:
            return 0.0
        return geomean([max(max(r[i] for r in rows), 1e-9) for i in range(n_cases)])

    def structure_bests(self) -> dict[tuple[str, ...], float]:
        """The best score of each structure among the variants and stepping stones."""
        bests: dict[tuple[str, ...], float] = {}
        for n in self.nodes.values():
            if n.expandable and n.id != ORIGINAL and (score := self.score(n)) is not None:
                bests[structure(n.chain)] = max(score, bests.get(structure(n.chain), 0.0))
        return bests

    def proven_steps(self) -> set[str]:
        """Rewrites that made a variant faster than its parent, by the search's own scores."""
        proven = set()
        for node in self.nodes.values():
            parent = self.nodes.get(node.parent or "")
            score = self.score(node) if node.expandable else None
            if (
                parent is not None
                and score is not None
                and score > (self.score(parent) or 1.0) * (1 + IMPROVEMENT)
            ):
                proven.add(node.chain.last)
        return proven

    def paid_step(self, node: Node) -> str | None:
        """The source `node` was made from, where that step made it faster on some case by
        IMPROVEMENT (what the `config` walk repeats); else None."""
        before = self.nodes.get(node.parent or "")
        now = self.case_speedups(node)
        if before is None or not now:
            return None
        then = [1.0] * len(now) if before.id == ORIGINAL else self.case_speedups(before)
        paid = len(then) == len(now) and any(a > b * (1 + IMPROVEMENT) for a, b in zip(now, then))
        return before.source if paid else None
