"""End-to-end: Optimize from the editor, progress, variant actions, preview, apply, cancel,
withdrawal, persistence across restarts, settings, and the compiled view — a real server and a
real engine agent over stdio, on the CPU."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path

import pytest
from lsprotocol import types

from kernelbrain.engine.evaluate.pool import WorkerPool
from kernelbrain.engine.evaluate.verify import run_harness
from kernelbrain.engine.task import find_task

from ..conftest import EXAMPLES
from .helpers import codes, doc, open_file, replace_text, start_client, stop_client, wait_until

pytestmark = pytest.mark.slow
# The search ends on its candidate budget, not the clock: a loaded CI machine must not starve it.
SETTINGS = {"budget": "300s", "maxCandidates": 6, "device": "cpu", "compiledView": False}


def attach_apply_edit(client, texts: dict[str, str]):
    """The test client's workspace/applyEdit: apply versioned text edits to our copy and to disk."""
    received: list[types.ApplyWorkspaceEditParams] = []

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams):
        received.append(params)
        for change in params.edit.document_changes or []:
            if not isinstance(change, types.TextDocumentEdit):
                continue
            uri = change.text_document.uri
            lines = texts[uri].splitlines(keepends=True)
            for e in sorted(
                change.edits,
                key=lambda e: (e.range.start.line, e.range.start.character),
                reverse=True,
            ):
                start, end = e.range.start.line, e.range.end.line
                lines[start:end] = e.new_text.splitlines(keepends=True)
            texts[uri] = "".join(lines)
        return types.ApplyWorkspaceEditResult(applied=True)

    return received


async def new_client(workspace: Path, tmp_path: Path, settings=SETTINGS):
    record = tmp_path / f"imports-{time.monotonic_ns()}.txt"
    client = await start_client(workspace, record, None, configuration={"kernelbrain": settings})
    return client, record


async def actions_at(client, uri: str, line: int, only=(types.CodeActionKind.RefactorRewrite,)):
    return await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=doc(uri),
            range=types.Range(
                start=types.Position(line=line, character=4),
                end=types.Position(line=line, character=4),
            ),
            context=types.CodeActionContext(diagnostics=[], only=list(only)),
        )
    )


def progress_ended(client, token) -> bool:
    return any(
        isinstance(v, types.WorkDoneProgressEnd) for v in client.progress_reports.get(token, [])
    )


@pytest.fixture
def workspace(tmp_path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLES, ws, ignore=shutil.ignore_patterns(".kernelbrain", "__pycache__"))
    return ws


