"""Derive new test cases from a given one (worker only): odd sizes, size-1 dims, strides, scales.

A case is a tuple of entry arguments. Every distinct tensor dimension size is a "symbol"; a
perturbation changes one symbol everywhere it occurs (so `matmul(a[M,K], b[K,N])` keeps K
consistent) and redraws the tensors with the same dtype and kind of values, `requires_grad`
kept. Integer tensors whose values all lie below some dimension size are treated as indices into
it and redrawn in range; a few distinct negative values among them (an `ignore_index` of -100)
are sentinels, kept.
"""

from __future__ import annotations

import inspect
import math
import random

import torch

MAX_GROWTH = 4  # a perturbed case may hold at most this many times the elements of its source
_OS_RANDOM = random.SystemRandom()  # sizes no seed predicts (`unpredictable_size`)


def _is_prime(n: int) -> bool:
    return n >= 2 and all(n % p for p in range(2, int(math.isqrt(n)) + 1))


def next_prime(n: int) -> int:
    n = max(n, 2)
    while not _is_prime(n):
        n += 1
    return n


def symbols(args) -> list[int]:
    """Distinct dimension sizes (> 1) of the tensor arguments, largest first."""
    sizes = {d for a in args if isinstance(a, torch.Tensor) for d in a.shape if d > 1}
    return sorted(sizes, reverse=True)


# Negative values an integer tensor holds at most this many distinct of are sentinels (an
# `ignore_index` of -100, a padding id of -1), kept as they are; more are a value range.
MAX_SENTINELS = 2


def _sentinels(t: torch.Tensor) -> tuple[int, ...]:
    """The negative values of an integer tensor that stand for something (see MAX_SENTINELS)."""
    if t.dtype.is_floating_point or t.dtype == torch.bool or t.numel() == 0:
        return ()
    negative = torch.unique(t[t < 0]).tolist()
    return tuple(int(v) for v in negative) if 0 < len(negative) <= MAX_SENTINELS else ()


def _marked(t: torch.Tensor, sentinels: tuple[int, ...]) -> torch.Tensor:
    return torch.isin(t, torch.tensor(sentinels, dtype=t.dtype, device=t.device))


def _index_bound(t: torch.Tensor, sizes: list[int]) -> int | None:
    """The dimension size an integer tensor indexes into, if its values (sentinels aside) say so."""
    if t.dtype.is_floating_point or t.dtype == torch.bool or t.numel() == 0:
        return None
    values = t[~_marked(t, _sentinels(t))]
    if values.numel() == 0:
        return None
    lo, hi = int(values.min()), int(values.max())
    if lo < 0:
        return None
    fits = [s for s in sizes if hi < s]
    return min(fits) if fits else None


def _redraw(
    t: torch.Tensor, shape: tuple[int, ...], bound: int | None, generator: torch.Generator
) -> torch.Tensor:
    """A new tensor of `shape` with the values `t` shows: floats drawn alike, booleans, indices
    below `bound`, other integers in `t`'s range; sentinels (`_sentinels`) kept at about the
    share of elements they hold in `t` (at least one where `t` has one and there is room); its
    `requires_grad` kept."""
    if t.dtype.is_floating_point:
        x = torch.randn(shape, generator=generator, dtype=torch.float32)
        return x.to(device=t.device, dtype=t.dtype).requires_grad_(t.requires_grad)
    if t.dtype == torch.bool:
        return (torch.rand(shape, generator=generator) > 0.5).to(t.device)
    sentinels = _sentinels(t)
    marked = _marked(t, sentinels)
    values = t[~marked]
    if bound is not None:
        lo, hi = 0, max(bound, 1)
    elif values.numel():
        lo, hi = int(values.min()), int(values.max()) + 1
    else:
        lo, hi = 0, 2
    out = torch.randint(lo, max(hi, lo + 1), shape, generator=generator, dtype=t.dtype)
    if sentinels and out.numel() > 1:
        share = float(marked.float().mean())
        where = torch.rand(shape, generator=generator) < share
        where.view(-1)[0] = True  # at least one, so the sentinel's path is exercised
        choice = torch.randint(0, len(sentinels), shape, generator=generator)
        out = torch.where(where, torch.tensor(sentinels, dtype=t.dtype)[choice], out)
    return out.to(t.device)


Position = tuple[int, int]  # (argument, dimension); dimension -1 for an integer argument


