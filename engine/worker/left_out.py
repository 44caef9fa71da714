"""Cases a harness run leaves out, and why, said to the user: never skipped silently.

A made-up input (an odd size of the sweep, a scaled or strided variant) may fall outside what the
reference accepts, or what the original handles; such a case says nothing about a candidate, so
it is left out, counted, and the verdict's notes name how many and the first of each kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Why a case is left out: the reference refuses it, or the original fails it (raises, or is
# further off the reference than the accuracy oracle allows) while the reference accepts it.
REFERENCE, ORIGINAL = "reference", "original"


@dataclass
class LeftOut:
    count: int = 0
    first: dict[str, str] = field(default_factory=dict)  # kind -> the first case and its reason
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str, where: str, why: str) -> None:
        self.count += 1
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.first.setdefault(kind, f"{where}: {(why.splitlines() or [''])[0][:200]}")

    def notes(self) -> list[str]:
        out = []
        if REFERENCE in self.counts:
            out.append(
                f"the reference refuses {self.counts[REFERENCE]} made-up input(s) (first: "
                f"{self.first[REFERENCE]}); they are left out"
            )
        if ORIGINAL in self.counts:
            out.append(
                f"the original fails {self.counts[ORIGINAL]} input(s) that the reference accepts "
                f"(first: {self.first[ORIGINAL]}); they are left out, and candidates are not "
                "held to them"
            )
        return out
