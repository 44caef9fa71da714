"""The server answers every request, whatever a client sends: a seeded fuzz of edits, lenses,
actions, hovers, commands and custom requests, with invalid params and wrong types mixed in.
And a cancel at any moment of a search ends its job as `cancelled`."""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from pathlib import Path

import pytest
from lsprotocol import types

from .helpers import open_file, replace_text, start_client, stop_client, wait_until

OPERATIONS = 3000
ANSWER_TIMEOUT_S = 20.0

# Values of every JSON type, and a few that look almost right.
JUNK = [
    None,
    True,
    0,
    -1,
    2**40,
    1.5,
    "",
    "x",
    "file:///nowhere.py",
    [],
    [1, "a"],
    {},
    {"uri": 5},
    {"line": "one"},
    "\udc80"[:0] + "é" * 3,
]


def junk(rng: random.Random):
    return rng.choice(JUNK)


def position(rng: random.Random) -> dict:
    return {"line": rng.randrange(0, 80), "character": rng.randrange(0, 60)}


def request(rng: random.Random, uri: str, kernel: str) -> tuple[str, object]:
    """(method, params): about half well-formed, half with invalid params or wrong types."""
    good = rng.random() < 0.5
    kind = rng.randrange(8)
    doc = {"uri": uri if good else junk(rng)}
    if kind == 0:
        return "textDocument/codeLens", {"textDocument": doc} if good else junk(rng)
    if kind == 1:
        rng_ = {"start": position(rng), "end": position(rng)}
        ctx = {"diagnostics": [], "only": rng.choice([None, ["refactor"], ["quickfix"]])}
        params = {"textDocument": doc, "range": rng_, "context": ctx}
        if not good:
            params[rng.choice(list(params))] = junk(rng)
        return "textDocument/codeAction", params
    if kind == 2:
        params = {"textDocument": doc, "position": position(rng) if good else junk(rng)}
        return "textDocument/hover", params
    if kind == 3:
        command = rng.choice(
            [
                "kernelbrain.applyVariant",
                "kernelbrain.cancel",
                "kernelbrain.initHarness",
                "kernelbrain.draftHarness",
                "kernelbrain.nosuchcommand",
            ]
        )
        args = [uri, kernel, "v" * 8] if good else [junk(rng) for _ in range(rng.randrange(4))]
        return "workspace/executeCommand", {
            "command": command,
            "arguments": args if rng.random() < 0.9 else junk(rng),
        }
    if kind == 4:
        params = (
            {"uri": uri, "kernel": kernel, "id": "0" * 16}
            if good
            else {"uri": junk(rng), "kernel": junk(rng), "id": junk(rng)}
        )
        return "kernelbrain/variant", params if rng.random() < 0.9 else junk(rng)
    if kind == 5:
        return "kernelbrain/jobs", {} if good else junk(rng)
    if kind == 6:
        return "kernelbrain/kernels", {} if good else junk(rng)
    return "textDocument/documentSymbol" if good else "kernelbrain/nosuchrequest", {
        "textDocument": doc
    }


def raw_request(client, method: str, params) -> asyncio.Future:
    """The request written to the server as JSON, as any client could: pygls's and pytest-lsp's
    own typing (which would refuse ill-typed params before the server saw them) is bypassed.
    The client's protocol still matches the response to the request by its id."""
    protocol = client.protocol
    msg_id = uuid.uuid4().hex
    future = asyncio.get_running_loop().create_future()
    protocol._request_futures[msg_id] = future
    body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    protocol.writer.write(f"Content-Length: {len(body)}\r\n\r\n{body}".encode("ascii"))
    return future


@pytest.mark.slow
async def test_every_request_is_answered_and_the_log_has_no_traceback(
    examples_copy: Path, tmp_path: Path
):
    log = tmp_path / "server.log"
    record = tmp_path / "forbidden-imports.txt"
    client = await start_client(examples_copy, record, {"compiledView": False}, server_log=log)
    rng = random.Random(20261202)
    path = examples_copy / "ops" / "softmax.py"
    text = path.read_text()
    uri = open_file(client, path)
    version, counts = 1, {"answered": 0, "errors": 0, "notifications": 0}
    try:
        for i in range(OPERATIONS):
            if rng.random() < 0.2:  # an edit: text cut, duplicated or mangled
                version += 1
                cut = rng.randrange(len(text))
                edited = rng.choice(
                    [text[:cut], text + text[cut:], text[:cut] + "(\n" + text[cut:], text]
                )
                replace_text(client, uri, edited, version)
                counts["notifications"] += 1
                continue
            method, params = request(rng, uri, "softmax_kernel")
            try:
                await asyncio.wait_for(raw_request(client, method, params), ANSWER_TIMEOUT_S)
                counts["answered"] += 1
            except asyncio.TimeoutError:
                pytest.fail(
                    f"operation {i}: {method} {params!r} was not answered in {ANSWER_TIMEOUT_S}s"
                )
            except Exception:  # an error response is an answer
                counts["errors"] += 1
        # the server is alive and well after all that
        replace_text(client, uri, text, version + 1)
        await wait_until(
            lambda: "KB104" in {d.code for d in client.diagnostics.get(uri, ())},
            30,
            "diagnostics after the fuzz",
        )
        lenses = await client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        assert lenses
    finally:
        await stop_client(client)
    assert counts["answered"] + counts["errors"] + counts["notifications"] == OPERATIONS
    assert counts["errors"] > 100 and counts["answered"] > 100, counts  # both kinds were exercised
    assert "Traceback" not in log.read_text(), log.read_text()[-3000:]
    assert not record.exists()


@pytest.mark.slow
@pytest.mark.parametrize("delay_s", [0.0, 1.5, 6.0])
async def test_a_cancel_at_any_moment_ends_the_job_as_cancelled(
    examples_copy: Path, tmp_path: Path, delay_s
):
    """Right after the start (queued or starting), during the original's harness check, and
    during the generations."""
    client = await start_client(
        examples_copy,
        tmp_path / "forbidden.txt",
        {"compiledView": False},
        configuration={"kernelbrain": {"budget": "60s"}},
    )
    try:
        uri = open_file(client, examples_copy / "ops" / "gelu.py")
        started = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(
                command="kernelbrain.optimize", arguments=[uri, "gelu_kernel"]
            )
        )
        assert started["started"], started
        await asyncio.sleep(delay_s)
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="kernelbrain.cancel", arguments=[started["job"]])
        )

        async def state() -> str:
            jobs = await client.protocol.send_request_async("kernelbrain/jobs", {})
            return next(j.state for j in jobs.jobs if j.id == started["job"])

        for _ in range(300):
            if (now := await state()) not in ("queued", "running"):
                break
            await asyncio.sleep(0.1)
        assert now == "cancelled"
    finally:
        await stop_client(client)