def positions(args, size: int) -> set[Position]:
    """Where `size` occurs in a case: tensor dimensions, and integer arguments equal to it."""
    found: set[Position] = set()
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            found |= {(i, d) for d, n in enumerate(a.shape) if n == size}
        elif isinstance(a, int) and not isinstance(a, bool) and a == size:
            found.add((i, -1))
    return found


def _size_at(args, where: Position) -> int | None:
    i, d = where
    if i >= len(args):
        return None
    a = args[i]
    if d == -1:
        return a if isinstance(a, int) and not isinstance(a, bool) else None
    return a.shape[d] if isinstance(a, torch.Tensor) and d < a.dim() else None


def ties(args, size: int, others=()) -> list[set[Position]]:
    """The places `size` occurs in a case, grouped by whether the user's other cases (`others`)
    show them tied: two dimensions equal in this case but different in another (a batch of 2 and
    2 KV heads) are equal by chance and change apart; without other cases all stay tied."""
    groups: dict[tuple, set[Position]] = {}
    comparable = [o for o in others if len(o) == len(args)]
    for where in sorted(positions(args, size)):
        key = tuple(_size_at(o, where) for o in comparable)
        groups.setdefault(key, set()).add(where)
    return list(groups.values())


def resize(
    args, old: int, new: int, generator: torch.Generator, where: set[Position] | None = None
):
    """A copy of `args` with the dimensions of size `old` (those in `where`, or all) changed to
    `new`, tensors redrawn; an index tensor into a resized dimension stays inside it."""
    where = positions(args, old) if where is None else where
    sizes = symbols(args)
    out = []
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            bound = _index_bound(a, sizes)
            # Indices into the resized size stay inside it when it shrinks or grows.
            new_bound = (new if bound == old else bound) if bound is not None else None
            shape = tuple(new if (i, d) in where else n for d, n in enumerate(a.shape))
            out.append(_redraw(a, shape, new_bound, generator))
        elif (i, -1) in where:
            out.append(new)
        else:
            out.append(a)
    return tuple(out)


def _numel(args) -> int:
    return sum(a.numel() for a in args if isinstance(a, torch.Tensor))


def _label(s: int, t: int, where: set[Position], split: bool) -> str:
    if not split:
        return f"{s}->{t}"
    places = ", ".join(f"arg {i}" + (f" dim {d}" if d >= 0 else "") for i, d in sorted(where))
    return f"{s}->{t} at {places}"


def odd_sizes(args, blocks: list[int], seed: int, limit: int = 12, others=()):
    """Sizes around block boundaries (B-1, B+1), next primes and a single row, one symbol (one
    group of tied places, `ties`) at a time."""
    g = torch.Generator().manual_seed(seed)
    base = _numel(args)
    first_dim = next(
        (a.shape[0] for a in args if isinstance(a, torch.Tensor) and a.dim() >= 2), None
    )
    cases = []
    for s in symbols(args):
        targets = {s - 1, s + 1, next_prime(s + 2)}
        targets |= {b + d for b in blocks if s / 4 <= b <= 4 * s for d in (-1, 1)}
        if s == first_dim:
            targets.add(1)
        groups = ties(args, s, others)
        for where in groups:
            for t in sorted(t for t in targets if t >= 1 and t != s):
                if base and _numel(resize_shapes_only(args, s, t, where)) > MAX_GROWTH * base:
                    continue
                cases.append((_label(s, t, where, len(groups) > 1), resize(args, s, t, g, where)))
    return cases[:limit]


def unpredictable_sizes(args, blocks: list[int], others=()):
    """Sizes per verification that no candidate can know in advance: for the largest size of
    the case and for the smallest (the rows of a row-wise kernel), an odd number (so not a
    multiple of any power of two, up to the largest block the launches use) drawn from the OS's
    randomness, above every size the seeded sweep takes (and, for the largest, the largest
    block), within MAX_GROWTH of the case's elements. A kernel that misbehaves only past some
    width or row count, or only on sizes the seeded ones never take, meets it on a verification
    with a chance every time."""
    sizes = symbols(args)
    if not sizes:
        return []
    base = _numel(args)
    made = []
    extremes = [(max(sizes), True)] + ([(min(sizes), False)] if min(sizes) < max(sizes) else [])
    for s, past_blocks in extremes:
        # past every size the seeded sweep takes (s + 1, the next prime, a block + 1)
        lo = max(next_prime(s + 2), max(blocks, default=0) + 1 if past_blocks else 0) + 1
        hi = min(2 * lo + 1, MAX_GROWTH * s)  # elements grow about as the size does
        if hi <= lo:
            continue
        t = _OS_RANDOM.randrange(lo, hi + 1) | 1
        where = ties(args, s, others)[0]
        if base and _numel(resize_shapes_only(args, s, t, where)) > MAX_GROWTH * base:
            continue
        g = torch.Generator().manual_seed(t)
        made.append((f"{s}->{t} (drawn for this verification)", resize(args, s, t, g, where)))
    return made


