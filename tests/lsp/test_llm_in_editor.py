"""The LLM in editor searches: the editor hands its key over (`kernelbrain/setApiKey`), a search
with `llm` on asks the scripted endpoint, the LLM's verified variant is offered as a code action
tagged `LLMGenerated`, and neither process logs the key, even at debug level."""

from __future__ import annotations

import os
import shutil
import time

import pytest
from lsprotocol import types

from ..conftest import EXAMPLES
from ..scripted_llm import ScriptedLLM, rewrite
from ..test_llm import GOOD, SENTINEL
from .helpers import open_file, start_client, stop_client, wait_until
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
