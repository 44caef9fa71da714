"""Hover on a kernel's name (definition or launch site): parameters, constexprs, launch sites."""

from __future__ import annotations

from lsprotocol import types

from kernelbrain.engine.api.analysis import Kernel
from kernelbrain.engine.api.results import against_compiler

from ..convert import Positions
from ..shared import Session


def kernel_markdown(kernel: Kernel, findings) -> str:
    decorators = ", ".join(f"`@{d}`" for d in kernel.decorators)
    runtime = [p.name for p in kernel.params if not p.constexpr]
    lines = [
        f"### {kernel.name}  ",
        f"{decorators}" + (" · helper (called from other kernels)" if kernel.is_helper else ""),
    ]
    if kernel.docstring:
        lines += ["", kernel.docstring.strip().splitlines()[0]]
    lines += [
        "",
        f"**Parameters** ({len(kernel.params)}): "
        + (", ".join(f"`{p}`" for p in runtime) or "none"),
    ]
    if kernel.constexprs:
        lines.append("**Constexprs**: " + ", ".join(f"`{c}`" for c in kernel.constexprs))
    if kernel.autotune_configs:
        key = ", ".join(kernel.autotune_key) or "none"
        lines.append(f"**Autotune**: {len(kernel.autotune_configs)} configs, key = {key}")
    if kernel.heuristics:
        lines.append("**Heuristics**: " + ", ".join(f"`{k}`" for k in kernel.heuristics))
    if kernel.helpers:
        lines.append("**Calls**: " + ", ".join(f"`{h}`" for h in kernel.helpers))
    if kernel.launch_sites:
        lines += ["", "**Launch sites**"]
        for s in kernel.launch_sites:
            where = f"in `{s.launcher}`" if s.launcher else "at module level"
            lines.append(f"- line {s.span.line + 1} {where}: grid `{s.grid}`")
    else:
        lines += ["", "_No launch site in this file._"]
    mine = [f for f in findings if f.kernel == kernel.name]
    if mine:
        lines += ["", "**Findings**: " + ", ".join(sorted({f.code for f in mine}))]
    return "\n".join(lines)


def dynamic_markdown(ls, path: str, kernel: Kernel, uri: str) -> str:
    """What only the engine knows: compiled facts, profile share, best variant, job status."""
    from kernelbrain.engine.api.compiled_view import summary

    lines: list[str] = []
    view = ls.compiled.view(uri)
    if view is not None:
        for v in view.views:
            if v.kernel == kernel.name and v.specialisations:
                origin = (
                    "from its harness"
                    if v.source == "harness"
                    else f"from the launch site ({v.note})"
                )
                lines += [
                    "",
                    f"**Compiled** (sm_{ls.settings.target_arch}, {origin}):",
                    "```",
                    summary(v),
                    "```",
                ]
    share = ls.results.profile_share(path, kernel.name)
    if share:
        lines += ["", f"**Profile**: {share}"]
    for job in ls.jobs.jobs.values():
        if job.kernel == kernel.name and job.info.file == path:
            best = f", best {job.info.best_speedup:.2f}x" if job.info.best_speedup else ""
            lines += [
                "",
                f"**Search** {job.info.id}: {job.info.state} {job.info.fraction:.0%}{best} — {job.info.message}",
            ]
    current = ls.current_text(uri) or ""
    offers = ls.results.offers(path, kernel.name, current)
    if offers:
        o = offers[0]
        kind = "measured" if o.variant.measured else "estimated"
        state = f" — withdrawn: {o.rebased.reason}" if o.stale else ""
        lines += [
            "",
            f"**Best variant** `{o.variant.id[:8]}`: {o.variant.speedup:.2f}x ({kind}), "
            f"{o.variant.origin}{state}",
        ]
        result = ls.results.get(path, kernel.name)
        vs = against_compiler(result, o.variant) if result is not None else None
        if vs is not None:
            lines.append(f"{vs:.2f}x the speed of torch.compile of your reference")
    return "\n".join(lines)


async def hover(ls: Session, params: types.HoverParams) -> types.Hover | None:
    uri = params.text_document.uri
    state = ls.current(uri)
    if state is None:
        return None
    await ls.results.ready(uri)
    pos = Positions(ls.open_document(uri))
    line, col = pos.from_client(params.position)
    for k in state.index.kernels:
        spans = [k.name_span] + [
            type(k.name_span)(s.span.line, s.span.col, s.span.line, s.span.col + len(k.name))
            for s in k.launch_sites
        ]
        hit = next((s for s in spans if s.contains(line, col)), None)
        if hit is not None:
            text = kernel_markdown(k, ls.findings_for(state)) + dynamic_markdown(
                ls, state.path, k, uri
            )
            return types.Hover(
                contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text),
                range=pos.range(hit),
            )
    return None


def register(server) -> None:
    server.feature(types.TEXT_DOCUMENT_HOVER)(hover)