def resize_shapes_only(args, old: int, new: int, where: set[Position] | None = None):
    """Shapes after a resize, without allocating (meta tensors)."""
    where = positions(args, old) if where is None else where
    return tuple(
        torch.empty(
            tuple(new if (i, d) in where else n for d, n in enumerate(a.shape)), device="meta"
        )
        if isinstance(a, torch.Tensor)
        else a
        for i, a in enumerate(args)
    )


def size_one(args, seed: int, others=()):
    """Each symbol (each group of tied places, `ties`) set to 1 in turn (size-1 dimensions)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for s in symbols(args):
        groups = ties(args, s, others)
        for where in groups:
            out.append((_label(s, 1, where, len(groups) > 1), resize(args, s, 1, g, where)))
    return out


def non_contiguous(args):
    """The same values with non-unit inner strides: each 2-D+ float tensor read through a strided view."""
    out, changed = [], False
    for a in args:
        if isinstance(a, torch.Tensor) and a.dim() >= 2 and a.is_floating_point():
            wide = torch.empty(*a.shape[:-1], 2 * a.shape[-1], dtype=a.dtype, device=a.device)
            wide[..., ::2].copy_(a.detach())
            out.append(wide.requires_grad_(a.requires_grad)[..., ::2])
            changed = True
        else:
            out.append(a)
    return tuple(out) if changed else None


def padded_rows(args):
    """The same values in rows that sit apart in memory (a slice of a wider buffer, as
    `qkv[:, :d]`): unit inner stride, a row stride past the row's length, for 2-D+ float
    tensors. A kernel that takes the row length for the row stride reads the gaps."""
    out, changed = [], False
    for a in args:
        if isinstance(a, torch.Tensor) and a.dim() >= 2 and a.is_floating_point():
            wide = torch.empty(*a.shape[:-1], a.shape[-1] + 3, dtype=a.dtype, device=a.device)
            wide[..., : a.shape[-1]].copy_(a.detach())
            out.append(wide.requires_grad_(a.requires_grad)[..., : a.shape[-1]])
            changed = True
        else:
            out.append(a)
    return tuple(out) if changed else None


def transposed(args):
    """The same values in column-major layout (transposed storage) for 2-D float tensors."""
    out, changed = [], False
    for a in args:
        if (
            isinstance(a, torch.Tensor)
            and a.dim() == 2
            and a.is_floating_point()
            and a.shape[0] > 1
            and a.shape[1] > 1
        ):
            out.append(a.t().contiguous().t())
            changed = True
        else:
            out.append(a)
    return tuple(out) if changed else None


def scaled(args, kind: str, seed: int):
    """Numerical-stability variants of the floating-point arguments."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for a in args:
        if not (isinstance(a, torch.Tensor) and a.is_floating_point()):
            out.append(a)
            continue
        x = a.detach().float().cpu()
        if kind == "large":
            x = x * 100.0
        elif kind == "small":
            x = x * 1e-4
        elif kind == "mixed":
            x = x * torch.pow(10.0, torch.empty(x.shape).uniform_(-3, 3, generator=g))
        elif kind in ("neg-inf", "pos-inf"):
            mask = torch.rand(x.shape, generator=g) < 0.02
            inf = float("-inf") if kind == "neg-inf" else float("inf")
            x = torch.where(mask, torch.full_like(x, inf), x)
        out.append(x.to(device=a.device, dtype=a.dtype).requires_grad_(a.requires_grad))
    return tuple(out)


def clone_args(args):
    """Copies of a case's arguments; one tensor passed twice stays one tensor. A strided view
    comes back dense (`Tensor.clone`): an original that assumes its inputs contiguous writes out
    of bounds on a truly strided one, which kills the worker (the interpreter's heap) or the CUDA
    context, so the edge stage's strided inputs reach the entry as dense copies. Rows apart in
    memory (unit inner stride, a row stride past the row: `padded_rows`) stay apart: a kernel
    that takes the row length for the row stride reads short of the gaps, never past the copy,
    and one that indexes the dense output its launcher creates with the input's row stride
    writes into the room the audit gives created tensors (`audit.guarded`)."""
    seen: dict[int, torch.Tensor] = {}
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            if id(a) not in seen:
                seen[id(a)] = _copy(a)
            out.append(seen[id(a)])
        else:
            out.append(a)
    return tuple(out)


