"""A "⚡ Optimize kernel" lens above every launchable kernel (with profile share and job status)."""

from __future__ import annotations

from lsprotocol import types

from ..convert import Positions
from ..shared import Session

OPTIMIZE_COMMAND = "kernelbrain.optimize"


def optimize_command(uri: str, kernel: str, title: str = "⚡ Optimize kernel") -> types.Command:
    return types.Command(title=title, command=OPTIMIZE_COMMAND, arguments=[uri, kernel])


def lens_title(ls, path: str, kernel: str) -> tuple[str, types.Command | None]:
    """The lens text: running job first, else "Optimize" with the kernel's share of GPU time."""
    job = ls.jobs.active(path, kernel)
    if job is not None:
        best = f" · best {job.info.best_speedup:.2f}×" if job.info.best_speedup else ""
        state = "queued" if job.info.state == "queued" else f"{job.info.fraction:.0%}"
        return f"⏳ Optimizing {state}{best} · cancel", types.Command(
            title="cancel", command="kernelbrain.cancel", arguments=[job.info.id]
        )
    share = ls.results.profile_share(path, kernel)
    suffix = f" · {share}" if share else ""
    return f"⚡ Optimize kernel{suffix}", None


def code_lens(ls: Session, params: types.CodeLensParams) -> list[types.CodeLens]:
    """Answered from memory."""
    uri = params.text_document.uri
    state = ls.current(uri)
    if state is None or not ls.trusted:  # optimizing runs the workspace's code
        return []
    pos = Positions(ls.open_document(uri))
    lenses = []
    for k in state.index.launchable:
        title, command = lens_title(ls, state.path, k.name)
        if command is not None:
            command = types.Command(
                title=title, command=command.command, arguments=command.arguments
            )
        lenses.append(
            types.CodeLens(
                range=pos.range(k.name_span),
                command=command or optimize_command(uri, k.name, title),
            )
        )
    return lenses


def register(server) -> None:
    server.feature(types.TEXT_DOCUMENT_CODE_LENS)(code_lens)
