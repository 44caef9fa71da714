"""torch.compile's own kernels as candidates: the compiler the user already has is where a
search starts, not what it is compared with afterwards.

Before the first generation the judge compiles the task's reference (`LowerReference`: on a GPU
the benchmark cases, in each mode of `MODES`; on the CPU the small inputs, default mode) and the
transplant (`mutate/lowering`) writes each mode's kernels into the user's module behind a guard
on the arguments they were compiled for. Each such variant goes up the ladder alone, like the
memory's replays, and the generations expand it like any other: the configuration mutators
retune its kernels, the end game's dispatch may combine it per shape with the user's kernel.

It runs where the request says (`OptimizeRequest.lowering`), by default on a GPU only: on the
CPU, compiling the reference costs seconds per case and tells the user nothing about speed.
"""

from __future__ import annotations

from collections.abc import Callable

from .. import protocol as m
from ..api import facts
from ..evaluate.candidate import candidate_id
from ..evaluate.pool import WorkerDied
from ..mutate.lowering.output_code import NotTranslated, read
from ..mutate.lowering.transplant import transplant
from ..store import Store
from .evaluation import MIN_CALL_S
from .lowering_cache import LoweringCache
from .meter import Meter
from .node import ORIGINAL, Node

NAME = "lowering"
GPU_MODES = ("default", "max-autotune-no-cudagraphs")
# The share of the search's time the compiler may take: max-autotune on the benchmark cases
# benchmarks its own configurations, and a search that spends its budget there finds nothing
# else.
SHARE_OF_BUDGET = 1 / 3


def wanted(gpu: bool, asked: bool | None) -> bool:
    """Whether a search lowers its reference (see the module's docstring)."""
    return gpu if asked is None else asked