def _rows_apart(t: torch.Tensor) -> bool:
    """Row-major with gaps: unit inner stride, each outer stride at least the extent inside it."""
    if t.dim() < 2 or t.stride(-1) != 1 or t.is_contiguous() or t.requires_grad:
        return False
    return all(t.stride(d) >= t.size(d + 1) * t.stride(d + 1) for d in range(t.dim() - 1))


def _copy(t: torch.Tensor) -> torch.Tensor:
    if not _rows_apart(t):
        return t.clone()
    copy = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=t.device)
    return copy.copy_(t)


def zeroed(args, which: list[int]):
    """The case with the arguments `which` (those the original writes: outputs, a state) all
    zeros, as a caller's fresh buffers and a new sequence's state start."""
    return tuple(
        torch.zeros_like(a).requires_grad_(a.requires_grad)
        if i in which and isinstance(a, torch.Tensor)
        else a
        for i, a in enumerate(args)
    )


HALF_SWAP = {torch.float16: torch.bfloat16, torch.bfloat16: torch.float16}


def other_half_precision(args):
    """The case with fp16 tensors as bf16 and bf16 as fp16 (None when it holds neither): a
    small case in the benchmark cases' dtype, which off a GPU are never run themselves."""
    if not any(isinstance(a, torch.Tensor) and a.dtype in HALF_SWAP for a in args):
        return None
    return tuple(
        a.detach().to(HALF_SWAP[a.dtype]).requires_grad_(a.requires_grad)
        if isinstance(a, torch.Tensor) and a.dtype in HALF_SWAP
        else a
        for a in args
    )


def other_floats(args, entry=None):
    """The case with each float argument moved far from its value (None when it has none): a
    harness passes one `eps`, one scale, one temperature, and a kernel that ignores the
    caller's value for a literal of its own matches on every case otherwise. `4x + 0.5` takes
    an epsilon of 1e-6 to about the mean square of unit inputs, where leaving it out shows.
    The parameters of `entry` after the case's that have defaults (an `eps: float = 1e-6` no
    harness passes) are passed too, where one of them is a float."""
    args = tuple(args) + _trailing_defaults(entry, len(args))
    if not any(type(a) is float for a in args):
        return None
    return tuple(a * 4.0 + 0.5 if type(a) is float else a for a in args)


def _trailing_defaults(entry, given: int) -> tuple:
    """The defaults of `entry`'s positional parameters after the first `given`, up to the last
    float among them (none where one has no default or the signature cannot be read)."""
    if entry is None:
        return ()
    try:
        params = list(inspect.signature(entry).parameters.values())[given:]
    except (TypeError, ValueError):
        return ()
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    values = []
    for p in params:
        if p.kind not in kinds or p.default is inspect.Parameter.empty:
            break
        values.append(p.default)
    while values and type(values[-1]) is not float:
        values.pop()
    return tuple(values)


def in_float32(args):
    """The case with its half-precision tensors in float32 (None when it holds none): the
    precision a half-precision benchmark never shows, where a kernel that skips a stabilising
    step (the row max of a softmax) overflows first."""
    if not any(isinstance(a, torch.Tensor) and a.dtype in HALF_SWAP for a in args):
        return None
    return tuple(
        a.detach().float().requires_grad_(a.requires_grad)
        if isinstance(a, torch.Tensor) and a.dtype in HALF_SWAP
        else a
        for a in args
    )


def describe(args) -> str:
    parts = []
    for a in args:
        if isinstance(a, torch.Tensor):
            dt = str(a.dtype).replace("torch.", "")
            parts.append(
                f"{dt}[{'x'.join(map(str, a.shape))}]" + ("" if a.is_contiguous() else " strided")
            )
        else:
            parts.append(repr(a))
    return ", ".join(parts)


def case_labels(task, cases) -> list[str]:
    """The names of the benchmark cases in timings and reports: the task's `shapes` when it
    names every case, else each case described. The judge keys what it knows of a case (its
    outputs' bytes) by the same names."""
    if task.shapes and len(task.shapes) == len(cases):
        return list(task.shapes)
    return [describe(c) for c in cases]
