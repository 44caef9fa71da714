"""The end of a search, in the time held back for it: the fastest candidate left unverified
verified, the best polished with the stackable steps
that paid elsewhere, a dispatching variant when different variants win different shapes, and a
final interleaved A/B of the best and its closest rivals."""

from __future__ import annotations

import ast

from ..evaluate.candidate import candidate_id
from ..mutate import MutationContext
from . import selection
from . import shape_dispatch as dispatch
from .node import ORIGINAL, STACKABLE_STEPS, Chain, Fate, Node
from .population import IMPROVEMENT
from .rungs import PRECISE_REP_MS, Ladder, autotune_configs

FINAL_REP_MS = 400.0
FINAL_CONTENDERS = 3  # variants given the final A/B: the best and its closest rivals
# The rungs a forced end-game candidate goes through, whose measured cost per candidate says
# whether it fits in what is left of the budget.
VERIFY_RUNGS = ("compile", "smoke", "quick", "full", "timing")
# Held back on top of the measured means: a generation runs past its stop into the reserve, and
# one candidate's harness may take longer than the mean.
RESERVE_MARGIN = 1.25


class EndGame:
    def __init__(self, ladder: Ladder, mutators: dict):
        self.ladder = ladder
        self.ev, self.pop, self.ledger = ladder.ev, ladder.pop, ladder.ledger
        self.mutators = mutators

    def run(self) -> None:
        self.promote()
        self.polish()
        self.dispatch()
        self.final_ab()

    # -- what it costs ----------------------------------------------------------------------------
    def candidate_s(self, like: list[Node] | None = None) -> float:
        """Wall seconds one more candidate takes through the ladder, as measured so far; for a
        candidate built from `like` (the variants it is made of, whose dry runs are known), times
        the most autotune configurations any of them launches, since the harness checks every
        configuration on every case (a dispatch to an autotuned variant, costed as one
        configuration, ran a 120 s H200 matmul search 7% past its budget)."""
        rungs = VERIFY_RUNGS if self.ev.gpu else VERIFY_RUNGS[:-1]
        per = self.ledger.seconds_per_candidate(rungs) or 0.0
        if not like:
            return per
        configs = max(autotune_configs(n, self.ev.task.kernel) for n in like)
        return per * configs / self.ladder.original_configs

    def final_s(self) -> float:
        """Wall seconds of the final A/B: a precise timing has three groups of runs, the final
        one a group per contender plus two, each longer by FINAL_REP_MS / PRECISE_REP_MS."""
        if not self.ev.gpu:
            return 0.0
        timing = self.ledger.seconds_per_candidate(("timing",)) or 0.0
        return timing * (FINAL_CONTENDERS + 2) / 3 * FINAL_REP_MS / PRECISE_REP_MS

    def fits(self, what: str, like: list[Node] | None = None) -> bool:
        """Whether one more candidate (made of the variants `like`) fits before the budget ends
        with the final A/B still to run; when not, a note says what was left out."""
        need, left = self.candidate_s(like) + self.final_s(), self.ledger.meter.left_s()
        if need <= left:
            return True
        self.ledger.notes.append(
            f"no time left to verify {what} (about {need:.0f} s needed, {left:.0f} s left)"
        )
        return False

    def _cancelled(self) -> bool:
        stop = self.ladder.stopped()
        return stop is not None and stop.cancelled

    # -- promote ----------------------------------------------------------------------------------
    def _timed(self, node: Node) -> float | None:
        """What the generations measured of a candidate short of its verdict: its quick timing
        on a GPU, its estimate on the CPU."""
        return node.quick if self.ev.gpu else self.pop.estimated_speedup(node)

    def promote(self) -> None:
        """The fastest candidate the generations timed but had no time left to verify, when it
        beats the best verified: through the full harness (and precise timing) in the time held
        back. Without it, a 60 s H200 GELU search quick-timed a 4.1x variant and ended with
        nothing verified, its first 27 s spent compiling the harness ahead."""
        if self._cancelled():
            return
        waiting = [
            n for n in self.pop.nodes.values() if n.outcome == Fate.NOT_RUN and self._timed(n)
        ]
        if not waiting:
            return
        node = max(waiting, key=lambda n: (self._timed(n) or 0.0, n.id))
        if (self._timed(node) or 0.0) <= self.pop.best_speedup * (1 + IMPROVEMENT):
            return
        need, left = self.ladder.verify_s(node) + self.final_s(), self.ledger.meter.left_s()
        if need > left:
            self.ledger.notes.append(
                f"no time left to verify the fastest unverified candidate ({node.origin}: about "
                f"{need:.0f} s needed, {left:.0f} s left)"
            )
            return
        self.ladder.emit("rung", f"verifying the fastest candidate left unverified: {node.origin}")
        self.ladder.full([node], force=True)

    # -- polish -----------------------------------------------------------------------------------
    def polish(self) -> None:
        """The best variant with every stackable step it lacks that made some other variant
        faster, applied in turn, then verified and timed like any candidate, so that the dispatch
        and the final A/B can weigh it against the best."""
        if self.pop.best_id is None or self._cancelled():
            return
        best = self.pop.nodes[self.pop.best_id]
        source, chain, description, applied = best.source, best.chain, best.description, []
        for step in sorted((self.pop.proven_steps() & STACKABLE_STEPS) - set(best.chain)):
            try:
                proposal = (
                    next(
                        iter(
                            self.mutators[step].propose(
                                MutationContext(self.ev.task, source, seed=self.ev.seed)
                            )
                        ),
                        None,
                    )
                    if step in self.mutators
                    else None
                )
            except Exception as exc:  # a mutator bug must not end the search
                self.ledger.notes.append(
                    f"mutator {step} failed on the best: {type(exc).__name__}: {exc}"
                )
                continue
            if proposal is not None:
                source, chain = proposal.source, chain.then(step)
                description = f"{description}; then {proposal.description}"
                applied.append(step)
        if not applied or candidate_id(source) in self.pop.nodes:
            return
        if not self.fits(f"the best variant with {', '.join(applied)}", [best]):
            return
        self.ladder.emit(
            "rung", f"the best variant with {', '.join(applied)}, which made other variants faster"
        )
        node = Node(
            candidate_id(source),
            source,
            chain,
            description,
            best.id,
            t=self.ledger.meter.tick().wall_s,
        )
        self.ladder.generation([node], force=True)

    # -- dispatch ---------------------------------------------------------------------------------
    def dispatch(self) -> None:
        """A variant that dispatches per shape bucket to the variants that win there, verified on
        every case like any candidate. The original is one of them, at 1.0 on every case: where
        every variant loses to it (a latency-bound shape, whose draft launches least), the user's
        own code runs there. H200 suite, 120 s: the bf16 matmul's best ran the 128x128x128 case
        5% slower than its draft and attention's the 1x4x128x64 case 8% slower, each search with
        a single winning structure and so no dispatch."""
        ingredients = self.pop.dispatch_ingredients()
        base = self.pop.nodes.get(ORIGINAL)
        if not ingredients or not self.pop.labels or base is None or base.spec is None:
            return
        speedups = {n.id: self.pop.case_speedups(n) for n in ingredients}
        speedups[base.id] = [1.0] * len(self.pop.labels)
        params = self._entry_params()
        choice = dispatch.best_split(base.spec.cases, speedups, params, IMPROVEMENT)
        if choice is None:
            winners = {
                max(speedups, key=lambda k: (speedups[k][i] if len(speedups[k]) > i else 0, k))
                for i in range(len(self.pop.labels))
            }
            best = self.pop.nodes.get(self.pop.best_id or "")
            if len(winners) > 1 and not (best is not None and best.dispatch):
                # (the best dispatching already, a resumed one: nothing to say against it)
                self.ledger.notes.append(
                    "winners differ between cases but no size split beats the best single "
                    f"variant by {IMPROVEMENT:.0%}: no dispatch variant"
                )
            return
        parts = [self.pop.nodes[v] for v in choice.variants]
        task = self.ev.task
        source = dispatch.build(
            [p.source for p in parts], task.kernel, task.entry, choice.feature, choice.thresholds
        )
        if source is None:
            return
        feature = choice.feature.format(*params)
        buckets = "; ".join(
            f"`{p.origin}` where {dispatch.condition(feature, choice.thresholds, i)}"
            for i, p in enumerate(parts)
        )
        node = Node(
            candidate_id(source),
            source,
            Chain((f"dispatch({' | '.join(p.origin for p in parts)})",)),
            f"per shape bucket: {buckets}",
            parts[0].id,
            dispatch=True,
            t=self.ledger.meter.tick().wall_s,
        )
        if node.id in self.pop.nodes:
            return
        stop = self.ladder.stopped()
        if stop is not None and stop.halts_admitted:
            self.ledger.notes.append(
                f"winners differ between shape buckets ({feature} around "
                f"{', '.join(map(str, choice.thresholds))}), but no time was left to verify a "
                "dispatching variant"
            )
            return
        if not self.fits("a dispatching variant", parts):
            return
        self.ladder.emit("rung", "verifying a dispatching variant across shape buckets")
        self.ladder.generation([node], force=True)

    def _entry_params(self) -> list[str]:
        tree = ast.parse(self.ladder.original)
        fn = next(
            (
                n
                for n in tree.body
                if isinstance(n, ast.FunctionDef) and n.name == self.ev.task.entry
            ),
            None,
        )
        return [a.arg for a in fn.args.args] if fn else []

    # -- final A/B --------------------------------------------------------------------------------
    def final_contenders(self) -> list[Node]:
        """The best and its closest measured rivals that were faster than the original, best first,
        however far behind: the best can be an outlier. Timed in one interleaving, two rivals
        cost two groups of runs more."""
        best = self.pop.nodes[self.pop.best_id]  # type: ignore[index]
        others = sorted(
            (
                n
                for n in self.pop.nodes.values()
                if n.verified
                and n.timing is not None
                and n.id != best.id
                and n.timing.verdict in ("faster", "mixed")
            ),
            key=lambda n: (-n.timing.speedup, n.id),
        )  # type: ignore[union-attr]
        return [best] + others[: FINAL_CONTENDERS - 1]

    def final_ab(self) -> None:
        """One longer interleaved A/B of the best and its closest rivals; the best of those stands.
        The best of many precise timings is biased upward."""
        if not self.ev.gpu or self.pop.best_id is None or self._cancelled():
            return
        contenders = self.final_contenders()
        rivals = " and its closest rivals" if len(contenders) > 1 else ""
        self.ladder.emit("rung", f"final interleaved A/B of the best variant{rivals}")
        finals: list[tuple[float, Node]] = []
        with self.ledger.timed("final"):
            timings = self.ev.time_together(contenders, FINAL_REP_MS)
        for node, t in zip(contenders, timings):
            if t is None:
                continue
            node.timing = t
            self.ledger.measurements(node, self.pop.per_case(node))
            if node is contenders[0] or t.verdict in ("faster", "mixed"):
                finals.append((t.speedup, node))
        if not finals:
            return
        speedup, winner = self.simplest_of_tied(finals, contenders[0])
        if winner.id != self.pop.best_id:
            self.pop.best_id = winner.id
            point = self.ledger.verified_at(winner.id)
            self.pop.time_to_best = point.t if point else self.pop.time_to_best
        self.pop.best_speedup = speedup

    def simplest_of_tied(self, finals: list[tuple[float, Node]], first: Node) -> tuple[float, Node]:
        """The fastest in the final A/B, unless a simpler variant is within the noise floor of it
        (`selection.tied_first`). Notes why, once, when the one kept is not `first`, the one
        precise timing had put first."""
        simplicity = self.ladder.simplicity
        ordered = selection.tied_first(
            sorted(finals, key=lambda f: f[1] is not first),
            lambda n: selection.noise_floor(n.timing),
            simplicity,
        )
        speedup, simplest = ordered[0]
        top_speedup, top = max(finals, key=lambda f: (f[0], f[1] is first))
        notes = self.ledger.notes
        if simplest is not top:
            simpler = simplicity(simplest)[:2] < simplicity(top)[:2]
            why = "the simpler change" if simpler else "as simple, estimated faster or first by id"
            notes.append(
                f"final A/B: {simplest.origin} at {speedup:.3f}x is within the noise floor of "
                f"{top.origin} at {top_speedup:.3f}x and {why}, so it is kept"
            )
        if simplest is not first and (
            simplest is top or top is not first
        ):  # else the note above names both
            notes.append(
                f"final A/B: {simplest.origin} at {speedup:.3f}x, kept over {first.origin} at "
                f"{first.timing.speedup:.3f}x, which precise timing had put first"
            )  # type: ignore[union-attr]
        return speedup, simplest