async def test_optimize_preview_withdraw_apply_and_restart(workspace, tmp_path):
    client, record = await new_client(workspace, tmp_path)
    path = workspace / "ops" / "gelu.py"
    original = path.read_text()
    uri = open_file(client, path)
    texts = {uri: original}
    received = attach_apply_edit(client, texts)
    pushed: list = []  # the server pushes every change of a job: this test never polls

    @client.feature("kernelbrain/jobChanged")
    def job_changed(params):
        pushed.append(params)

    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=doc(uri))
    )
    assert [l.command.title for l in lenses] == ["⚡ Optimize kernel"]
    started = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command=lenses[0].command.command, arguments=lenses[0].command.arguments
        )
    )
    assert started["started"] is True
    tokens = list(client.progress_reports)
    assert len(tokens) == 1
    token = tokens[0]
    await wait_until(
        lambda: progress_ended(client, token), timeout=240, what="the search to finish"
    )
    reports = client.progress_reports[token]
    assert isinstance(reports[0], types.WorkDoneProgressBegin) and reports[0].cancellable
    assert any(
        isinstance(r, types.WorkDoneProgressReport) and r.percentage is not None for r in reports
    )
    await wait_until(
        lambda: pushed and pushed[-1].state == "finished", timeout=30, what="the job's end pushed"
    )
    assert pushed[0].state in ("queued", "running") and pushed[0].uri == uri
    assert any(j.state == "running" and j.fraction > 0 for j in pushed), "no progress pushed"
    assert pushed[-1].best_id and pushed[-1].best_speedup > 1.0
    # the summary is a window/showMessage sent after the progress ends: wait for it, do not race it
    await wait_until(
        lambda: any("`gelu_kernel`" in m.message for m in client.messages),
        timeout=30,
        what="the search's summary message",
    )
    assert any("verified variant" in m.message for m in client.messages), [
        m.message for m in client.messages
    ]

    kernel_line = (
        original.splitlines().index(
            "def gelu_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):"
        )
        + 2
    )
    actions = [
        a for a in await actions_at(client, uri, kernel_line) if a.title.startswith("Apply:")
    ]
    assert actions, "no variant code action"
    first = actions[0]
    assert first.kind == types.CodeActionKind.RefactorRewrite and first.disabled is None
    assert (
        "estimated" in first.title
        and "not measured" in first.title
        and "verified on" in first.title
    )
    variant_id = first.command.arguments[2]

    preview = await client.protocol.send_request_async(
        "kernelbrain/variant", {"uri": uri, "kernel": "gelu_kernel", "id": variant_id}
    )
    assert (
        preview.found and preview.newText != original and preview.diff.startswith("--- a/gelu.py")
    )
    assert "What changed" in preview.explanation and preview.measured is False
    # The results view's data: the trajectory up to the best, counts, every variant offered.
    results = await client.protocol.send_request_async(
        "kernelbrain/results", {"uri": uri, "kernel": "gelu_kernel"}
    )
    assert results.found and results.best and results.trajectory
    assert results.trajectory[-1].best >= 1.0 and results.candidates.total >= 1
    listed = {v.id: v for v in results.variants}
    assert listed[variant_id].offered and listed[variant_id].stale is False

    # Edit the kernel (unsaved): the variant is withdrawn, with the reason.
    edited = original.replace("inner = 0.7978845608028654", "inner = 0.79788456")
    replace_text(client, uri, edited, 2)
    await asyncio.sleep(0.3)
    withdrawn = [
        a
        for a in await actions_at(client, uri, kernel_line)
        if a.command.arguments[2] == variant_id
    ]
    assert (
        withdrawn
        and withdrawn[0].disabled is not None
        and "withdrawn" in withdrawn[0].disabled.reason
    )
    refused = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="kernelbrain.applyVariant", arguments=[uri, "gelu_kernel", variant_id]
        )
    )
    assert refused["applied"] is False and refused["stale"] is True and not received
    after_edit = await client.protocol.send_request_async(
        "kernelbrain/results", {"uri": uri, "kernel": "gelu_kernel"}
    )
    assert {v.id: v.stale for v in after_edit.variants}[variant_id] is True

    # Back to the searched code: apply through workspace/applyEdit, with the document version.
    replace_text(client, uri, original, 3)
    await asyncio.sleep(0.3)
    applied = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="kernelbrain.applyVariant", arguments=[uri, "gelu_kernel", variant_id]
        )
    )
    assert applied["applied"] is True
    (change,) = received[-1].edit.document_changes
    assert change.text_document.version == 3
    assert texts[uri] == preview.newText
    path.write_text(texts[uri])  # the editor saves
    replace_text(client, uri, texts[uri], 4)  # and its document now holds the variant
    await asyncio.sleep(0.3)
    after_apply = await client.protocol.send_request_async(
        "kernelbrain/results", {"uri": uri, "kernel": "gelu_kernel"}
    )
    marked = {v.id: v for v in after_apply.variants}
    assert marked[variant_id].applied is True and marked[variant_id].withdrawn is None
    for other in (v for v in after_apply.variants if v.id != variant_id and v.stale):
        assert other.withdrawn.startswith("made from the kernel before `"), other.withdrawn
        assert "was applied; run Optimize again" in other.withdrawn
    assert not [v for v in after_apply.variants if v.id != variant_id and v.applied]
    with WorkerPool() as pool:
        result = run_harness(pool, find_task(path, "gelu_kernel"), None, "cpu")
    assert result.accepted, result.message

    await stop_client(client)
    assert not record.exists()

    # Restart on the original file: the stored result is offered again.
    path.write_text(original)
    client, record = await new_client(workspace, tmp_path)
    uri = open_file(client, path)
    again = [a for a in await actions_at(client, uri, kernel_line) if a.title.startswith("Apply:")]
    assert variant_id in [a.command.arguments[2] for a in again]
    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=doc(uri), position=types.Position(line=kernel_line - 2, character=6)
        )
    )
    assert "Best variant" in hover.contents.value
    await stop_client(client)
    assert not record.exists()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not running
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


