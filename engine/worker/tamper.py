"""Whether a candidate changed the process it runs in (worker only; imports torch and triton).

Why: a runner imports every candidate of a search and times each against the original in the
same process. A candidate that, at import or on some later call, replaces a PyTorch allocation
function, Triton's launcher, the original's globals, a Triton knob or PyTorch's global modes
changes what the *original* does when it is timed next, and earns a speedup its kernel never
made. The gate refuses the ways to do that it can see; this is the check that still holds when
the gate is bypassed by Python: a fingerprint of what the runner's timing and the original rely
on, taken before a candidate is imported and compared after the requests that end a step (a
timing, a compile, a failed import, the judge's last word on a candidate:
`process._checks_process`).
A changed fingerprint rejects the candidate as `tampered` and the runner exits (the next request
gets a fresh one), so nothing it changed reaches another timing or candidate.

What it watches (by identity, not by value: replacing an object is what a patch does):
- the callables and classes of PyTorch, Triton, this package and the standard modules the timing
  uses, each function's code and defaults, and the methods of the classes those modules define;
- every module of the workspace (the original, its reference and helpers), and the Triton
  kernels they hold (their hooks, launchers and functions);
- Triton's knobs (launch hooks, cache and compilation settings) and the process environment;
- PyTorch's global modes (grad, default dtype, TF32 and cuDNN flags, determinism, anomaly
  detection, threads, matmul precision, function and dispatch modes, the current CUDA stream),
  the interpreter's profile and trace hooks, the Python threads alive and the processes started;
- the named constants of this package (upper-case names: the judge's tolerances and scales) by
  value, and the source each Triton kernel compiles from.

What it does not: native code (a `ctypes` write into a library's memory) changes no Python
object. The sandbox keeps a candidate from loading its own native code, and the judge's checks
of timed outputs still hold; process-separated timing closes the rest (README).
"""

from __future__ import annotations

import functools
import gc
import operator
import os
import sys
import threading
import types
from typing import Callable

import torch
import triton

PACKAGE = __name__.split(".")[0]
# Modules whose callables the timing, the audit and the original's launches go through.
WATCHED_PREFIXES = (
    "torch",
    "triton",
    PACKAGE,
    "builtins",
    "math",
    "operator",
    "functools",
    "itertools",
    "time",
    "threading",
    "random",
    "sys",
    "gc",
    "numpy",
)
# Modules that change in an honest run: caches PyTorch and Triton fill on first use, and modules
# created per compiled kernel. (Triton's interpreter swaps `triton.language`'s builtins for its
# own while a kernel runs; the CPU worker has it undo every swap when the launch ends,
# `interpreter_compat`, so `triton.language` is watched there too.)
NATURAL_PREFIXES = (
    "torch._dynamo",
    "torch._inductor",
    "torch.fx.experimental.symbolic_shapes",
    "triton.runtime.cache",
    "triton._C",
    "__triton_launcher",
)


def _state() -> dict[str, object]:
    """PyTorch's and the interpreter's global modes: each one changes how the original runs."""
    from torch.overrides import _get_current_function_mode_stack
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    state: dict[str, object] = {
        "grad enabled": torch.is_grad_enabled(),
        "inference mode": torch.is_inference_mode_enabled(),
        "default dtype": torch.get_default_dtype(),
        "matmul TF32": torch.backends.cuda.matmul.allow_tf32,
        "matmul reduced-precision fp16": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
        "cuDNN enabled": torch.backends.cudnn.enabled,
        "cuDNN TF32": torch.backends.cudnn.allow_tf32,
        "cuDNN benchmark": torch.backends.cudnn.benchmark,
        "deterministic algorithms": torch.are_deterministic_algorithms_enabled(),
        "anomaly detection": torch.is_anomaly_enabled(),
        "threads": torch.get_num_threads(),
        "float32 matmul precision": torch.get_float32_matmul_precision(),
        "function modes": [type(m).__qualname__ for m in _get_current_function_mode_stack()],
        "dispatch modes": [type(m).__qualname__ for m in _get_current_dispatch_mode_stack()],
        "profile hook": id(sys.getprofile()),
        "trace hook": id(sys.gettrace()),
        "switch interval": sys.getswitchinterval(),
        "import hooks": [id(h) for h in (*sys.meta_path, *sys.path_hooks)],
        "gc callbacks": [id(c) for c in gc.callbacks],
    }
    if torch.cuda.is_initialized():
        state["CUDA device"] = torch.cuda.current_device()
        state["CUDA stream"] = torch.cuda.current_stream().cuda_stream
        state["CUDA sync debug mode"] = torch.cuda.get_sync_debug_mode()
    return state


