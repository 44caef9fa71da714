"""Run-time half of the policy gate (worker only; imports torch).

`AuditMode` is a TorchDispatchMode active while the entry runs. It
- poisons every tensor the entry allocates with a NaN whose bit pattern is recognisable, so an
  element the kernel never wrote is detected as unwritten rather than passing by luck;
- records the PyTorch ops the entry runs *outside* Triton kernel launches, so a candidate that
  computes its result with PyTorch (a "fallback") is caught;
- on request (`guard_elements`), backs every tensor the entry creates with room past its end,
  so a kernel that indexes its own output with an input's strides writes into that room rather
  than into the process's heap or another tensor (`guarded`).
Kernel launches are found through `KernelInterface.__getitem__`, the one path by which
`kernel[grid](...)` runs (jit, autotune, heuristics, interpreter); the mode is suspended inside.
"""

from __future__ import annotations

import gc
import os
import sys
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..api.op_sets import ALLOCATION_OPS, ALLOWED_OPS, CHECK_OPS, COPY_OPS, FILL_OPS  # noqa: F401
from . import bounds

# Quiet NaNs with a payload no arithmetic produces: an element still holding one was never written.
POISON_BITS = {
    torch.float32: (torch.int32, 0x7FE5A5A5),
    torch.float16: (torch.int16, 0x7E5A),
    torch.bfloat16: (torch.int16, 0x7FDA),
    torch.float64: (torch.int64, 0x7FF8A5A5A5A5A5A5),
}
POISON_INT = {
    torch.int32: -0x5A5A5A5B,
    torch.int64: -0x5A5A5A5A5A5A5A5B,
    torch.int16: -0x5A5B,
    torch.int8: -0x5B,
}

# Tensors a launcher creates: where a kernel's writes land.
CREATION_OPS = ALLOCATION_OPS | (FILL_OPS - {"fill_", "zero_"})
# Room past every guarded tensor beyond the largest argument's span (bytes).
GUARD_BYTES = 4096

_active: list["AuditMode"] = []
recorders: list = []  # dry-run recorders (specialize.Recorder): launches are recorded, not run
_installed = False
_launches = 0  # Triton launches through `kernel[grid](...)` since the hook was installed


def launch_count() -> int:
    return _launches


def _flat(args, kwargs) -> list:
    out: list = []
    stack = list(args) + list((kwargs or {}).values())
    while stack:
        a = stack.pop()
        if isinstance(a, (list, tuple)):
            stack.extend(a)
        else:
            out.append(a)
    return out


def storage_of(t) -> int | None:
    """Where a tensor's memory lives (None for anything else, and for tensors without memory)."""
    if not isinstance(t, torch.Tensor) or t.device.type == "meta" or t.is_sparse:
        return None
    try:
        return t.untyped_storage().data_ptr() or None
    except (RuntimeError, NotImplementedError):
        return None


def _containers(value, found: list) -> list:
    """Every container in a nested output (`compare.flatten`'s kinds), outermost first."""
    if isinstance(value, (tuple, list, dict)):
        found.append(value)
        for item in value.values() if isinstance(value, dict) else value:
            _containers(item, found)
    return found


def held_elsewhere(holder: list, args) -> list[int]:
    """Indices of the output's tensors (`holder[0]`, in `compare.flatten` order) that something
    besides the output itself still holds once the call returned: the tensor object, another
    tensor on its memory, or its storage (a memo of results, a ring of output buffers). Memory
    kept so is overwritten by a later call, or served stale, in the user's program. Arguments'
    memory is the caller's and is left out. Counted from reference counts: the caller holds
    the output only through `holder`."""
    from .compare import flatten

    given = {storage_of(a) for a in args}
    expected: Counter[int] = Counter()  # references the output's own containers hold
    tensors: dict[int, torch.Tensor] = {}
    for container in _containers(holder, []):
        for r in gc.get_referents(container):
            if isinstance(r, torch.Tensor):
                expected[id(r)] += 1
                tensors[id(r)] = r
    r = None  # the loop's name held the last one
    order = [id(x) for _, x in flatten(holder[0])]
    bases: dict[int, set[int]] = {}  # storage -> the tensors the output has on it, views' bases
    for key in tensors:
        where = storage_of(tensors[key])
        bases.setdefault(where, set()).add(key)
        if tensors[key]._base is not None:
            bases[where].add(id(tensors[key]._base))
    held = set()
    for key in list(tensors):
        t = tensors[key]
        where = storage_of(t)
        if where is not None and where not in given and t.numel():
            storage = t.untyped_storage()
            other_tensors = torch._C._storage_Use_Count(storage._cdata) - 1 - len(bases[where])
            storage_holders = sys.getrefcount(storage) - 3  # this name, the call's, its owner
            del storage
            # the containers', `tensors`', this name's and the call's
            object_holders = sys.getrefcount(t) - expected[key] - 3
            base = t._base
            if base is not None and id(base) not in tensors:
                # the view's own link, this name, the call's (a base the output does not hold)
                object_holders += max(0, sys.getrefcount(base) - 3)
            base = None
            if other_tensors > 0 or storage_holders > 0 or object_holders > 0:
                held.add(key)
        del t
    return [i for i, key in enumerate(order) if key in held]


