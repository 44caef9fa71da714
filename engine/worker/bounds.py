"""Writes outside what a call was given (worker only; imports torch).

A kernel that writes past its elements changes memory that is not its to change: in a user's
program, the rest of a buffer an input is a slice of (the gaps between the rows of a view), or
whatever the allocator put after an output. The judge gives a call room to do so without
crashing (inputs keep their gaps, `shapes.clone_args`; created tensors get guard room when the
inputs sit apart, `audit.guarded`), so this looks at that room after the call: bytes of an
argument's storage outside its elements, or of a guard, that changed mean the call wrote out of
bounds, whatever its results say. A kernel that writes there only when the room exists earns
nothing by it: the rows apart are the cases that have it."""

from __future__ import annotations

import torch

GUARD_FILL = 0xA5  # what guard room holds until something writes into it


def _bytes(storage: torch.UntypedStorage) -> torch.Tensor:
    return torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)


def _has_room(t: torch.Tensor) -> bool:
    """A tensor whose storage holds bytes that are not its elements (a slice, rows apart)."""
    if t.numel() == 0 or t.device.type == "meta" or 0 in t.stride():
        return False
    return t.untyped_storage().nbytes() > t.numel() * t.element_size()


class Outside:
    """The bytes of each argument's storage outside its elements, as they were before a call."""

    def __init__(self, args) -> None:
        self.tensors = [a for a in args if isinstance(a, torch.Tensor) and a.device.type != "meta"]
        self.kept = [
            (i, a.untyped_storage(), _bytes(a.untyped_storage()).clone())
            for i, a in enumerate(args)
            if isinstance(a, torch.Tensor) and _has_room(a)
        ]

    def changed(self) -> list[int]:
        """Arguments whose storage changed outside the elements of every argument viewing it
        (two arguments may be views of one buffer: each is the call's to write)."""
        out = []
        for i, storage, before in self.kept:
            after = _bytes(storage).clone()
            for view in self.tensors:  # the elements themselves: put back what they held
                if view.untyped_storage().data_ptr() != storage.data_ptr() or 0 in view.stride():
                    continue
                place = (view.storage_offset(), view.size(), view.stride())
                mine = torch.empty(0, dtype=view.dtype, device=view.device)
                theirs = torch.empty(0, dtype=view.dtype, device=view.device)
                mine.set_(after.untyped_storage(), *place).copy_(
                    theirs.set_(before.untyped_storage(), *place)
                )
            if not torch.equal(after, before):
                out.append(i)
        return out


def fill_guard(room: torch.Tensor) -> None:
    room.fill_(GUARD_FILL)


def guard_written(room: torch.Tensor, start: int) -> bool:
    """Whether any byte of `room` from `start` on holds something other than the fill."""
    tail = room[start:]
    return bool(tail.numel()) and not bool((tail == GUARD_FILL).all())
