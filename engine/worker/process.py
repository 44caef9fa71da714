"""An evaluation worker process: `python -m kernelbrain.engine.worker.process DEVICE RFD WFD`.

The only place user and candidate code runs, always inside the sandbox (`sandbox.py`). The
engine talks to it over two inherited pipe descriptors with `messages.py` frames, so whatever
the user's code prints (stdout is redirected to stderr here) can never corrupt the protocol.
The engine enforces timeouts by killing the process; a crash of any kind ends only this process.

Two roles per device. The runner (`cpu`, `cuda:N`, `compile:N`) imports candidates: it runs the
cases the judge sends, in batches (`RunCandidate`), dry-runs, compiles and times them. The judge
(`judge@cpu`, `judge@cuda:N`) runs the harness (`RunHarness`): it imports the workspace's
original, reference and inputs but never a candidate (its module loader refuses any source that
is not the file on disk), and sends each case to the runner through the engine.
"""

from __future__ import annotations

import os
import sys
import traceback

JUDGE_PREFIX = "judge@"


def _serve(device: str, rfd: int, wfd: int) -> None:
    """A worker's request loop: one request in, progress and one answer out; a judge's requests
    for candidate runs go out through the engine and their answers come back in the same loop.

    Long because the request loop and its relay to the runner are one protocol state machine.
    """
    from .. import protocol as m
    from ..api import facts

    judge = device.startswith(JUDGE_PREFIX)
    role_device = device
    device = device.removeprefix(JUDGE_PREFIX)
    interpreter = device == "cpu"
    compiler_only = device.startswith("compile")  # ahead-of-time compilation, no device at all
    if interpreter:
        os.environ["TRITON_INTERPRET"] = "1"  # fixed at `import triton`: set before it
    import torch

    # The audit's dispatch mode makes PyTorch import torch._dynamo on the first tensor op under it:
    # 2.7 s of the first harness stage on a development machine's CPU worker. Paid here, while the
    # engine waits for the worker to start (on a GPU, while the CPU workers compile).
    import torch._dynamo  # noqa: F401
    import triton

    from . import ghost
    from .audit import install_launch_hook
    from .failures import classify_exception
    from .harness import Harness, serve_run_candidate
    from .jit_clock import CLOCK
    from .loader import ModuleLoader

    install_launch_hook()
    ghost.install()
    if interpreter:
        from .interpreter_compat import install as install_interpreter_compat

        install_interpreter_compat()  # before any user module imports a libdevice name
        torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))
        name = "CPU (Triton interpreter)"
    elif compiler_only:
        from .interpreter_compat import install_device_guards

        install_device_guards()  # dry runs launch under `with torch.cuda.device(...)` too
        torch.set_num_threads(1)
        name = "AOT compiler"
    else:
        torch.cuda.set_device(0)  # the engine exposes exactly one GPU through CUDA_VISIBLE_DEVICES
        torch.zeros(
            1, device="cuda"
        )  # the CUDA context, before Ready: part of starting, not of a request
        CLOCK.install()  # the harness's JIT seconds per stage (a GPU worker that compiles idles its GPU)
        name = torch.cuda.get_device_name(0)
    dev = "cuda" if not (interpreter or compiler_only) else "cpu"
    loader = ModuleLoader(on_disk_only=judge)
    watch = None
    if not judge:  # a process that imports candidates: what they change is checked (tamper.py)
        from . import timing  # noqa: F401  (loaded before any candidate: its constants are watched)
        from .tamper import Watch, guard_process

        guard_process()
        watch = Watch(loader.is_workspace)
        loader.before_candidate = watch.before_candidate
    ready = m.Ready(
        os.getpid(), role_device, name, str(torch.__version__), str(triton.__version__), interpreter
    )
    m.write_message(wfd, ready)

    def progress(stage: str, detail: str = "") -> None:
        m.write_message(wfd, m.Progress(stage, detail))

    def exchange(need: m.NeedRuns):
        """Ask the engine to run cases on the candidate's runner; wait for what it sends back."""
        m.write_message(wfd, need)
        return m.read_request(rfd)

    while True:
        try:
            req = m.read_request(rfd)
        except EOFError:
            return
        fatal = False
        imports = watch.imports if watch is not None else 0
        if watch is not None and not isinstance(req, m.Ping):
            watch.began()
        try:
            if judge and not isinstance(
                req, (m.Ping, m.RunHarness, m.MeasureCeilings, m.LowerReference)
            ):
                answer = facts.WorkerError(
                    "bad-request",
                    f"the judge runs harnesses and ceilings only, not {type(req).__name__}",
                )
            elif isinstance(req, m.Ping):
                answer = ready
            elif isinstance(req, m.RunHarness):
                answer, fatal = Harness(
                    req, dev, loader, progress, exchange if judge else None
                ).run()
            elif isinstance(req, m.RunCandidate):
                answer, fatal = serve_run_candidate(req, dev, loader, progress)
            elif isinstance(req, m.Specialize):
                answer = _specialize(req, dev, loader, progress)
            elif isinstance(req, m.LowerReference):
                answer = _lower(req, dev, loader, progress)
            elif isinstance(req, m.Compile):
                from .compiled import compile_launches

                progress("compile", f"{len(req.launches)} specialisations for sm_{req.arch}")
                answer = facts.CompileResult(compile_launches(loader, req))
            elif interpreter or compiler_only:
                answer = facts.WorkerError(
                    "no-gpu", "timing needs a GPU: the CPU interpreter only checks correctness"
                )
            elif isinstance(req, (m.TimeAB, m.Bench)):
                answer = _time(req, dev, loader, progress)
            elif isinstance(req, m.MeasureCeilings):
                progress("ceilings", "copy, write and read bandwidth, bf16 matmul rate")
                from .timing import measure_ceilings

                answer = measure_ceilings()
            else:
                answer = facts.WorkerError("bad-request", f"unknown request {type(req).__name__}")
        except Exception as exc:  # a bug or a device failure outside the harness's own handling
            reason, fatal = classify_exception(exc)
            answer = facts.WorkerError(
                reason, f"{type(exc).__name__}: {exc}", traceback.format_exc()[-4000:]
            )
        if watch is not None and _checks_process(req, answer, watch.imports != imports):
            changed = watch.changes()
            if changed:
                answer, fatal = _tampered(req, changed), True
        m.write_message(wfd, answer)
        if fatal or getattr(answer, "reason", None) in facts.FATAL_REASONS:
            os._exit(3)  # the CUDA context is unusable; the engine starts a fresh worker


