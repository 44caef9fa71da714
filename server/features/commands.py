"""workspace/executeCommand handlers: optimize, cancel, apply a variant, scaffold a harness."""

from __future__ import annotations

import uuid
from difflib import SequenceMatcher
from pathlib import Path

from lsprotocol import types
from pygls.uris import from_fs_path, to_fs_path

from kernelbrain.engine.agent import protocol as p
from kernelbrain.engine.api.budget import parse_duration
from kernelbrain.engine.api.tasks import TaskError, find_task, plan

from ..dispatch import expect
from ..engine_bridge import EngineUnavailable
from ..shared import RunningJob, Session
from .code_lens import OPTIMIZE_COMMAND

CANCEL_COMMAND = "kernelbrain.cancel"
APPLY_COMMAND = "kernelbrain.applyVariant"
INIT_HARNESS_COMMAND = "kernelbrain.initHarness"
DRAFT_HARNESS_COMMAND = "kernelbrain.draftHarness"


def minimal_edits(old: str, new: str) -> list[types.TextEdit]:
    """Line-range edits turning `old` into `new` (keeps the cursor and undo history sensible)."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    edits = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        edits.append(
            types.TextEdit(
                range=types.Range(
                    start=types.Position(line=i1, character=0),
                    end=types.Position(line=i2, character=0),
                ),
                new_text="".join(b[j1:j2]),
            )
        )
    if old and not old.endswith("\n") and edits:  # the last line has no newline: replace it whole
        last = len(a) - 1
        edits = [
            e
            if e.range.end.line <= last
            else types.TextEdit(
                range=types.Range(
                    start=e.range.start, end=types.Position(line=last, character=len(a[last]))
                ),
                new_text=e.new_text,
            )
            for e in edits
        ]
    return edits


async def optimize(ls: Session, *args):
    """Start a search for a kernel in the engine agent, with work-done progress and cancel."""
    uri, kernel = (list(args) + [None, None])[:2]
    expect(uri, str, "kernelbrain.optimize's uri")
    expect(kernel, str, "kernelbrain.optimize's kernel")
    path = to_fs_path(uri) if uri else None
    if not path or not kernel:
        return {"started": False, "message": "kernelbrain.optimize takes [uri, kernel]"}
    untrusted = ls.require_trust("optimizing")
    if untrusted is not None:
        ls.tell(untrusted, types.MessageType.Warning)
        return {"started": False, "message": untrusted, "reason": "untrusted"}
    doc = ls.open_document(uri)
    try:
        on_disk = Path(path).read_text(encoding="utf-8")
    except OSError:
        on_disk = None
    if doc is not None and on_disk is not None and doc.source != on_disk:
        msg = f"KernelBrain: save {Path(path).name} first: the search runs the file as saved."
        ls.tell(msg, types.MessageType.Warning)
        return {"started": False, "message": msg}
    try:
        find_task(path, kernel)
    except TaskError as exc:
        msg = f"KernelBrain cannot optimize `{kernel}`: {exc}"
        ls.tell(msg, types.MessageType.Warning)
        return {"started": False, "message": msg, "reason": exc.code}
    s = ls.settings
    request = p.OptimizeRequest(
        file=path,
        kernel=kernel,
        budget_s=parse_duration(s.budget),
        max_candidates=s.max_candidates,
        device=s.device,
        llm=s.llm_options() if s.llm else None,
        memory=s.memory,
    )
    try:
        info = await ls.engine.request(p.JOB_START, request, p.JobInfo)
    except EngineUnavailable as exc:
        msg = f"KernelBrain: the engine is unavailable: {exc}"
        ls.tell(msg, types.MessageType.Error)
        return {"started": False, "message": msg}
    token = await begin_progress(
        ls,
        f"Optimizing {kernel}",
        cancellable=True,
        percentage=0,
        message="queued" if info.state == "queued" else "starting",
    )
    ls.jobs.add(RunningJob(info, uri, kernel, token))
    ls.refresh_lenses()
    return {
        "started": True,
        "job": info.id,
        "state": info.state,
        "queuedBehind": info.queued_behind,
    }


async def cancel(ls: Session, *args):
    job_id = args[0] if args else None
    return await cancel_job(ls, expect(job_id, str, "kernelbrain.cancel's job id"))


async def progress_cancel(ls: Session, params: types.WorkDoneProgressCancelParams):
    job_id = ls.jobs.token_jobs.get(params.token)
    if job_id is not None:
        await cancel_job(ls, job_id)


async def apply_variant(ls: Session, *args):
    """Apply a verified variant as a versioned edit, unless its kernel changed since the search."""
    uri, kernel, variant_id = (list(args) + [None] * 3)[:3]
    path, current, offer = await ls.results.find_offer(uri, kernel, variant_id)
    if not path or current is None:
        return {"applied": False, "reason": "no such document"}
    if offer is None:
        msg = f"KernelBrain: variant {variant_id} of `{kernel}` is no longer available"
        ls.tell(msg, types.MessageType.Warning)
        return {"applied": False, "reason": msg}
    if offer.stale:
        msg = (
            f"KernelBrain withdrew variant {variant_id[:8]} of `{kernel}`: {offer.rebased.reason}. "
            "Run Optimize again on the current code."
        )
        ls.tell(msg, types.MessageType.Warning)
        return {"applied": False, "reason": msg, "stale": True}
    doc = ls.open_document(uri)
    edit = types.WorkspaceEdit(
        document_changes=[
            types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(
                    uri=uri, version=doc.version if doc else None
                ),
                edits=minimal_edits(current, offer.rebased.text),
            )
        ]
    )
    result = await ls.workspace_apply_edit_async(
        types.ApplyWorkspaceEditParams(
            edit=edit, label=f"KernelBrain: apply {kernel} variant {variant_id[:8]}"
        )
    )
    return {
        "applied": bool(result and result.applied),
        "variant": variant_id,
        "reason": (result.failure_reason if result else None),
    }


async def init_harness(ls: Session, *args):
    """Scaffold a harness (config entry and stubs) as one workspace edit the user can undo."""
    uri, kernel = (list(args) + [None, None])[:2]
    expect(uri, str, "kernelbrain.initHarness's uri")
    expect(kernel, str, "kernelbrain.initHarness's kernel")
    path = to_fs_path(uri)
    try:
        sc = plan(path, kernel)
    except (TaskError, TypeError) as exc:
        msg = f"KernelBrain cannot scaffold a harness for `{kernel}`: {exc}"
        ls.tell(msg, types.MessageType.Warning)
        return {"applied": False, "reason": msg}
    applied = await apply_harness(
        ls, kernel, sc.harness, sc.harness_text, sc.config, sc.config_text, sc.created_config
    )
    if applied:
        ls.tell(
            f"KernelBrain: created a harness for `{kernel}` in {sc.harness.name}: fill in the reference and "
            "the input functions, then run Optimize."
        )
    return {"applied": applied, "harness": str(sc.harness), "config": str(sc.config)}


async def draft_harness(ls: Session, *args):
    """KB003's quick fix with the LLM: the engine has the LLM draft the reference and inputs
    and checks the original against them (sandboxed); a harness that holds is offered as the
    same workspace edit `initHarness` makes, with work-done progress while it drafts."""
    uri, kernel = (list(args) + [None, None])[:2]
    expect(uri, str, "kernelbrain.draftHarness's uri")
    expect(kernel, str, "kernelbrain.draftHarness's kernel")
    untrusted = ls.require_trust("drafting a harness")
    if untrusted is not None:
        ls.tell(untrusted, types.MessageType.Warning)
        return {"applied": False, "reason": untrusted}
    s = ls.settings
    request = p.DraftHarnessRequest(to_fs_path(uri), kernel, s.device, s.llm_options())
    token = await begin_progress(ls, f"Drafting a harness for {kernel} with the LLM")
    try:
        draft = await ls.engine.request(p.DRAFT_HARNESS, request, p.DraftHarnessResult)
    except EngineUnavailable as exc:
        draft = p.DraftHarnessResult(False, f"the engine is unavailable: {exc}")
    finally:
        if token is not None:
            ls.work_done_progress.end(token, types.WorkDoneProgressEnd())
    if draft is None or not draft.held:
        why = draft.message if draft is not None else "no answer from the engine"
        msg = (
            f"KernelBrain: no drafted harness for `{kernel}` held: {why}. The quick fix "
            "`Create a task harness` writes stubs to fill in by hand."
        )
        ls.tell(msg, types.MessageType.Warning)
        return {"applied": False, "reason": msg, "spent": draft.spent if draft else ""}
    applied = await apply_harness(
        ls,
        kernel,
        Path(draft.harness_path),
        draft.harness_text,
        Path(draft.config_path),
        draft.config_text,
        draft.created_config,
    )
    if applied:
        ls.tell(
            f"KernelBrain: a harness for `{kernel}` in {Path(draft.harness_path).name}, {draft.message}"
        )
    return {
        "applied": applied,
        "harness": draft.harness_path,
        "rounds": draft.rounds,
        "spent": draft.spent,
    }


def register(server) -> None:
    server.command(OPTIMIZE_COMMAND)(optimize)
    server.command(CANCEL_COMMAND)(cancel)
    server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)(progress_cancel)
    server.command(APPLY_COMMAND)(apply_variant)
    server.command(INIT_HARNESS_COMMAND)(init_harness)
    server.command(DRAFT_HARNESS_COMMAND)(draft_harness)


async def begin_progress(ls, title: str, **begin) -> str | None:
    """Work-done progress the client shows while a long request runs (None: it cannot)."""
    caps = ls.client_capabilities.window
    if not (caps and caps.work_done_progress):
        return None
    token = f"kernelbrain-{uuid.uuid4().hex[:12]}"
    try:
        await ls.work_done_progress.create_async(token)
        ls.work_done_progress.begin(token, types.WorkDoneProgressBegin(title=title, **begin))
    except Exception:
        return None
    return token


def _insert_all(text: str) -> list[types.TextEdit]:
    start = types.Position(line=0, character=0)
    return [types.TextEdit(range=types.Range(start=start, end=start), new_text=text)]


async def apply_harness(
    ls,
    kernel: str,
    harness: Path,
    harness_text: str,
    config: Path,
    config_text: str,
    created_config: bool,
) -> bool:
    """A harness module created and the config entry added, as one workspace edit the user can
    undo: the editor writes, not the server."""
    harness_uri, config_uri = from_fs_path(str(harness)), from_fs_path(str(config))
    changes: list = [
        types.CreateFile(uri=harness_uri),
        types.TextDocumentEdit(
            text_document=types.OptionalVersionedTextDocumentIdentifier(
                uri=harness_uri, version=None
            ),
            edits=_insert_all(harness_text),
        ),
    ]
    old = "" if created_config else config.read_text(encoding="utf-8")
    if created_config:
        changes.append(types.CreateFile(uri=config_uri))
    changes.append(
        types.TextDocumentEdit(
            text_document=types.OptionalVersionedTextDocumentIdentifier(
                uri=config_uri, version=None
            ),
            edits=minimal_edits(old, config_text) if old else _insert_all(config_text),
        )
    )
    result = await ls.workspace_apply_edit_async(
        types.ApplyWorkspaceEditParams(
            edit=types.WorkspaceEdit(document_changes=changes),
            label=f"KernelBrain: harness for {kernel}",
        )
    )
    return bool(result and result.applied)


async def cancel_job(ls, job_id: str | None) -> dict:
    if job_id is None or job_id not in ls.jobs.jobs:
        return {"cancelled": False, "reason": f"no job {job_id}"}
    try:
        info = await ls.engine.request(p.JOB_CANCEL, p.JobCancel(job_id), p.JobInfo)
    except EngineUnavailable as exc:
        return {"cancelled": False, "reason": str(exc)}
    return {"cancelled": True, "job": job_id, "state": info.state if info else "unknown"}
