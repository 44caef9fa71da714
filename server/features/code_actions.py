"""Code actions: "Optimize kernel", one "Apply" per verified variant, and the harness quick fixes
(stubs, or with the LLM on, a drafted harness)."""

from __future__ import annotations

from lsprotocol import types
from pygls.uris import to_fs_path

from kernelbrain.engine.api.results import against_compiler

from ..convert import Positions
from ..shared import NO_HARNESS, Session
from .code_lens import optimize_command
from .commands import DRAFT_HARNESS_COMMAND, INIT_HARNESS_COMMAND

OPTIMIZE_KIND = "refactor.kernelbrain.optimize"
VARIANT_KIND = types.CodeActionKind.RefactorRewrite
MAX_VARIANT_ACTIONS = 5


def _wanted(only, kind: str) -> bool:
    return not only or any(kind == o or kind.startswith(o + ".") for o in only)


def variant_title(kernel: str, variant, result=None) -> str:
    cases = variant.cases_verified or len(variant.per_case)
    if variant.measured:
        vs = against_compiler(result, variant) if result is not None else None
        compiler = f", {vs:.2f}× torch.compile's speed" if vs is not None else ""
        return (
            f"Apply: `{kernel}` {variant.speedup:.2f}× faster{compiler} (verified on {cases} cases)"
        )
    return f"Apply: `{kernel}` estimated {variant.speedup:.2f}× faster, not measured (verified on {cases} cases)"


async def code_action(ls: Session, params: types.CodeActionParams) -> list[types.CodeAction]:
    uri = params.text_document.uri
    state = ls.current(uri)
    if state is None:
        return []
    await ls.results.ready(uri)
    only = params.context.only
    actions: list[types.CodeAction] = []
    for diag in params.context.diagnostics:
        if (
            diag.code == NO_HARNESS
            and _wanted(only, types.CodeActionKind.QuickFix)
            and isinstance(diag.data, dict)
        ):
            kernel = diag.data.get("kernel")
            actions.append(
                types.CodeAction(
                    title=f"Create a task harness for `{kernel}`",
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diag],
                    is_preferred=True,
                    command=types.Command(
                        title="Create a task harness",
                        command=INIT_HARNESS_COMMAND,
                        arguments=[uri, kernel],
                    ),
                )
            )
            if ls.settings.llm and ls.trusted:  # drafting runs the kernel against the draft
                actions.append(
                    types.CodeAction(
                        title=f"Draft a task harness for `{kernel}` with the LLM",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[diag],
                        command=types.Command(
                            title="Draft a task harness with the LLM",
                            command=DRAFT_HARNESS_COMMAND,
                            arguments=[uri, kernel],
                        ),
                    )
                )
    line, col = Positions(ls.open_document(uri)).from_client(params.range.start)
    kernel = state.index.kernel_at(line, col)
    if kernel is None or kernel.is_helper:
        return actions
    if _wanted(only, OPTIMIZE_KIND):
        actions.append(
            types.CodeAction(
                title=f"Optimize kernel `{kernel.name}`",
                kind=OPTIMIZE_KIND,
                command=optimize_command(uri, kernel.name, f"Optimize kernel `{kernel.name}`"),
            )
        )
    if _wanted(only, VARIANT_KIND):
        current = ls.current_text(uri) or ""
        result = ls.results.get(to_fs_path(uri), kernel.name)
        for offer in ls.results.offers(to_fs_path(uri), kernel.name, current)[:MAX_VARIANT_ACTIONS]:
            v = offer.variant
            action = types.CodeAction(
                title=variant_title(kernel.name, v, result),
                kind=VARIANT_KIND,
                command=types.Command(
                    title="Apply variant",
                    command="kernelbrain.applyVariant",
                    arguments=[uri, kernel.name, v.id],
                ),
                data={"uri": uri, "kernel": kernel.name, "variant": v.id},
                tags=[types.CodeActionTag.LlmGenerated] if v.llm else None,
            )
            if offer.stale:
                action.disabled = types.CodeActionDisabled(
                    reason=f"withdrawn: {offer.rebased.reason}; run Optimize again"
                )
            actions.append(action)
    return actions


def register(server) -> None:
    server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[
                types.CodeActionKind.Refactor,
                types.CodeActionKind.RefactorRewrite,
                types.CodeActionKind.QuickFix,
            ],
            resolve_provider=False,
        ),
    )(code_action)
