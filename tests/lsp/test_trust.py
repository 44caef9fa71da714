"""Workspace trust: nothing of an untrusted workspace is imported or run, static diagnostics
still appear, and trusting it turns the compiled view on (a real server over stdio)."""

from __future__ import annotations

import asyncio
import time

import pytest
from lsprotocol import types

from .helpers import (
    codes,
    doc,
    open_file,
    start_client,
    stop_client,
    store_measured_gelu_search,
    wait_until,
)

pytestmark = pytest.mark.slow

# Written at the top of the kernel module: importing it anywhere leaves a file behind.
PLANT = (
    "try:\n"
    "    open({marker!r}, 'w').write('imported')\n"
    "except OSError:  # the sandbox's read-only filesystem\n"
    "    pass\n"
)


async def test_untrusted_workspace_runs_nothing_until_trusted(examples_copy, tmp_path):
    marker = tmp_path / "imported-at-import.txt"
    kernel = examples_copy / "ops" / "gelu.py"
    source = kernel.read_text()
    kernel.write_text(
        source.replace("import torch\n", "import torch\n" + PLANT.format(marker=str(marker)), 1)
    )
    record = tmp_path / "imports.txt"
    # A generic client: no workspace trust of its own, and `trustWorkspace` left at its default.
    client = await start_client(
        examples_copy, record, configuration={"kernelbrain": {"device": "cpu"}}, trusted=None
    )
    uri = open_file(client, kernel)
    await wait_until(lambda: codes(client, uri), 30, "static diagnostics")
    await asyncio.sleep(4)  # longer than the compiled view's debounce
    assert not marker.exists(), "the untrusted workspace's module was imported"
    assert not any(c.startswith("KB2") for c in codes(client, uri))  # no compiled view
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=doc(uri))
    )
    assert not lenses
    answer = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="kernelbrain.optimize", arguments=[uri, "gelu_kernel"])
    )
    assert answer["started"] is False and answer["reason"] == "untrusted"
    assert any("trusted" in m.message for m in client.messages)

    trusted = await client.protocol.send_request_async("kernelbrain/trust", {"trusted": True})
    assert trusted.trusted is True
    deadline = time.monotonic() + 150
    while "KB202" not in codes(client, uri):
        assert time.monotonic() < deadline, "trust did not enable the compiled view"
        await asyncio.sleep(0.2)
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=doc(uri))
    )
    assert lenses and lenses[0].command.command == "kernelbrain.optimize"
    await stop_client(client)
    assert not marker.exists()  # trusted code still runs in the sandbox: its write failed
    assert not record.exists()  # the server itself never imported torch or triton


async def test_an_untrusted_workspaces_store_is_never_opened(examples_copy, tmp_path):
    """A cloned repository ships `.kernelbrain/kernelbrain.db` with a measured search of its
    kernel: while the workspace is untrusted the server neither shows what it claims (no KB3xx
    from it) nor touches the file (no WAL switch, no files beside it)."""
    store_measured_gelu_search(examples_copy)  # sealed here: a trusted server shows it
    folder = examples_copy / ".kernelbrain"
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    record = tmp_path / "imports.txt"
    client = await start_client(
        examples_copy, record, configuration={"kernelbrain": {"compiledView": False}}, trusted=None
    )
    uri = open_file(client, examples_copy / "ops" / "gelu.py")
    await wait_until(lambda: codes(client, uri), 30, "static diagnostics")
    await asyncio.sleep(4)
    assert not any(c.startswith("KB3") for c in codes(client, uri)), codes(client, uri)
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before
    trusted = await client.protocol.send_request_async("kernelbrain/trust", {"trusted": True})
    assert trusted.trusted is True
    await wait_until(lambda: "KB301" in codes(client, uri), 60, "the stored search, once trusted")
    await stop_client(client)


async def test_an_editor_in_restricted_mode_gets_no_second_message_for_the_same_cause(
    examples_copy, tmp_path
):
    """VS Code says itself why its restricted mode has no lens and no compiled view: opening a
    kernel file tells the user nothing more; pressing Optimize anyway is answered once, why."""
    record = tmp_path / "imports.txt"
    client = await start_client(
        examples_copy, record, configuration={"kernelbrain": {"device": "cpu"}}, trusted=False
    )
    uri = open_file(client, examples_copy / "ops" / "gelu.py")
    await wait_until(lambda: codes(client, uri), 30, "static diagnostics")
    # a file never opened has its findings too, each one line, the detail beside it
    closed = (examples_copy / "ops" / "softmax.py").as_uri()
    await wait_until(lambda: codes(client, closed), 30, "diagnostics of a file not open")
    detailed = [d for d in client.diagnostics[closed] if d.related_information]
    assert detailed and all(d.related_information[0].location.uri == closed for d in detailed)
    await asyncio.sleep(2)  # longer than the compiled view's debounce
    assert not any("trusted" in m.message for m in client.messages), client.messages
    answer = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="kernelbrain.optimize", arguments=[uri, "gelu_kernel"])
    )
    assert answer["reason"] == "untrusted"
    await wait_until(lambda: client.messages, 10, "the reason optimizing is off")
    assert len([m for m in client.messages if "trusted" in m.message]) == 1
    await stop_client(client)
    assert not record.exists()
