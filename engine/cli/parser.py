"""The `kernelbrain` command line: one function per subcommand's arguments; the commands
themselves are `main.py`'s."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

from ..api.budget import DEFAULT_BUDGET

OPTIMIZE_EXITS = """exit status:
  0  the search ran (whether or not it found a faster variant)
  1  the original kernel fails its own harness
  2  usage or harness error: bad arguments, no or a broken harness config, or a harness whose
     reference, inputs or small inputs raise (the message says which), or a kernel the CPU
     interpreter cannot run (the message names the line)
  3  another search of the same kernel is running (--wait waits for it instead)
  130  interrupted (Ctrl-C): the search stopped, what it verified is printed and kept
with --json, a failure prints one object: {"error": {"kind", "message", "exit"}}"""
VERIFY_EXITS = """exit status:
  0  the candidate is accepted
  1  the candidate is rejected (the report says at which stage and why)
  2  usage or harness error (the harness's reference, inputs or small inputs raise)
with --json, a usage or harness-config failure prints {"error": {"kind", "message", "exit"}}"""


def build_parser(handlers: dict[str, Callable]) -> argparse.ArgumentParser:
    """The parser; `handlers` maps each subcommand to the function that runs it."""
    parser = argparse.ArgumentParser(
        prog="kernelbrain", description="Find and verify faster variants of Triton kernels."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for add in (
        _check,
        _verify,
        _bench,
        _profile,
        _memory,
        _init,
        _optimize,
    ):
        add(sub, handlers)
    _plugin_commands(sub)
    return parser


def _check(sub, handlers) -> None:
    p = sub.add_parser(
        "check", help="static bottleneck diagnostics (KB1xx) for Python files or folders"
    )
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument(
        "--select",
        action="append",
        metavar="CODE",
        help="only these codes or prefixes (repeatable)",
    )
    p.add_argument(
        "--ignore",
        action="append",
        metavar="CODE",
        help="skip these codes or prefixes (repeatable)",
    )
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    p.set_defaults(handler=handlers["check"])


def _verify(sub, handlers) -> None:
    p = sub.add_parser(
        "verify",
        help="run the policy gate and the correctness harness on a candidate module",
        epilog=VERIFY_EXITS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="FILE::KERNEL")
    p.add_argument(
        "--candidate",
        type=Path,
        required=True,
        metavar="CANDIDATE.py",
        help="the whole module with the kernel (and launcher) rewritten",
    )
    p.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-timing", action="store_true", help="skip the A/B timing on a GPU")
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds per harness call (default: from the original's own check)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(handler=handlers["verify"])


def _bench(sub, handlers) -> None:
    p = sub.add_parser("bench", help="time the kernel on every case against the device's ceilings")
    p.add_argument("target", metavar="FILE::KERNEL")
    p.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    p.add_argument("--json", action="store_true")
    p.add_argument("--rep-ms", type=float, default=300.0, help="timing budget per case (ms)")
    p.add_argument(
        "--ncu",
        action="store_true",
        help="add Nsight Compute data (speed of light, occupancy, stalls)",
    )
    p.add_argument(
        "--ncu-case", type=int, default=0, help="which case Nsight Compute profiles (default 0)"
    )
    p.set_defaults(handler=handlers["bench"])


def _profile(sub, handlers) -> None:
    p = sub.add_parser(
        "profile", help="rank a script's GPU kernels by share of GPU time (needs a GPU)"
    )
    p.add_argument("script", type=Path, metavar="SCRIPT")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS")
    p.add_argument(
        "--root",
        type=Path,
        help="workspace to map Triton kernels back to (default: current folder)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=handlers["profile"])


def _memory(sub, handlers) -> None:
    p = sub.add_parser(
        "memory", help="the experience memory shared across searches (~/.cache/kernelbrain)"
    )
    p.add_argument("action", choices=("show", "clear"))
    p.set_defaults(handler=handlers["memory"])


def _init(sub, handlers) -> None:
    p = sub.add_parser("init", help="scaffold a task harness for a kernel")
    p.add_argument("target", metavar="FILE::KERNEL")
    p.add_argument(
        "--llm",
        action="store_true",
        help="have an LLM draft the reference and inputs; written only if the original passes them",
    )
    _add_llm_flags(p)
    p.add_argument("--device", default="auto", help="where the drafted harness is checked")
    p.set_defaults(handler=handlers["init"])


def _optimize(sub, handlers) -> None:
    p = sub.add_parser(
        "optimize",
        help="search for verified faster variants of a kernel",
        epilog=OPTIMIZE_EXITS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("target", metavar="FILE[::KERNEL]")
    p.add_argument(
        "--budget",
        default=DEFAULT_BUDGET,
        help=f"wall-time budget, e.g. 90s, 5m, 1h (default {DEFAULT_BUDGET})",
    )
    p.add_argument(
        "--max-candidates",
        type=int,
        default=None,
        help="candidates to evaluate at most (default: no cap; the time budget and stagnation end the search)",
    )
    p.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    llm = p.add_mutually_exclusive_group()
    llm.add_argument(
        "--llm",
        action="store_true",
        help="also ask an LLM for rewrites (any OpenAI-compatible endpoint: "
        "KERNELBRAIN_LLM_BASE_URL or OPENAI_BASE_URL; key: KERNELBRAIN_API_KEY or OPENAI_API_KEY)",
    )
    llm.add_argument(
        "--no-llm", dest="llm", action="store_false", help="offline mutators only (default)"
    )
    _add_llm_flags(p)
    p.add_argument(
        "--llm-tokens", type=int, default=None, help="LLM tokens this search may spend at most"
    )
    p.add_argument(
        "--llm-dollars", type=float, default=None, help="LLM dollars this search may spend at most"
    )
    lowering = p.add_mutually_exclusive_group()
    lowering.add_argument(
        "--lowering",
        action="store_true",
        default=None,
        help="start from torch.compile's kernels of the reference (default: on a GPU)",
    )
    lowering.add_argument(
        "--no-lowering", dest="lowering", action="store_false", help="never compile the reference"
    )
    p.add_argument(
        "--json", action="store_true", help="print the result as JSON (README: optimize --json)"
    )
    p.add_argument(
        "--report", type=Path, metavar="REPORT.html", help="write an HTML report with plots"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--apply", action="store_true", help="write the best verified variant into the file"
    )
    p.add_argument(
        "--wait",
        action="store_true",
        help="if another search of this kernel is running, wait for it (default: exit 3)",
    )
    mem = p.add_mutually_exclusive_group()
    mem.add_argument(
        "--memory",
        dest="memory",
        action="store_const",
        const=True,
        default=None,
        help="use and feed the experience memory (default, unless KERNELBRAIN_MEMORY=off)",
    )
    mem.add_argument(
        "--no-memory",
        dest="memory",
        action="store_const",
        const=False,
        help="neither use nor feed the experience memory",
    )
    p.set_defaults(handler=handlers["optimize"])


def _add_llm_flags(p: argparse.ArgumentParser) -> None:
    """How the LLM is reached and asked (defaults: the environment, README "LLM")."""
    p.add_argument("--llm-model", default=None, help="model name (default: KERNELBRAIN_LLM_MODEL)")
    p.add_argument("--llm-base-url", default=None, help="endpoint base URL (default: from env)")
    p.add_argument("--llm-temperature", type=float, default=None, help="sampling temperature (0.7)")
    p.add_argument("--llm-concurrency", type=int, default=None, help="requests at once (2)")
    p.add_argument(
        "--llm-timeout", type=float, default=None, help="seconds per request, retries apart (90)"
    )
    p.add_argument(
        "--llm-repairs", type=int, default=None, help="rounds of feeding an error back (2)"
    )
    p.add_argument(
        "--llm-price",
        metavar="IN,OUT",
        default=None,
        help="the model's dollars per million input and output tokens (for --llm-dollars)",
    )


def _plugin_commands(sub) -> None:
    """Subcommands other packages of the distribution add (entry-point group
    `kernelbrain.commands`): `serve` comes from the language server this way, so the engine never
    imports the server. A plugin that fails to load is reported and skipped."""
    from importlib.metadata import entry_points

    for ep in sorted(entry_points(group="kernelbrain.commands"), key=lambda e: e.name):
        try:
            ep.load()(sub)
        except Exception as exc:  # a broken plugin must not take the other commands down
            print(f"kernelbrain: command {ep.name!r} is unavailable: {exc}", file=sys.stderr)
