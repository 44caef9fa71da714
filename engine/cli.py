"""`kernelbrain …` command line.

Each subcommand imports what it needs inside its handler, so `kernelbrain check` and
`kernelbrain serve` never load torch or triton. Exit codes are stable (README "CLI"):
0 success / nothing found, 1 findings or a rejected result, 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


class UsageError(Exception):
    """Bad arguments discovered after parsing (missing file, unknown kernel, …): exit 2."""


def _cmd_check(args: argparse.Namespace) -> int:
    from .check import check_paths, format_json, format_text

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
        print(f"Found {n} finding{'s' if n != 1 else ''} in {result.files_checked} file{'s' if result.files_checked != 1 else ''} checked.")
    return EXIT_FINDINGS if result.findings and not args.exit_zero else EXIT_OK


def _cmd_serve(args: argparse.Namespace) -> int:
    from kernelbrain.server.app import serve

    serve()
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelbrain", description="Find and verify faster variants of Triton kernels."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("check", help="static bottleneck diagnostics (KB1xx) for Python files or folders")
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--select", action="append", metavar="CODE", help="only these codes or prefixes (repeatable)")
    p.add_argument("--ignore", action="append", metavar="CODE", help="skip these codes or prefixes (repeatable)")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    p.set_defaults(handler=_cmd_check)

    p = sub.add_parser("serve", help="run the language server over stdio")
    p.set_defaults(handler=_cmd_serve)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except UsageError as exc:
        print(f"kernelbrain: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