def _threads() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.ident is not None}


PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER = 4, 36  # <linux/prctl.h>


def guard_process() -> None:
    """Two settings of the runner's own (Linux), so that a process a candidate starts stays in
    view and out of the runner's memory: a child subreaper (a process its children orphan, by a
    double fork or `setsid`, becomes its child, which `_children` lists), and not dumpable (no
    other process of the sandbox opens its memory through `/proc/PID/mem`: the sandbox drops the
    capability that would allow it). Elsewhere, nothing."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl: the sandbox's process limit still holds
        pass


def _children() -> set[int]:
    """The processes this one started, or inherited as their subreaper, that still run (each
    thread's `children` list); exited ones are reaped, not counted."""
    found: set[int] = set()
    try:
        for task in os.scandir("/proc/self/task"):
            with open(f"{task.path}/children", encoding="ascii") as listing:
                found |= {int(pid) for pid in listing.read().split()}
    except OSError:  # no /proc (not Linux): the sandbox's process limit still holds
        return found
    for pid in list(found):
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
                state = stat.read().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            state = "Z"
        if state in ("Z", "X"):
            found.discard(pid)
            try:
                os.waitpid(pid, os.WNOHANG)  # an orphan it inherited: reaped here
            except ChildProcessError:
                pass
    return found


def _callable_ids(owner: str, items: list, out: dict[str, object]) -> None:
    for key, value in items:
        kind = type(value)  # never `value.__class__`: a deprecated alias warns when asked
        if issubclass(kind, (types.ModuleType, type)) or callable(value):
            out[f"{owner}.{key}"] = id(value)
            if kind is types.FunctionType:
                out[f"{owner}.{key}()"] = (
                    id(value.__code__),
                    id(value.__defaults__),
                    id(value.__kwdefaults__),
                )
        elif issubclass(kind, (classmethod, staticmethod, property)):
            out[f"{owner}.{key}"] = id(value)


SCALARS = (int, float, complex, str, bytes, bool, type(None))


def _constants(owner: str, namespace: dict, out: dict[str, object]) -> None:
    """Named constants (`STALE_SCALE`, `BLOCK`: upper-case names holding numbers, strings or
    tuples of them) by what they read as now, not by the object: a constant rebound, or written
    in place through memory, reads differently."""
    for key, value in list(namespace.items()):
        if not key.isupper():
            continue
        kind = type(value)
        if kind in SCALARS or (
            kind in (tuple, frozenset) and all(type(v) in SCALARS for v in value)
        ):
            out[f"{owner}.{key} (value)"] = hash(repr(value))


def _behaviour(value: object) -> bool:
    """A class member that changes what its instances do: a callable or a descriptor."""
    kind = type(value)
    return callable(value) or hasattr(kind, "__get__") or hasattr(kind, "__set__")


def _kernel_attributes(owner: str, kernel: object, out: dict[str, object]) -> None:
    """A Triton kernel object's callables (its function, hooks, launcher) and which of them shadow
    a method of its class (`kernel.run = ...`), through the chain of wrappers (`Autotuner.fn` ->
    `Heuristics.fn` -> `JITFunction`). Other callables appear on first use (a `JITFunction` keeps
    `compile` and `CompiledKernel` from its first launch on a GPU): new ones are not a change."""
    seen: set[int] = set()
    while issubclass(type(kernel), triton.runtime.KernelInterface) and id(kernel) not in seen:
        seen.add(id(kernel))
        callables, cached_honest = [], True
        for key, value in list(vars(kernel).items()):
            lazy = _cached_property(type(kernel), key)
            if lazy is not None:  # filled on first use (`Autotuner.do_bench`): it must be its own
                cached_honest = cached_honest and _recomputed(lazy, kernel) is value
            elif callable(value) and not issubclass(type(value), triton.runtime.KernelInterface):
                out[f"{owner}:{key}"] = id(value)
                if _class_attribute(type(kernel), key):  # shadows a method: `kernel.run = ...`
                    callables.append(key)
            elif isinstance(value, list) and (key.endswith("hooks") or all(map(callable, value))):
                out[f"{owner}:{key}"] = tuple(map(id, value))
        out[f"{owner} (callables)"] = hash(frozenset(callables))
        source = vars(kernel).get("_src", vars(kernel).get("src"))
        if isinstance(source, str):  # `_unsafe_update_src` swaps what the kernel compiles from
            out[f"{owner} (source)"] = hash(source)
        out[f"{owner} (cached properties its own)"] = cached_honest
        kernel = getattr(kernel, "fn", None)
        owner += ".fn"


def _class_attribute(cls: type, name: str) -> bool:
    return any(name in vars(klass) for klass in cls.__mro__)


def _cached_property(cls: type, name: str) -> functools.cached_property | None:
    for klass in cls.__mro__:
        attr = vars(klass).get(name)
        if attr is not None:
            return attr if isinstance(attr, functools.cached_property) else None
    return None


def _recomputed(lazy: functools.cached_property, kernel: object) -> object:
    try:
        return lazy.func(kernel)
    except Exception:  # it computed once; failing now is no proof of a patch, but no match
        return None


def _knobs(out: dict[str, object]) -> None:
    from triton import knobs

    for group in dir(knobs):
        value = getattr(knobs, group)
        if isinstance(value, knobs.base_knobs):
            out[f"triton.knobs.{group} (set)"] = {k: id(v) for k, v in vars(value).items()}


_KEY, _VALUE = operator.itemgetter(0), operator.itemgetter(1)
_CODE = operator.attrgetter("__code__")
_DEFAULTS = operator.attrgetter("__defaults__")
_KWDEFAULTS = operator.attrgetter("__kwdefaults__")


def _identity(items: list) -> tuple:
    """Everything a namespace's entries are computed from, as identities (compared at C speed,
    no object's own `__eq__` involved): its keys, its values and their types (`obj.__class__ =
    ...` turns data into a descriptor), and its functions' code and defaults (which a patch can
    replace in place, the function object staying the same)."""
    values = list(map(_VALUE, items))
    functions = [v for v in values if type(v) is types.FunctionType]
    return (
        tuple(map(id, map(_KEY, items))),
        tuple(map(id, values)),
        tuple(map(id, map(type, values))),
        tuple(map(id, map(_CODE, functions))),
        tuple(map(id, map(_DEFAULTS, functions))),
        tuple(map(id, map(_KWDEFAULTS, functions))),
    )


class Memo:
    """The fingerprint's entries per namespace (a module's, a class's), reused while the
    namespace's identity (`_identity`) is what it was: a fingerprint of some 65k entries took
    0.1 to 0.2 s, most of it spent rebuilding entries of namespaces no one touched. What an
    identity cannot show is computed afresh each time: the constants by value, the Triton
    kernels' attributes, Triton's knobs, which modules are watched."""

    def __init__(self) -> None:
        self._modules: dict[str, tuple] = {}
        self._classes: dict[str, tuple] = {}

    def module(self, name: str, namespace: dict, out: dict[str, object]):
        """Add the module's callables to `out`; (its own classes, its Triton kernels)."""
        items = list(namespace.items())
        identity = _identity(items)
        memo = self._modules.get(name)
        if memo is None or memo[0] != identity:
            entries: dict[str, object] = {}
            _callable_ids(name, items, entries)
            classes, kernels = [], []
            for key, value in items:
                kind = type(value)
                if issubclass(kind, type) and vars(value).get("__module__") == name:
                    classes.append((key, value))
                elif issubclass(kind, triton.runtime.KernelInterface):
                    kernels.append((key, value))
            memo = self._modules[name] = (identity, entries, classes, kernels)
        out.update(memo[1])
        return memo[2], memo[3]

    def members(self, owner: str, cls: type, out: dict[str, object]) -> None:
        """Add a class's callables and the names of its members that change behaviour: a method
        added to a class shadows its base's (`Tensor.softmax = ...`); data added on first use
        does not (Triton's `CudaUtils.instance` singleton)."""
        items = list(vars(cls).items())
        identity = (id(cls), _identity(items))
        memo = self._classes.get(owner)
        if memo is None or memo[0] != identity:
            entries: dict[str, object] = {}
            _callable_ids(owner, items, entries)
            entries[f"{owner} (names)"] = frozenset(k for k, v in items if _behaviour(v))
            memo = self._classes[owner] = (identity, entries)
        out.update(memo[1])


class Watch:
    """The fingerprint of a runner process: recorded right before the first candidate is
    imported, extended before each later one, compared (and renewed) after the requests that
    end a step (`process._checks_process`).

    Any change a candidate makes happens inside some request (its import, its calls) or in a
    thread it started (which `changes()` reports), so the check that ends the candidate's
    verdict reports it, before the process times or imports anything else. Until a candidate is imported nothing is compared: what PyTorch and Triton
    change lazily while the original alone runs is the process as the original left it.
    """

    def __init__(self, is_workspace: Callable[[types.ModuleType], bool]) -> None:
        self.is_workspace = is_workspace
        self.armed = False  # a candidate has been imported into this process
        self.record: dict[str, object] = {}
        self.threads: set[int] = set()
        self.children: set[int] = set()
        self.state: dict[str, object] = {}
        self.environment: dict[str, str] = {}
        self.imports = 0  # candidates imported so far (the runner's loop tells a fresh import)
        self.memo = Memo()
        # Requests the runner began (`began`), and how many had begun at the last clean check:
        # a candidate imported in the request right after that check finds the process as the
        # check recorded it, save modules loaded since (`before_candidate`).
        self.requests = 0
        self.renewed_at = -1
        self.modules: set[str] = set()

    def began(self) -> None:
        """The runner began serving a request (not a ping: it runs nothing)."""
        self.requests += 1

    def _watched(self, name: str, module: object) -> bool:
        if type(module) is not types.ModuleType or name.startswith(NATURAL_PREFIXES):
            return False
        if name.split(".")[0] in WATCHED_PREFIXES:
            return True
        return self.is_workspace(module)

    def fingerprint(self, known: set[str] = frozenset()) -> dict[str, object]:
        """The entries of every watched module but those `known` (already recorded, untouched
        since), Triton's knobs."""
        out: dict[str, object] = {}
        for name, module in list(sys.modules.items()):
            if name in known or not self._watched(name, module):
                continue
            out[f"sys.modules[{name}]"] = id(module)
            namespace = vars(module)
            classes, kernels = self.memo.module(name, namespace, out)
            if name.split(".")[0] == PACKAGE:  # the workspace's own may hold its state
                _constants(name, namespace, out)
            for key, cls in classes:
                self.memo.members(f"{name}.{key}", cls, out)
            for key, kernel in kernels:
                _kernel_attributes(f"{name}.{key}", kernel, out)
        _knobs(out)
        return out

    def _renew(self, fingerprint: dict[str, object]) -> None:
        self.record = fingerprint
        self.renewed_at = self.requests
        self.modules = {k[12:-1] for k in fingerprint if k.startswith("sys.modules[")}
        self.threads = _threads()
        self.children = _children()
        self.state = _state()
        self.environment = dict(os.environ)

    def before_candidate(self) -> None:
        """A candidate is about to be imported: record what loaded since (the original and its
        modules), keeping what was recorded before (an earlier candidate's patch stays a change).
        Right after a clean check (nothing of the last request ran since; this request only
        loads modules before the import) only the modules loaded since are added: the rest is
        what the check found a moment ago (a fingerprint is 0.1 s of a CPU verdict's 1.1 s)."""
        fresh = self.armed and self.requests == self.renewed_at + 1
        now = self.fingerprint(self.modules if fresh else frozenset())
        if self.armed:
            now.update(self.record)
        self._renew(now)
        self.armed = True
        self.imports += 1

    def changes(self) -> list[str]:
        """What differs from the record (replaced or removed objects, global modes, the
        environment, threads still running); nothing when no candidate has been imported. A
        clean check renews the record."""
        if not self.armed:
            return []
        now = self.fingerprint()
        changed: list[str] = []
        if not self.record.items() <= now.items():  # every entry still there, as it was
            changed = [
                _change(key, value, now.get(key, value))
                for key, value in self.record.items()
                if now.get(key, value) != value
            ]
            changed += [f"{key} (removed)" for key in self.record if key not in now]
        state = _state()
        changed += [
            f"{k} ({self.state[k]!r} -> {v!r})"
            for k, v in state.items()
            if self.state.get(k, v) != v
        ]
        environment = dict(os.environ)
        changed += [
            f"environment {k}"
            for k in sorted(set(environment) | set(self.environment))
            if environment.get(k) != self.environment.get(k)
        ]
        started = len(_threads() - self.threads)
        if started:
            changed.append(f"{started} thread(s) it started still run")
        spawned = len(_children() - self.children)
        if spawned:
            changed.append(f"{spawned} process(es) it started still run")
        if not changed:
            self._renew(now)
        return changed


def _change(key: str, before: object, after: object) -> str:
    """A changed entry, naming the names a class gained or lost (`Tensor (names: +softmax)`)."""
    if isinstance(before, frozenset) and isinstance(after, frozenset):
        names = [f"+{n}" for n in sorted(after - before)] + [
            f"-{n}" for n in sorted(before - after)
        ]
        return f"{key.removesuffix(' (names)')} (names: {' '.join(names[:4])})"
    return key


def describe(changed: list[str], limit: int = 6) -> str:
    shown = ", ".join(changed[:limit])
    more = f" and {len(changed) - limit} more" if len(changed) > limit else ""
    return (
        "the candidate changed the process that times the original (a patch of what PyTorch, "
        f"Triton or the original run): {shown}{more}"
    )
