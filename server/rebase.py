"""Rebase a variant onto the document as it is now.

A variant is a whole module computed from the source the search saw. If the user has edited the
file since, each changed region of the variant is carried over as long as the lines it replaces
are still there unchanged (like `patch` with no fuzz, tolerant to lines moving). If the user
changed any of those lines — the kernel or its launcher — the variant is stale.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher


@dataclass(frozen=True)
class Rebased:
    text: str | None  # the new document text, or None when stale
    reason: str = ""


def rebase(original: str, variant: str, current: str) -> Rebased:
    if current == original:
        return Rebased(variant)
    a, b, c = (t.splitlines(keepends=True) for t in (original, variant, current))
    mapping: dict[int, int] = {}
    for tag, i1, i2, j1, _ in SequenceMatcher(None, a, c, autojunk=False).get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                mapping[i1 + k] = j1 + k
    out = list(c)
    for tag, i1, i2, j1, j2 in reversed(SequenceMatcher(None, a, b, autojunk=False).get_opcodes()):
        if tag == "equal":
            continue
        if i1 == i2:  # pure insertion: anchor on the line before (or after)
            if i1 - 1 in mapping:
                at = mapping[i1 - 1] + 1
            elif i1 in mapping:
                at = mapping[i1]
            else:
                return Rebased(None, f"the code around line {i1 + 1} changed since the search")
            out[at:at] = b[j1:j2]
            continue
        rows = [mapping.get(k) for k in range(i1, i2)]
        if any(r is None for r in rows) or rows != list(range(rows[0], rows[0] + len(rows))):
            return Rebased(
                None,
                f"lines {i1 + 1}-{i2} (the code this variant rewrites) changed since the search",
            )
        out[rows[0] : rows[-1] + 1] = b[j1:j2]
    return Rebased("".join(out))
