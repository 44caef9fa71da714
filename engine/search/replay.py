"""Replaying a chain of rewrites that won before: the memory's seed for a new search.

A chain such as `single-pass+exp2+config` made the best variant of a similar kernel; applied
step by step to this kernel (each step's first proposal on the result of the one before), it
gives a candidate the first generation can verify at once, instead of the generations the
first search needed to compose it. Each prefix of the chain is a candidate too. A step that
proposes nothing here ends the replay: what was applied so far is still a candidate.
"""

from __future__ import annotations

from ..mutate import Mutation, MutationContext


def replay(chain: str, task, source: str, mutators: dict, seed: int) -> list[Mutation]:
    """Every prefix of `chain` applied to `source`, shortest first: the structural step alone
    can be the one that carries over (the winner's last step, a configuration proposed first
    here, need not be the one that won there)."""
    applied: list[str] = []
    descriptions: list[str] = []
    out: list[Mutation] = []
    for step in (s for s in chain.split("+") if s):
        mutator = mutators.get(step)
        if mutator is None:
            break  # an LLM step or a mutator this search does not run
        try:
            proposal = next(iter(mutator.propose(MutationContext(task, source, seed=seed))), None)
        except Exception:  # a mutator that fails here ends the replay, never the search
            proposal = None
        if proposal is None or proposal.source == source:
            break
        source = proposal.source
        applied.append(step)
        descriptions.append(proposal.description)
        out.append(
            Mutation(
                source,
                "+".join(applied),
                "; then ".join(descriptions)
                + f" (replaying `{chain}`, the chain that made the best variant of a similar kernel)",
            )
        )
    return out
