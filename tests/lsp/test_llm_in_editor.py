"""The LLM in editor searches: the editor hands its key over (`kernelbrain/setApiKey`), a search
with `llm` on asks the scripted endpoint, the LLM's verified variant is offered as a code action
tagged `LLMGenerated`, and neither process logs the key, even at debug level. KB003's quick fix
with the LLM on drafts a harness the original passes and offers it as a workspace edit."""

from __future__ import annotations

import os
import shutil
import time

import pytest
from lsprotocol import types

from ..conftest import EXAMPLES
from ..scripted_llm import ScriptedLLM, rewrite
from ..test_llm import GOOD, SENTINEL
from ..test_llm_init import GOOD as DRAFTED
from ..test_llm_init import WRONG
from .helpers import codes, open_file, start_client, stop_client, wait_until
from .test_search_in_editor import actions_at, progress_ended

pytestmark = pytest.mark.slow


async def test_an_llm_variant_is_offered_and_tagged_and_the_key_is_not_logged(
    tmp_path, monkeypatch
):
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLES, ws, ignore=shutil.ignore_patterns(".kernelbrain", "__pycache__"))
    log = tmp_path / "server.log"
    monkeypatch.setenv("KERNELBRAIN_LOG", "DEBUG")  # pygls logs every message at this level
    with ScriptedLLM([rewrite(GOOD, "1024-element tiles on four warps")]) as llm:
        settings = {
            "budget": "300s",
            "maxCandidates": 2,
            "device": "cpu",
            "compiledView": False,
            "llm": True,
            "llmEndpoint": llm.base_url,
            "llmModel": "scripted",
        }
        client = await start_client(
            ws,
            tmp_path / f"imports-{time.monotonic_ns()}.txt",
            configuration={"kernelbrain": settings},
            server_log=log,
        )
        try:
            stored = await client.protocol.send_request_async(
                "kernelbrain/setApiKey", {"key": SENTINEL}
            )
            assert stored.stored is True
            path = ws / "ops" / "gelu.py"
            uri = open_file(client, path)
            started = await client.workspace_execute_command_async(
                types.ExecuteCommandParams(
                    command="kernelbrain.optimize", arguments=[uri, "gelu_kernel"]
                )
            )
            assert started["started"] is True, started
            (token,) = list(client.progress_reports)
            await wait_until(lambda: progress_ended(client, token), timeout=240, what="the search")
            line = (
                path.read_text()
                .splitlines()
                .index("def gelu_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):")
            )
            actions = [
                a for a in await actions_at(client, uri, line + 2) if a.title.startswith("Apply:")
            ]
            tagged = [a for a in actions if a.tags and types.CodeActionTag.LlmGenerated in a.tags]
            assert tagged, [a.title for a in actions]
            assert llm.requests, "the endpoint was never asked"
            headers = {k.lower(): v for k, v in llm.requests[0]["headers"].items()}
            assert headers["authorization"] == f"Bearer {SENTINEL}"
        finally:
            await stop_client(client)
    text = log.read_text()
    assert "kernelbrain/setApiKey" not in text or "not logged" in text
    assert SENTINEL not in text
    assert "DEBUG" in os.environ.get("KERNELBRAIN_LOG", "") and len(text) > 1000  # it did log


async def _kb003_actions(client, uri):
    await wait_until(lambda: "KB003" in codes(client, uri), what="the no-harness hint")
    diag = next(d for d in client.diagnostics[uri] if d.code == "KB003")
    return await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=diag.range,
            context=types.CodeActionContext(
                diagnostics=[diag], only=[types.CodeActionKind.QuickFix]
            ),
        )
    )