def poison(t: torch.Tensor) -> None:
    if not isinstance(t, torch.Tensor) or t.numel() == 0:
        return
    if t.dtype in POISON_BITS:
        int_dtype, bits = POISON_BITS[t.dtype]
        t.view(int_dtype).fill_(bits)
    elif t.dtype in POISON_INT:
        t.fill_(POISON_INT[t.dtype])


_noise: dict[torch.device, torch.Generator] = {}


def scramble(t: torch.Tensor) -> None:
    """Random finite values where `poison` would put its pattern, from a seed no candidate can
    know (a fixed one let a kernel recognise the judge's allocations by their first values)."""
    if not isinstance(t, torch.Tensor) or t.numel() == 0:
        return
    generator = _noise.get(t.device)
    if generator is None:  # its own: the harness's draws stay as they are
        seed = int.from_bytes(os.urandom(8), "little") >> 1
        generator = _noise[t.device] = torch.Generator(t.device).manual_seed(seed)
    if t.dtype in POISON_BITS:
        t.normal_(generator=generator)
    elif t.dtype in POISON_INT:
        t.random_(-100, 100, generator=generator)


def unwritten(t: torch.Tensor) -> torch.Tensor | None:
    """Mask of elements still holding the poison pattern (None for dtypes without one)."""
    if t.dtype in POISON_BITS:
        int_dtype, bits = POISON_BITS[t.dtype]
        return t.contiguous().view(int_dtype) == bits
    return None


def install_launch_hook() -> None:
    """Suspend every active audit while a Triton kernel launch runs."""
    global _installed
    if _installed:
        return
    from triton.runtime.jit import KernelInterface

    original = KernelInterface.__getitem__

    def __getitem__(self, grid):
        if callable(grid):  # the grid is the launcher's code: audited like the rest of it
            grid = _audited(grid)
        launch = original(self, grid)

        def run(*args, **kwargs):
            global _launches
            _launches += 1
            if recorders:
                recorders[-1].record(self, grid, args, kwargs)
                return None
            for mode in _active:
                mode.suspended += 1
            try:
                return launch(*args, **kwargs)
            finally:
                for mode in _active:
                    mode.suspended -= 1

        return run

    KernelInterface.__getitem__ = __getitem__
    _audit_heuristics()
    _installed = True


def _audited(fn):
    """`fn` with the audits a launch suspended resumed while it runs: code of the candidate's
    that runs inside a launch (a grid function, a heuristic) is audited like its launcher."""

    def call(*args, **kwargs):
        resumed = [mode for mode in _active if mode.suspended > 0]
        for mode in resumed:
            mode.suspended -= 1
        try:
            return fn(*args, **kwargs)
        finally:
            for mode in resumed:
                mode.suspended += 1

    return call


def _audit_heuristics() -> None:
    """`@triton.heuristics` values computed under the audit: a heuristic that computes the
    result in PyTorch (`copy_` of a softmax into the output) and a kernel that does some token
    work on it otherwise pass as the kernel's. Triton's own `Heuristics.run`, each value through
    `_audited`."""
    from triton.runtime.autotuner import Heuristics

    def run(self, *args, **kwargs):
        for name, heuristic in self.values.items():
            kwargs[name] = _audited(heuristic)({**dict(zip(self.arg_names, args)), **kwargs})
        return self.fn.run(*args, **kwargs)

    Heuristics.run = run