def _checks_process(req, answer, imported: bool) -> bool:
    """Whether the runner's tamper watch compares the process after `req` (`imported`: a
    candidate was imported while serving it). After every request but a ping and the judge's
    requests in the middle of a verdict: its batches of cases, and the import when it succeeds.
    The judge asks for the check (a `RunCandidate` without cases) once more before it decides,
    failed or not, and the fingerprint (taken right before the import) still holds what the
    candidate found, so a change made at the import or in any batch is still the candidate's,
    found before anything else runs in the process. A check at each of those points (0.1 to 0.2
    s each) added no case it catches: a candidate may patch and restore within one call as well
    as across calls. A failed import is checked at once: the judge ends that verdict there."""
    from .. import protocol as m

    if isinstance(req, m.Ping):
        return False
    if isinstance(req, m.RunCandidate):
        if req.cases is not None:
            return False
        return not (imported and getattr(answer, "failed", None) is None)
    return True


def _tampered(req, changed: list[str]):
    """The answer to a request during which a candidate changed the process: the candidate's
    failure (`tampered`), whatever it answered; the worker then exits."""
    from .. import protocol as m
    from ..api import facts
    from .tamper import describe

    failure = facts.WorkerError("tampered", describe(changed))
    if isinstance(req, m.RunCandidate):
        return m.CandidateRuns([], failure, 0)
    return failure


