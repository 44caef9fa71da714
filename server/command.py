"""`kernelbrain serve`: the language server over stdio, added to the engine's CLI as a plugin
(entry-point group `kernelbrain.commands` in pyproject.toml), so the engine never imports it."""

from __future__ import annotations


def register(subparsers) -> None:
    p = subparsers.add_parser("serve", help="run the language server over stdio")
    p.set_defaults(handler=_serve)


def _serve(args) -> int:
    from .app import serve

    serve()
    return 0