async def test_jobs_queue_and_cancel_stops_workers_within_two_seconds(workspace, tmp_path):
    client, record = await new_client(
        workspace, tmp_path, SETTINGS | {"budget": "10m", "maxCandidates": 60}
    )
    uris = [open_file(client, workspace / "ops" / f"{op}.py") for op in ("softmax", "rmsnorm")]
    first = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="kernelbrain.optimize", arguments=[uris[0], "softmax_kernel"]
        )
    )
    second = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="kernelbrain.optimize", arguments=[uris[1], "rmsnorm_kernel"]
        )
    )
    assert first["started"] and second["started"] and second["queuedBehind"] == 1
    jobs = (await client.protocol.send_request_async("kernelbrain/jobs", {})).jobs
    assert {j.id: j.state for j in jobs} == {first["job"]: "running", second["job"]: "queued"}

    # Cancel the running job through its progress token, once its workers are busy.
    token = next(
        t
        for t, reports in client.progress_reports.items()
        if reports
        and isinstance(reports[0], types.WorkDoneProgressBegin)
        and "softmax" in reports[0].title
    )
    pids: list[int] = []

    async def busy() -> bool:
        listing = (await client.protocol.send_request_async("kernelbrain/jobs", {})).jobs
        running = [j for j in listing if j.id == first["job"]]
        pids[:] = list(running[0].worker_pids) if running else []
        return len(pids) > 0

    deadline = time.monotonic() + 120
    while not await busy():
        assert time.monotonic() < deadline, "the first job never started its workers"
        await asyncio.sleep(0.2)
    client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    t0 = time.monotonic()
    await wait_until(
        lambda: progress_ended(client, token), timeout=2.0, what="the cancelled job to end"
    )
    await wait_until(
        lambda: not any(_alive(pid) for pid in pids),
        timeout=max(0.1, 2.0 - (time.monotonic() - t0)),
        what="the cancelled job's workers to exit",
    )
    jobs = {
        j.id: j for j in (await client.protocol.send_request_async("kernelbrain/jobs", {})).jobs
    }
    assert jobs[first["job"]].state == "cancelled"
    assert jobs[second["job"]].state in ("running", "finished")  # the queue moved on
    await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="kernelbrain.cancel", arguments=[second["job"]])
    )
    await stop_client(client)
    assert not record.exists()


async def test_invalid_settings_fall_back_with_one_message(workspace, tmp_path):
    client, record = await new_client(
        workspace,
        tmp_path,
        {"budget": "soon", "maxCandidates": -3, "device": "tpu", "compiledView": False},
    )
    await wait_until(
        lambda: len([m for m in client.messages if "is invalid" in m.message]) == 3,
        what="one message per invalid setting",
    )
    texts = [m.message for m in client.messages]
    assert any("`budget`" in t and "'3m'" in t for t in texts) and any(
        "`maxCandidates`" in t for t in texts
    )
    await stop_client(client)


async def test_compiled_view_diagnostics_without_blocking(workspace, tmp_path):
    client, record = await new_client(workspace, tmp_path, {"compiledView": True, "device": "cpu"})
    uri = open_file(client, workspace / "ops" / "gelu.py")
    latencies = []
    deadline = time.monotonic() + 120
    while "KB202" not in codes(client, uri):
        assert time.monotonic() < deadline, "no compiled-view diagnostic"
        t0 = time.monotonic()
        await client.text_document_code_lens_async(types.CodeLensParams(text_document=doc(uri)))
        latencies.append(time.monotonic() - t0)
        await asyncio.sleep(0.05)
    assert latencies and max(latencies) < 0.5  # the server answered while the agent compiled
    kb202 = next(d for d in client.diagnostics[uri] if d.code == "KB202")
    told = " ".join([kb202.message] + [r.message for r in kb202.related_information or []])
    assert "32-bit" in told and "BLOCK=64" in told
    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=doc(uri), position=types.Position(line=12, character=6))
    )
    assert "Compiled" in hover.contents.value and "regs" in hover.contents.value
    await stop_client(client)
    assert not record.exists()


def test_a_long_trajectory_is_thinned_keeping_every_improvement():
    from kernelbrain.engine.api.results import TrajectoryPoint
    from kernelbrain.server.features.requests import thin

    points = [
        TrajectoryPoint(t=i, candidate=str(i), origin="config", outcome="verified", speedup=1.0,
                        best=1.0 + (i // 700) * 0.1)
        for i in range(3000)
    ]  # fmt: skip
    kept = thin(points, 100)
    assert len(kept) <= 100 and kept[0] is points[0] and kept[-1] is points[-1]
    improved = [p for i, p in enumerate(points) if i and p.best > points[i - 1].best]
    assert all(p in kept for p in improved)
    assert thin(points[:50], 100) == points[:50]
