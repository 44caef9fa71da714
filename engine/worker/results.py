"""Every result of a call, wherever it is written: the returned value and the arguments written.

Serving kernels often return nothing and write into `out`, `lse` or a state tensor they were
handed. What a call's results are is learnt from the original (`OriginalBehaviour.writes`: the
arguments it changes), and what they should hold from the reference run on copies of the same
arguments, which says it in one of three ways:

- it writes its copies the same way (`out.copy_(...)`, `state.mul_(...)`);
- the task's `outputs` names, in order, what it returns: launcher arguments, and `return` for the
  launcher's own returned value (`outputs = ["out", "lse"]`);
- it returns the value of the one argument the original writes (a launcher that returns
  nothing), or of an argument the original returns as its result (`return out`).

An argument the original writes that the reference accounts for in none of these ways is the
harness's to fix; so is a case whose results hold no element: a verification that compares
nothing is never a pass.
"""

from __future__ import annotations

import inspect
from typing import Callable

import torch

from .compare import Results, bitwise_equal, flatten
from .failures import HarnessFailure

RETURNED = "returned value"
RETURN_NAME = "return"  # stands for the launcher's returned value in a task's `outputs`


def argument_key(name: str) -> str:
    return f"argument `{name}`"


def argument_names(fn: Callable, count: int) -> list[str]:
    """The launcher's name for each of `count` positional arguments (`#i` past its named ones,
    or where its signature cannot be read, as for `Function.apply`)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        params = []
    named = [
        p.name
        for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    return [named[i] if i < len(named) else f"#{i}" for i in range(count)]


def changed(args, after) -> set[int]:
    """Indices of the tensor arguments whose bits a call changed."""
    return {
        i
        for i, (a, b) in enumerate(zip(args, after))
        if isinstance(a, torch.Tensor) and not bitwise_equal(a, b)
    }


def returned_arguments(out, args) -> dict[int, str]:
    """Argument index -> the path of the returned leaf that is that argument's storage."""
    by_ptr = {
        a.untyped_storage().data_ptr(): i
        for i, a in enumerate(args)
        if isinstance(a, torch.Tensor) and a.numel() and a.device.type != "meta"
    }
    found: dict[int, str] = {}
    for path, leaf in flatten(out):
        if isinstance(leaf, torch.Tensor) and leaf.numel():
            i = by_ptr.get(leaf.untyped_storage().data_ptr())
            if i is not None:
                found.setdefault(i, path)
    return found


def leaf_at(out, path: str):
    return next(leaf for p, leaf in flatten(out) if p == path)


class ResultNames:
    """How a task names results: the launcher's argument names and the task's `outputs`."""

    def __init__(self, entry: Callable, outputs: list[str] | None):
        self.entry, self.outputs = entry, list(outputs) if outputs else None

    def names(self, count: int) -> list[str]:
        names = argument_names(self.entry, count)
        for name in self.outputs or ():
            if name != RETURN_NAME and name not in names:
                raise HarnessFailure(
                    "harness-error",
                    f"the task's `outputs` names `{name}`, which is not an argument of the "
                    f"entry ({', '.join(names) or 'no named arguments'}; `{RETURN_NAME}` stands "
                    "for its returned value)",
                )
        return names

    def expected(self, ref_out, args, ref_after, writes: set[int], aliases: dict[int, str]):
        """The reference's answer as `Results` over the arguments the original writes
        (`writes`, with `aliases`: those it also returns), plus those `outputs` names."""
        names = self.names(len(args))
        if self.outputs is not None:
            return self._named(ref_out, names)
        results = Results({RETURNED: ref_out})
        by_reference = changed(args, ref_after)
        unexplained = []
        for i in sorted(writes):
            if i in by_reference:
                results[argument_key(names[i])] = ref_after[i]
            elif i in aliases:
                results[argument_key(names[i])] = leaf_at(ref_out, aliases[i])
            else:
                unexplained.append(i)
        if len(unexplained) == 1 and isinstance(ref_out, torch.Tensor) and not aliases:
            # A launcher that returns nothing and writes one argument, and a reference that
            # returns that value: the one reading there is.
            results[argument_key(names[unexplained[0]])] = ref_out
            del results[RETURNED]
        elif unexplained:
            listed = ", ".join(f"`{names[i]}`" for i in unexplained)
            raise HarnessFailure(
                "harness-error",
                f"the original writes {listed}, which the reference neither writes in its own "
                "copies of the arguments nor returns: write them in the reference too, or name "
                f'what it returns in the task, e.g. outputs = ["{names[unexplained[0]]}"] '
                '(add "return" for the launcher\'s own returned value)',
            )
        return results

    def _named(self, ref_out, names: list[str]) -> Results:
        values = list(ref_out) if len(self.outputs) > 1 else [ref_out]
        if len(self.outputs) > 1 and (
            not isinstance(ref_out, (tuple, list)) or len(ref_out) != len(self.outputs)
        ):
            raise HarnessFailure(
                "harness-error",
                f"the task's `outputs` names {len(self.outputs)} results "
                f"({', '.join(self.outputs)}), but the reference returns "
                f"{len(ref_out) if isinstance(ref_out, (tuple, list)) else 'one value'}",
            )
        results = Results()  # the launcher's returned value counts only where `outputs` names it
        for name, value in zip(self.outputs, values):
            results[RETURNED if name == RETURN_NAME else argument_key(name)] = value
        return results

    def of_call(self, out, args_after, expected: Results) -> Results:
        """A call's results under the keys the reference's answer has."""
        names = self.names(len(args_after))
        index = {argument_key(n): i for i, n in enumerate(names)}
        return Results(
            {key: out if key == RETURNED else args_after[index[key]] for key in expected}
        )