def guarded(t: torch.Tensor, elements: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`t` (same values, shape, strides and offset) in a storage with `elements` of its dtype,
    plus GUARD_BYTES, past the end of what it needs, that room filled (`bounds.fill_guard`);
    and the storage's bytes, whose room a call must leave as it is."""
    need = t.untyped_storage().nbytes() + elements * t.element_size() + GUARD_BYTES
    room = torch.empty(need, dtype=torch.uint8, device=t.device)
    bounds.fill_guard(room)
    out = t.new_empty(0).set_(room.untyped_storage(), t.storage_offset(), t.size(), t.stride())
    return out.copy_(t), room


def guard_span(args) -> int:
    """Room (elements) each created tensor needs when a call's inputs sit apart in memory: the
    largest tensor argument's storage, in its elements. An output the launcher creates dense
    (`empty_like` of a view with gaps between its rows) and the kernel indexes with the input's
    row stride reaches that far past its start and no further. 0 when every tensor argument is
    dense (nothing to guard)."""
    tensors = [a for a in args if isinstance(a, torch.Tensor) and a.device.type != "meta"]
    if all(t.is_contiguous() or t.numel() == 0 for t in tensors):
        return 0
    return max(t.untyped_storage().nbytes() // t.element_size() for t in tensors)


# What the tensors an entry allocates hold when it gets them: the poison (an element never
# written is seen), random finite values, or what the allocator hands out (as in the user's
# program). A kernel that recognises the judge's allocations and computes right only then
# differs between the three, and the determinism stage runs one of each.
FILLS = ("poison", "noise", "as-allocated")


class AuditMode(TorchDispatchMode):
    def __init__(
        self, poison_allocations: bool = True, guard_elements: int = 0, fill: str = "poison"
    ):
        """`guard_elements`: room past the end of every tensor the entry creates (`guarded`);
        0 creates them as asked. `fill`: what allocations hold (`FILLS`); `poison_allocations`
        False leaves them as allocated."""
        super().__init__()
        if fill not in FILLS:
            raise ValueError(f"fill is one of {FILLS}, not {fill!r}")
        self.guard_elements = guard_elements
        self.ops: Counter[str] = Counter()
        self.on_tensors: set[str] = (
            set()
        )  # ops called with at least one tensor of one or more dimensions
        self.suspended = 0
        self.poison_allocations = poison_allocations
        self.bytes_written = 0  # by fills and copies outside kernels
        self.guards: list[tuple[torch.Tensor, int]] = []  # (guarded storage, where its room starts)
        self.fill = fill if poison_allocations else "as-allocated"
        # storages the entry's ops created (an output's storage that none of the op's tensor
        # inputs has): what it returns must be among them or be its arguments' (`kept`)
        self.created: set[int] = set()

    def __enter__(self):
        _active.append(self)
        return super().__enter__()

    def __exit__(self, *exc):
        _active.remove(self)
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.suspended:
            return out
        name = func.overloadpacket.__name__
        self.ops[name] += 1
        given = _flat(args, kwargs)
        if any(isinstance(a, torch.Tensor) and a.dim() > 0 for a in given):
            self.on_tensors.add(name)
        if name in FILL_OPS or name in COPY_OPS:
            t = out if isinstance(out, torch.Tensor) else None
            if t is not None:
                self.bytes_written += t.numel() * t.element_size() * (2 if name in COPY_OPS else 1)
        if (
            self.guard_elements
            and name in CREATION_OPS
            and isinstance(out, torch.Tensor)
            and out.device.type != "meta"
        ):
            size = out.untyped_storage().nbytes()
            out, room = guarded(out, self.guard_elements)
            self.guards.append((room, size))
        if name in ALLOCATION_OPS and self.fill != "as-allocated":
            (scramble if self.fill == "noise" else poison)(out)
        inputs = {storage_of(a) for a in given}
        for t in _flat((out,), None):
            where = storage_of(t)
            if where is not None and where not in inputs:
                self.created.add(where)
        return out

    def kept(self, output, args) -> list[int]:
        """Indices of `output`'s tensors (in `compare.flatten` order) whose memory neither an
        op of this call created nor an argument holds: memory kept from before the call."""
        from .compare import flatten

        given = {storage_of(a) for a in args}
        return [
            i
            for i, (_, x) in enumerate(flatten(output))
            if isinstance(x, torch.Tensor)
            and x.numel()
            and storage_of(x) not in self.created | given
        ]

    def guards_written(self) -> int:
        """How many of the tensors the call created had their guard room written."""
        return sum(bounds.guard_written(room, start) for room, start in self.guards)

    @property
    def compute_ops(self) -> set[str]:
        """Ops beyond allocation and views, except comparisons and logic that only ever saw
        scalars (a launcher's checks): every op that reads the inputs themselves is counted."""
        return {
            op
            for op in self.ops
            if op not in ALLOWED_OPS and (op not in CHECK_OPS or op in self.on_tensors)
        }