class LoweringStep:
    """The lowering of one search: its variants, and torch.compile's times per case (GPU)."""

    def __init__(self, task, original: str, seed: int, gpu: bool, store: Store | None = None):
        self.task, self.original, self.seed, self.gpu = task, original, seed, gpu
        self.store = store  # where torch.compile's answers are kept (`LoweringCache`)
        self.compile_us: list[dict[str, float]] = []  # per case: µs per mode (GPU)
        self.kernels = ""  # Inductor's kernels for one case, for the LLM (`compiler_kernels`)
        self.configs: list[dict[str, int]] = []  # what it chose, for the config mutator

    @classmethod
    def if_wanted(cls, asked: bool | None, task, original: str, seed: int, gpu: bool, store=None):
        """The step, where the request wants it (`wanted`); else None."""
        return cls(task, original, seed, gpu, store) if wanted(gpu, asked) else None

    def _cache(self, call: Callable, device: str) -> LoweringCache | None:
        """The store's answers for this task on this device (its identity from a ping)."""
        if self.store is None:
            return None
        try:
            ready = call(device, m.Ping(), MIN_CALL_S)
        except WorkerDied:
            return None
        if not isinstance(ready, m.Ready):
            return None
        identity = f"{ready.device_name}|torch {ready.torch}|triton {ready.triton}"
        return LoweringCache(self.store, self.task, self.seed, identity)

    def _answer(self, call, device: str, mode: str, timeout: float, cache, notes: list[str]):
        """torch.compile's answer for `mode`: the store's, else the judge's (then stored)."""
        kept = cache.get(mode) if cache is not None else None
        if kept is not None:
            notes.append(
                f"torch.compile ({mode}) of the reference: as compiled on {kept[1]} "
                "(kept in the store), not compiled again"
            )
            return kept[0]
        answer = call(device, m.LowerReference(self.task, self.seed, [mode]), timeout)
        if cache is not None and isinstance(answer, facts.LoweringResult) and answer.cases:
            cache.put(mode, answer)
        return answer

    def tell(self, pop) -> None:
        """What the lowering learned, for the rest of the search: torch.compile's times per case
        (every view of the result), its kernels (the LLM's prompt), its configurations (the
        config mutator)."""
        pop.compile_us = self.compile_us
        pop.compiler_kernels = self.kernels
        pop.compiler_configs = self.configs

    def nodes(self, call: Callable, device: str, meter: Meter, notes: list[str]) -> list[Node]:
        """One node per torch.compile mode whose kernels the transplant could write; what
        stopped the others goes into `notes`."""
        modes = list(GPU_MODES if self.gpu else GPU_MODES[:1])
        deadline = meter.tick().wall_s + SHARE_OF_BUDGET * meter.left_s()
        cases: list[facts.LoweredCase] = []
        cache = self._cache(call, device)
        for mode in modes:  # one call each: max-autotune's tuning may not fit, default's does
            timeout = deadline - meter.tick().wall_s
            if timeout < MIN_CALL_S:
                notes.append(f"torch.compile ({mode}) of the reference: no time left for it")
                break
            try:
                answer = self._answer(call, device, mode, timeout, cache, notes)
            except WorkerDied as died:
                notes.append(f"torch.compile ({mode}) of the reference stopped: {died.message}")
                break
            if isinstance(answer, facts.WorkerError):
                notes.append(f"torch.compile ({mode}) of the reference failed: {answer.message}")
                continue
            cases += answer.cases
            for i, us in enumerate(answer.compile_us.get(mode, [])):
                while len(self.compile_us) <= i:
                    self.compile_us.append({})
                if us is not None:
                    self.compile_us[i][mode] = us
            notes.extend(f"torch.compile's kernels not offered ({why})" for why in answer.declined)
        self.kernels = compiler_kernels(cases)
        self.configs = compiler_configs(cases)
        out, seen = [], set()
        for mode in modes:
            of_mode = [c for c in cases if c.mode == mode]
            if not of_mode:
                continue
            try:
                source = transplant(self.original, self.task.entry, of_mode)
            except NotTranslated as why:
                notes.append(f"torch.compile's kernels ({mode}) not offered: {why}")
                continue
            except Exception as exc:  # a transplant bug must not end the search
                notes.append(
                    f"torch.compile's kernels ({mode}) not offered: the transplant failed "
                    f"({type(exc).__name__}: {str(exc)[:200]})"
                )
                continue
            cid = candidate_id(source)
            if cid in seen:
                continue
            seen.add(cid)
            description = (
                f"torch.compile ({mode}) of the reference: its Triton kernels, written into this "
                f"module for the {len(of_mode)} case shape(s) they were compiled for; your kernel "
                "elsewhere"
            )
            out.append(Node(cid, source, NAME, description, ORIGINAL, t=meter.tick().wall_s))
        return out


def compiler_kernels(cases: list[facts.LoweredCase]) -> str:
    """Inductor's Triton kernels for the first case of the last mode that compiled (max-autotune's
    where it ran), each headed by the configuration it chose: what the LLM is shown as what the
    compiler writes for the reference (the prompt scrubs and cuts it)."""
    if not cases:
        return ""
    case = next(c for c in cases if c.mode == cases[-1].mode)
    try:
        program = read(case.output_code)
    except NotTranslated:
        return ""
    parts = []
    for name, kernel in program.kernels.items():
        config = case.configs.get(name)
        chosen = (
            f": {config.kwargs}, num_warps={config.num_warps}, num_stages={config.num_stages}"
            if config is not None
            else ""
        )
        parts.append(f"# {name} ({case.mode}){chosen}\n{kernel.source.strip()}")
    return "\n\n".join(parts)


def compiler_configs(cases: list[facts.LoweredCase], limit: int = 4) -> list[dict[str, int]]:
    """The configurations Inductor chose for the reference's kernels (block sizes, warps,
    stages), max-autotune's first, each once: offered to the user's own kernel by the config
    mutator (`MutationContext.suggested`)."""
    out: list[dict[str, int]] = []
    for case in sorted(cases, key=lambda c: c.mode != GPU_MODES[-1]):
        for config in case.configs.values():
            knobs = dict(config.kwargs) | {
                "num_warps": config.num_warps,
                "num_stages": config.num_stages,
            }
            if knobs not in out:
                out.append(knobs)
    return out[:limit]