def _specialize(req, dev, loader, progress):
    from .. import protocol as m
    from ..api import facts
    from .cases import stage_seed
    from .harness import Harness
    from .shapes import describe
    from .specialize import dry_run, dry_run_inputs

    h = Harness(m.RunHarness(req.task, req.candidate, seed=req.seed), dev, loader, progress)
    h.load()
    if req.stages:
        if (
            h.inputs.small_fn is None
        ):  # its stages check the benchmark inputs: the compile rung's cases
            return facts.SpecializeResult([], "none", error="the task has no small_inputs")
        progress("specialize", f"dry run of the {', '.join(req.stages)} inputs")
        return dry_run_inputs(
            h.entry,
            (
                (f"{stage}: {label}", args)
                for stage in req.stages
                for label, args, _ in h.stage_inputs(stage)
            ),
            dev,
        )
    progress("specialize", "dry run of every case")
    seed = stage_seed(req.seed, "timing")

    def draw(device: str):
        # Every candidate of a search dry-runs the same cases: draw them once per worker (a
        # launcher that needs real values, like `.item()`, makes this hundreds of MB on the CPU).
        # Keyed by device too: the dry run tries `meta` first, so a one-entry cache re-drew the
        # CPU fallback for every candidate (cross_entropy: 2.4-3.3 s per dry run on this 2-core
        # machine, 177 s of a 300 s H200 search spent compiling).
        task_key = (req.task.file, req.task.inputs, seed)
        if any(k[:3] != task_key for k in _DRAWN):
            _DRAWN.clear()
        key = task_key + (device,)
        if key not in _DRAWN:
            _DRAWN[key] = h.inputs.draw(h.inputs.inputs_fn, seed, "inputs", device)
        return _DRAWN[key]

    return dry_run(h.entry, draw, describe)


_DRAWN: dict = {}


def _lower(req, dev, loader, progress):
    """torch.compile of the reference on the cases a search times (the small inputs off a GPU,
    where the benchmark cases never run)."""
    from .. import protocol as m
    from .cases import stage_seed
    from .harness import Harness
    from .lowering import lower_cases

    h = Harness(m.RunHarness(req.task, None, seed=req.seed), dev, loader, progress)
    h.load()
    small = h.interpreter and h.inputs.small_fn is not None
    fn = h.inputs.small_fn if small else h.inputs.inputs_fn
    cases = h.inputs.draw(fn, stage_seed(req.seed, "timing"), "small_inputs" if small else "inputs")
    progress("lower", f"torch.compile of the reference on {len(cases)} case(s)")
    return lower_cases(h.modules.reference, cases, tuple(req.modes))


def _time(req, dev, loader, progress):
    from .. import protocol as m
    from ..api import facts
    from .harness import Harness
    from .shapes import case_labels
    from .timing import bench_cases, compare_cases

    h = Harness(m.RunHarness(req.task, req.candidate, seed=req.seed), dev, loader, progress)
    h.load()
    cases = h.inputs.full("timing")
    labels = case_labels(req.task, cases)
    if getattr(req, "cases", None) is not None:
        cases, labels = [cases[i] for i in req.cases], [labels[i] for i in req.cases]
    if isinstance(req, m.TimeAB):
        entries = [h.entry]
        for rival in req.rivals:
            r = Harness(m.RunHarness(req.task, rival, seed=req.seed), dev, loader, progress)
            r.load()
            entries.append(r.entry)
        progress(
            "timing", f"{len(cases)} cases, {len(entries)} candidates interleaved with the original"
        )
        results = compare_cases(
            h.modules.original_entry,
            entries,
            cases,
            labels,
            req.rep_ms,
            req.noise_check,
            req.seed,
            (req.task.rtol, req.task.atol),
        )
        return facts.TimingResults(results) if req.rivals else results[0]
    progress("bench", f"{len(cases)} cases")
    uses_dot = "tl.dot(" in (req.candidate or open(req.task.file, encoding="utf-8").read())
    return facts.BenchResult(
        bench_cases(h.entry, cases, labels, req.rep_ms, uses_dot, req.ceilings), req.ceilings
    )


def main() -> None:
    device, rfd, wfd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    os.dup2(2, 1)  # anything printed goes to stderr, never into the protocol pipe
    sys.stdout = sys.stderr
    _serve(device, rfd, wfd)


if __name__ == "__main__":
    main()