async def test_the_no_harness_quick_fix_drafts_a_harness_with_the_llm(tmp_path):
    """KB003's LLM quick fix: the scripted LLM's first draft is wrong (the original fails it),
    its repair holds; the harness arrives as a workspace edit (the server writes nothing), and
    the key is in no file and no log. With no draft that holds, no edit is offered."""
    ws = tmp_path / "ws"
    (ws / "ops").mkdir(parents=True)
    shutil.copy(EXAMPLES / "ops" / "gelu.py", ws / "ops" / "gelu.py")
    log = tmp_path / "server.log"
    script = [rewrite(WRONG, "relu"), rewrite(DRAFTED, "tanh GELU")]
    with ScriptedLLM(script) as llm:
        settings = {"device": "cpu", "compiledView": False, "llm": True,
                    "llmEndpoint": llm.base_url, "llmModel": "scripted"}  # fmt: skip
        client = await start_client(
            ws,
            tmp_path / f"imports-{time.monotonic_ns()}.txt",
            configuration={"kernelbrain": settings},
            server_log=log,
        )
        received: list[types.ApplyWorkspaceEditParams] = []

        @client.feature(types.WORKSPACE_APPLY_EDIT)
        def apply_edit(params: types.ApplyWorkspaceEditParams):
            received.append(params)
            return types.ApplyWorkspaceEditResult(applied=True)

        try:
            await client.protocol.send_request_async("kernelbrain/setApiKey", {"key": SENTINEL})
            uri = open_file(client, ws / "ops" / "gelu.py")
            actions = await _kb003_actions(client, uri)
            titles = [a.title for a in actions]
            assert titles == [
                "Create a task harness for `gelu_kernel`",
                "Draft a task harness for `gelu_kernel` with the LLM",
            ], titles
            fix = actions[1]
            result = await client.workspace_execute_command_async(
                types.ExecuteCommandParams(
                    command=fix.command.command, arguments=fix.command.arguments
                )
            )
            assert result["applied"] is True and result["rounds"] == 2, result
            assert "2 requests" in result["spent"], result
            (edit,) = received
            changes = edit.edit.document_changes
            harness_uri = (ws / "ops" / "gelu_harness.py").as_uri()
            assert [c.uri for c in changes if isinstance(c, types.CreateFile)][0] == harness_uri
            texts = {
                c.text_document.uri: "".join(e.new_text for e in c.edits)
                for c in changes
                if isinstance(c, types.TextDocumentEdit)
            }
            assert texts[harness_uri] == DRAFTED
            assert 'kernel = "gelu_kernel"' in texts[(ws / "ops" / "kernelbrain.toml").as_uri()]
            assert not (
                ws / "ops" / "gelu_harness.py"
            ).exists()  # the editor writes, not the server
            # the repair round was told why the first draft failed
            assert "the original kernel fails it" in str(llm.requests[1]["body"]["messages"])
            # no draft holds: a warning, no edit
            llm.script[:] = [rewrite(WRONG)]
            result = await client.workspace_execute_command_async(
                types.ExecuteCommandParams(
                    command=fix.command.command, arguments=fix.command.arguments
                )
            )
            assert result["applied"] is False and "after 3 rounds" in result["reason"], result
            assert len(received) == 1
        finally:
            await stop_client(client)
    for f in [log, *ws.rglob("*")]:
        if f.is_file():
            assert SENTINEL.encode() not in f.read_bytes(), f


async def test_without_the_llm_setting_only_the_stub_quick_fix_is_offered(tmp_path):
    ws = tmp_path / "ws"
    (ws / "ops").mkdir(parents=True)
    shutil.copy(EXAMPLES / "ops" / "gelu.py", ws / "ops" / "gelu.py")
    client = await start_client(
        ws,
        tmp_path / f"imports-{time.monotonic_ns()}.txt",
        configuration={"kernelbrain": {"compiledView": False}},
    )
    try:
        actions = await _kb003_actions(client, open_file(client, ws / "ops" / "gelu.py"))
        assert [a.title for a in actions] == ["Create a task harness for `gelu_kernel`"]
    finally:
        await stop_client(client)
