"""Custom request `kernelbrain/kernels`: every indexed kernel in the workspace (for client views)."""

from __future__ import annotations

import msgspec

from ..shared import Session

KERNELS_REQUEST = "kernelbrain/kernels"


def kernels(ls: Session, params=None) -> dict:
    only = getattr(params, "uri", None) if params is not None else None
    files = []
    for state in sorted(ls.files, key=lambda s: s.uri):
        if only and state.uri != only:
            continue
        files.append(
            {
                "uri": state.uri,
                "open": state.open,
                "version": state.version,
                "kernels": msgspec.to_builtins(state.index.kernels),
                "errors": msgspec.to_builtins(state.index.errors),
            }
        )
    return {"files": files}


def register(server) -> None:
    server.feature(KERNELS_REQUEST)(kernels)
