"""torch.compile of the task's reference, kept as text: Inductor's output code per case.

The reference is workspace code, so this runs where the reference already runs: inside the
sandboxed judge. What comes back is plain text and numbers (`LoweredCase`); the engine turns it
into a candidate (`engine/mutate/lowering/`) that then passes the gate and the judge like any
other, so nothing here is trusted for being the compiler's.

Off a GPU, Inductor writes Triton for the CPU only when asked (`cpu_backend = "triton"`) and
cannot build it (upstream Triton has no CPU backend): the capture then keeps the text Inductor
wrote before building, and the first configuration its heuristics list. The kernels are the same
Triton a GPU gets, sized by the CPU's heuristics, so the transplant is tested without a GPU.
"""

from __future__ import annotations

import contextlib
from typing import Callable
from unittest import mock

import torch

from ..api.facts import KernelConfig, LoweredCase, LoweringResult

MODES = ("default", "max-autotune-no-cudagraphs")
COMPILE_TIMING_MS = 100.0  # per case and mode: a baseline shown beside the original, not a verdict


class Declined(Exception):
    """The reference cannot be lowered on this case; the message says why, for the user."""


def guard_of(args: tuple) -> list[list]:
    """What the compiled code was specialised for, per positional argument."""
    guard = []
    for a in args:
        if isinstance(a, torch.Tensor):
            guard.append(["tensor", list(a.shape), list(a.stride()), str(a.dtype)])
        elif a is None or isinstance(a, (bool, int, float, str)):
            guard.append(["value", repr(a)])
        else:
            raise Declined(f"an argument of type {type(a).__name__} (only tensors and scalars)")
    return guard


def output_shape(result) -> str:
    if isinstance(result, torch.Tensor):
        return "tensor"
    if (
        isinstance(result, (tuple, list))
        and result
        and all(isinstance(r, torch.Tensor) for r in result)
    ):
        return f"tuple:{len(result)}"
    raise Declined("the reference returns something other than tensors (results in arguments?)")


@contextlib.contextmanager
def _cpu_triton():
    """Inductor writing Triton for CPU tensors without building it (see the module's docstring)."""
    import torch._inductor.config as inductor_config
    import torch.utils._triton as torch_triton
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(inductor_config, "cpu_backend", "triton"))
        stack.enter_context(
            mock.patch.object(torch_triton, "triton_hash_with_backend", lambda: "cpu-capture")
        )
        stack.enter_context(
            mock.patch.object(CachingAutotuner, "precompile", lambda self, *a, **k: None)
        )
        yield


def _time_us(fn: Callable, args: tuple) -> float:
    """The compiled reference's time on a GPU, as the original's is taken (`timing.measure`)."""
    from .timing import measure

    (captures,), _ = measure([lambda: fn(*args)], COMPILE_TIMING_MS, captures=1)
    times = sorted(captures[0])
    return 1000 * times[len(times) // 2]


def lower(
    reference: Callable, args: tuple, mode: str = "default", times: list | None = None
) -> LoweredCase:
    """Compile `reference` on `args` (one graph, static shapes) and keep what Inductor wrote;
    on a GPU, its time goes into `times` first (a baseline even where no variant comes of it)."""
    from torch._inductor.codecache import PyCodeCache
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.graph import GraphLowering
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    guard = guard_of(args)
    outputs = output_shape(reference(*args))
    codes: list[str] = []
    modules = []
    seen: dict = {}

    def backend(gm, example_inputs):
        seen["inputs"] = list(example_inputs)
        (out,) = [n for n in gm.graph.nodes if n.op == "output"]
        seen["outputs"] = len(out.args[0]) if isinstance(out.args[0], (tuple, list)) else 1
        options = {} if mode == "default" else torch._inductor.list_mode_options(mode)
        options = {k: v for k, v in options.items() if k != "triton.cudagraphs"}
        return compile_fx(gm, example_inputs, config_patches=options)

    load = PyCodeCache.load_by_key_path

    def loaded(*a, **k):
        module = load(*a, **k)
        modules.append(module)
        return module

    on_cpu = all(a.device.type == "cpu" for a in args if isinstance(a, torch.Tensor))
    error = None
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(GraphLowering, "save_output_code", codes.append))
        stack.enter_context(mock.patch.object(PyCodeCache, "load_by_key_path", loaded))
        if on_cpu:
            stack.enter_context(_cpu_triton())
        torch._dynamo.reset()
        compiled = torch.compile(reference, backend=backend, fullgraph=True, dynamic=False)
        try:
            compiled(*args)
        except Exception as exc:  # off a GPU the built kernels cannot run: expected there
            error = exc
    if times is not None and not on_cpu and error is None:
        times.append(_time_us(compiled, args))
    if error is not None and not (on_cpu and codes):
        raise Declined(f"torch.compile failed: {type(error).__name__}: {str(error)[:300]}")
    if len(codes) != 1:
        raise Declined(f"torch.compile wrote {len(codes)} programs (one graph is needed)")
    positions = {id(a): i for i, a in enumerate(args)}
    inputs = [positions.get(id(t), -1) for t in seen.get("inputs", [])]
    if -1 in inputs:
        raise Declined("the compiled graph reads a tensor that is not an argument")
    n_out = 1 if outputs == "tensor" else int(outputs.split(":")[1])
    if seen.get("outputs") != n_out:
        raise Declined("the compiled graph returns other values than the reference")
    configs = {}
    for module in modules:
        for name, value in vars(module).items():
            if isinstance(value, CachingAutotuner):
                chosen = value.launchers[0].config if value.launchers else value.configs[0]
                configs[name] = KernelConfig(
                    {k: int(v) for k, v in chosen.kwargs.items()},
                    int(chosen.num_warps),
                    int(chosen.num_stages),
                )
    return LoweredCase(guard, inputs, codes[0], configs, outputs, mode)


def lower_cases(reference: Callable, cases: list[tuple], modes=("default",)) -> LoweringResult:
    """`lower` on every case and mode; a case that cannot be lowered is said, not raised."""
    lowered, declined, compile_us = [], [], {}
    for mode in modes:
        compile_us[mode] = []
        for i, args in enumerate(cases):
            times: list[float] = []
            try:
                case = lower(reference, tuple(args), mode, times)
                case.case = i
                lowered.append(case)
            except Declined as why:
                declined.append(f"{mode}, case {i}: {why}")
            compile_us[mode].append(times[0] if times else None)
    if all(t is None for ts in compile_us.values() for t in ts):
        compile_us = {}
    return LoweringResult(lowered, declined, compile_us)
