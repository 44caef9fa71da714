"""`kernelbrain …` command line.

Each subcommand imports what it needs inside its handler, so `kernelbrain check` and
`kernelbrain serve` never load torch or triton. Exit codes are stable (README "CLI"):
0 success / nothing found, 1 findings or a rejected result, 2 usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from .parser import build_parser
from .process_clock import process_started_at

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_BUSY = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it


class UsageError(Exception):
    """Bad arguments discovered after parsing (missing file, unknown kernel, …) or a broken
    harness config (`kind` "harness"): exit 2."""

    def __init__(self, message: str, kind: str = "usage"):
        super().__init__(message)
        self.kind = kind


def _fail(args: argparse.Namespace, kind: str, message: str, code: int) -> None:
    """Say why a command failed on stderr and, under `--json`, as the one object on stdout
    (`{"error": {"kind", "message", "exit"}}`), so a script reading the JSON always gets one."""
    print(f"kernelbrain: error: {message}", file=sys.stderr)
    if getattr(args, "json", False):
        import json

        print(json.dumps({"error": {"kind": kind, "message": message, "exit": code}}, indent=2))


def _harness_exit(reason: str | None, accepted: bool) -> int:
    """0 accepted; 2 when the harness is at fault (its reference, inputs or small inputs);
    1 when the kernel checked is."""
    from ..api.facts import HARNESS_REASONS

    if accepted:
        return EXIT_OK
    return EXIT_USAGE if reason in HARNESS_REASONS else EXIT_FINDINGS


def _cmd_check(args: argparse.Namespace) -> int:
    from .check import check_paths, format_json, format_text, known_codes, unknown_selectors

    args.select = [c.upper() for c in args.select or ()] or None  # kb101 means KB101
    args.ignore = [c.upper() for c in args.ignore or ()] or None
    for flag, values in (("--select", args.select), ("--ignore", args.ignore)):
        for value in unknown_selectors(values or ()):
            raise UsageError(
                f"{flag} {value}: no diagnostic code starts with it (codes: {', '.join(known_codes())})"
            )
    result = check_paths(args.paths, select=args.select, ignore=args.ignore)
    if result.missing:
        for p in result.missing:
            print(f"kernelbrain: error: {p}: no such file or directory", file=sys.stderr)
        return EXIT_USAGE
    for note in result.skipped:
        print(f"kernelbrain: {note}", file=sys.stderr)
    if args.format == "json":
        print(format_json(result.findings))
    else:
        text = format_text(result.findings)
        if text:
            print(text)
        n = len(result.findings)
        print(
            f"Found {n} finding{'s' if n != 1 else ''} in {result.files_checked} file{'s' if result.files_checked != 1 else ''} checked."
        )
    return EXIT_FINDINGS if result.findings and not args.exit_zero else EXIT_OK


def _split(target: str):
    """FILE::KERNEL as (path, kernel or None); a target that cannot mean one is a usage error."""
    from ..task import TaskError
    from ..task.discover import split_target

    try:
        return split_target(target)
    except TaskError as exc:
        raise UsageError(str(exc)) from exc


def _task(target: str):
    from ..task import TaskError, find_task

    path, kernel = _split(target)
    try:
        return find_task(path, kernel)
    except TaskError as exc:
        raise UsageError(str(exc), "harness") from exc


def _device(requested: str | None) -> str:
    from ..evaluate.devices import resolve_device

    try:
        return resolve_device(requested)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def _cmd_verify(args: argparse.Namespace) -> int:
    import msgspec

    from ..evaluate.pool import WorkerPool
    from ..evaluate.verify import verify
    from .report_text import print_verify

    task = _task(args.target)
    if not args.candidate.is_file():
        raise UsageError(f"{args.candidate}: no such file")
    source = args.candidate.read_text(encoding="utf-8")
    device = _device(args.device)
    progress = None if args.json else _stderr_progress
    with WorkerPool() as pool:
        report = verify(
            pool,
            task,
            source,
            device,
            timing=not args.no_timing,
            on_progress=progress,
            timeout_s=args.timeout,
            seed=args.seed,
        )
    if args.json:
        print(msgspec.json.format(msgspec.json.encode(report), indent=2).decode())
    else:
        print_verify(report)
    return _harness_exit(report.reason, report.accepted)


def _cmd_bench(args: argparse.Namespace) -> int:
    import msgspec

    from ..api.facts import HarnessResult
    from ..evaluate.devices import is_gpu
    from ..evaluate.pool import WorkerPool
    from ..evaluate.verify import bench, benchmark_inputs_error, run_harness
    from .report_text import print_bench, print_harness

    task = _task(args.target)
    device = _device(args.device)
    progress = None if args.json else _stderr_progress
    from ..profile.measured import classify, measured_findings

    with WorkerPool() as pool:
        harness = run_harness(pool, task, None, device, on_progress=progress)
        if harness.accepted and not is_gpu(device):
            why = benchmark_inputs_error(pool, task)
            if why is not None:
                harness = HarnessResult(
                    False,
                    "load",
                    "harness-error",
                    f"the benchmark inputs (`{task.inputs.rsplit(':', 1)[-1]}`) could not be "
                    f"drawn for a dry run: {why}",
                )
        result = (
            bench(pool, task, device, rep_ms=args.rep_ms, on_progress=progress)
            if (harness.accepted and is_gpu(device))
            else None
        )
    places = (
        [classify(c, result.ceilings) for c in result.cases] if result and result.ceilings else []
    )
    ncu = None
    if args.ncu and result is not None:
        from ..profile.ncu import ncu_report

        ncu = ncu_report(task, args.ncu_case)
    if args.json:
        out = {
            "kernel": task.kernel,
            "file": task.file,
            "device": device,
            "harness": harness,
            "bench": result,
            "roofline": places,
            "findings": [
                dict(zip(("code", "severity", "message"), f)) for f in measured_findings(places)
            ],
            "ncu": ncu,
            "timing": "measured"
            if result
            else "none: no GPU, the CPU interpreter only checks correctness",
        }
        print(msgspec.json.format(msgspec.json.encode(out), indent=2).decode())
    else:
        print_harness(task, device, harness)
        if result is not None:
            print_bench(result, places, measured_findings(places), ncu)
        elif harness.accepted:
            print(
                "No timing: there is no GPU here, and the CPU interpreter only checks correctness."
            )
    return _harness_exit(harness.reason, harness.accepted)


def _cmd_profile(args: argparse.Namespace) -> int:
    import msgspec

    from ..evaluate.devices import gpu_count
    from ..profile.whole_program import run_profile
    from ..store import Store
    from ..task.layout import store_root

    if not args.script.is_file():
        raise UsageError(f"{args.script}: no such file")
    if not gpu_count():
        raise UsageError(
            "kernelbrain profile needs a GPU: torch.profiler ranks CUDA kernels by GPU time, and "
            "there is none here"
        )
    script = args.script.resolve()
    root = (args.root or Path.cwd()).resolve()
    try:
        result = run_profile(script, list(args.args), root)
    except RuntimeError as exc:
        print(f"kernelbrain: {exc}", file=sys.stderr)
        return EXIT_FINDINGS
    store = Store(store_root(script))
    store.save_profile(
        str(script),
        result.total_us,
        [
            {
                "kernel": k.kernel,
                "file": k.file,
                "share": k.share,
                "time_us": k.device_us,
                "calls": k.calls,
            }
            for k in result.kernels
            if k.kernel
        ],
    )
    if args.json:
        print(msgspec.json.format(msgspec.json.encode(result), indent=2).decode())
    else:
        from .report_text import print_profile

        print_profile(result)
    return EXIT_OK


def _cmd_init(args: argparse.Namespace) -> int:
    from ..task import TaskError
    from ..task.scaffold import scaffold

    path, kernel = _split(args.target)
    if kernel is None:
        raise UsageError("say which kernel: kernelbrain init FILE::KERNEL")
    if args.llm:
        return _init_with_llm(args, path, kernel)
    try:
        result = scaffold(path, kernel)
    except TaskError as exc:
        raise UsageError(str(exc), "harness") from exc
    verb = "created" if result.created_config else "updated"
    print(f"{verb} {result.config} with a [[tasks]] entry for {kernel} (entry `{result.entry}`)")
    target = f"{path}::{kernel}"
    print(
        f"wrote {result.harness}: fill in the reference and the input functions, then check "
        f"the harness on the original with `kernelbrain bench {target} --device cpu`"
    )
    return EXIT_OK


def _init_with_llm(args: argparse.Namespace, path, kernel: str) -> int:
    """`init --llm`: the LLM drafts the reference and inputs; the original kernel must pass the
    drafted harness (five stages, sandboxed) before anything is written."""
    from ..llm.harness_draft import DraftFailed, draft_checked
    from ..llm.mutator import LLMMutator
    from ..llm.settings import resolve_llm
    from ..task import TaskError

    settings, key = resolve_llm(_llm_options(args))
    llm = LLMMutator(settings, key)
    device = _device(args.device)
    try:
        draft = draft_checked(path, kernel, llm, device)
    except TaskError as exc:
        raise UsageError(str(exc), "harness") from exc
    except DraftFailed as exc:
        for notice in llm.notices:
            print(f"kernelbrain: {notice}", file=sys.stderr)
        raise UsageError(
            f"the LLM's harness for {kernel} was not written: {exc}. `kernelbrain init "
            f"{args.target}` writes stubs to fill in by hand",
            "harness",
        ) from exc
    result = draft.scaffold
    result.harness.write_text(result.harness_text, encoding="utf-8")
    result.config.write_text(result.config_text, encoding="utf-8")
    verb = "created" if result.created_config else "updated"
    print(f"{verb} {result.config} with a [[tasks]] entry for {kernel} (entry `{result.entry}`)")
    print(
        f"wrote {result.harness}, drafted by {settings.model} in {draft.rounds} round(s): the "
        f"original passes it on {draft.checked}. Read it before you trust it: "
        f"{draft.rationale}"
    )
    print(llm.summary())
    return EXIT_OK


def _cmd_optimize(args: argparse.Namespace) -> int:
    import msgspec

    from ..api.budget import parse_duration
    from ..api.request import OptimizeRequest
    from ..service import SearchBusy, SearchError

    try:
        wall = parse_duration(args.budget)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    for flag, value in (("--llm-tokens", args.llm_tokens), ("--llm-dollars", args.llm_dollars)):
        if value is not None and value < 0:
            raise UsageError(f"{flag} must be at least 0, got {value}")
    if args.max_candidates is not None and args.max_candidates < 1:
        raise UsageError(f"--max-candidates must be at least 1, got {args.max_candidates}")
    task = _task(args.target)
    request = OptimizeRequest(
        file=task.file,
        kernel=task.kernel,
        budget_s=wall,
        max_candidates=args.max_candidates,
        device=_device(args.device),
        seed=args.seed,
        llm=_llm_options(args, max_tokens=args.llm_tokens, max_dollars=args.llm_dollars)
        if args.llm
        else None,
        wait=args.wait,
        memory=args.memory,
        lowering=args.lowering,
        started_at=process_started_at(),  # the budget is the wait from the command's start
    )
    outcome = _run_search(request, task, quiet=args.json)
    for note in outcome.notes:
        print(f"kernelbrain: {note}", file=sys.stderr)
    exc = outcome.error
    if outcome.interrupted and outcome.result is None:
        # Whatever the cancelled search raised on its way out (the original's check cut short
        # reads as a failure of it) is the interruption's doing, not the kernel's.
        _fail(args, "interrupted", "interrupted before anything was verified", EXIT_INTERRUPTED)
        return EXIT_INTERRUPTED
    if isinstance(exc, SearchBusy):
        _fail(args, "busy", f"{exc} (--wait waits for it)", EXIT_BUSY)
        return EXIT_BUSY
    if isinstance(exc, SearchError):
        code = EXIT_USAGE if exc.harness else EXIT_FINDINGS
        _fail(args, "harness" if exc.harness else "original", str(exc), code)
        return code
    if outcome.result is None:
        raise exc if exc is not None else RuntimeError("the search returned nothing")
    result = outcome.result
    if args.report:
        from .report_html import render

        args.report.write_text(render(result), encoding="utf-8")
    if args.json:
        out = msgspec.to_builtins(result)
        out.pop("original", None)
        for v in out["variants"]:
            v.pop("source", None)  # the diff carries the change; keep the JSON readable
        print(msgspec.json.format(msgspec.json.encode(out), indent=2).decode())
    else:
        from .report_text import print_search

        print_search(result)
        if args.report:
            print(f"report: {args.report}")
    if args.apply and result.best:
        best = next(v for v in result.variants if v.id == result.best)
        Path(task.file).write_text(best.source, encoding="utf-8")
        print(f"applied {best.id} to {task.file}", file=sys.stderr)
    return EXIT_INTERRUPTED if outcome.interrupted else EXIT_OK


def _cmd_memory(args: argparse.Namespace) -> int:
    from ..store.memory import Memory

    memory = Memory()
    try:
        if args.action == "clear":
            print(f"cleared {memory.clear()} experiences from {memory.path}")
        else:
            rows = memory.summary()
            print(f"{memory.path}: {sum(n for *_, n in rows)} experiences")
            for family, mutator, tried, paid, n in rows:
                print(f"  {family:18s} {mutator:18s} paid {paid}/{tried} candidates ({n} searches)")
    finally:
        memory.close()
    return EXIT_OK


def _notice(message: str) -> None:
    print(f"kernelbrain: {message}", file=sys.stderr)


def _run_search(request, task, quiet: bool):
    """The search in a thread that Ctrl-C cancels for real (`console.py`), with progress on
    stderr unless `quiet`."""
    from ..service import optimize
    from .console import ProgressView, run_interruptibly

    with ProgressView(task.kernel, enabled=not quiet) as view:
        return run_interruptibly(
            lambda cancel, pool: optimize(
                request,
                task=task,
                on_event=view.update,
                on_notice=_notice,
                cancel=cancel,
                pool=pool,
            )
        )


def _stderr_progress(p) -> None:
    print(f"  · {p.stage}{(': ' + p.detail) if p.detail else ''}", file=sys.stderr, flush=True)


def _llm_options(args: argparse.Namespace, **more):
    """The LLM options the flags state, checked against the environment's settings now: a bad
    value is a usage error naming it, before any search starts."""
    from ..api.request import LLMOptions
    from ..llm.settings import resolve_llm

    price = None
    if args.llm_price is not None:
        try:
            price = tuple(float(x) for x in args.llm_price.split(","))
        except ValueError as exc:
            raise UsageError(f"--llm-price wants IN,OUT dollars, got {args.llm_price!r}") from exc
    flags = {"model": "llm_model", "base_url": "llm_base_url", "temperature": "llm_temperature",
             "concurrency": "llm_concurrency", "timeout_s": "llm_timeout",
             "max_repairs": "llm_repairs"}  # fmt: skip
    options = LLMOptions(
        price=price, **{f: getattr(args, flag) for f, flag in flags.items()}, **more
    )
    try:
        resolve_llm(options)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    return options


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(
        {
            "check": _cmd_check,
            "verify": _cmd_verify,
            "bench": _cmd_bench,
            "profile": _cmd_profile,
            "memory": _cmd_memory,
            "init": _cmd_init,
            "optimize": _cmd_optimize,
        }
    )
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except UsageError as exc:
        _fail(args, exc.kind, str(exc), EXIT_USAGE)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("\nkernelbrain: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def run() -> None:
    """The command line's process: main's status, and on an interruption an exit that waits
    for nothing. What a cancelled search keeps is stored and its workers are dead by then; a
    thread still blocked on one of them (a worker that was starting when Ctrl-C came) would
    otherwise hold the process past the user's Ctrl-C."""
    code = main()
    if code == EXIT_INTERRUPTED:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
