"""Helpers for end-to-end tests against a real `kernelbrain serve` process over stdio."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Callable, Union

from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

GUARD = Path(__file__).with_name("guarded_server.py")


def _fix_code_action_union(client: LanguageClient) -> None:
    """lsprotocol 2025.0.0 structures any `{"command": ...}` as a Command, even a CodeAction whose
    `command` is an object; tell the test client's converter the difference (LSP spec: a Command's
    `command` is a string)."""
    converter = client.protocol._converter

    def hook(obj, _):
        if isinstance(obj.get("command"), str):
            return converter.structure(obj, types.Command)
        return converter.structure(obj, types.CodeAction)

    converter.register_structure_hook(Union[types.Command, types.CodeAction], hook)


async def start_client(
    workspace: Path,
    record: Path,
    init_options: dict | None = None,
    configuration: dict | None = None,
    server_log: Path | None = None,
    trusted: bool | None = True,
) -> LanguageClient:
    """A client like VS Code's extension: it passes the workspace's trust (`trusted`; None
    passes none, as a generic client would)."""
    env = dict(os.environ, KB_SERVER_STDERR=str(server_log)) if server_log else None
    config = ClientServerConfig(
        server_command=[sys.executable, str(GUARD), str(record)], server_env=env
    )
    client = await config.start()
    _fix_code_action_union(client)
    # VS Code answers the lens refreshes its capabilities announce; count them.
    client.lens_refreshes = 0

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def _refresh(params=None):
        client.lens_refreshes += 1

    for section, item in (configuration or {}).items():
        client.set_configuration(item, section=section)
    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=workspace.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name=workspace.name)],
            initialization_options=(
                dict(init_options or {}, workspaceTrusted=trusted)
                if trusted is not None
                else init_options
            ),
        )
    )
    return client


async def stop_client(client: LanguageClient) -> None:
    await client.shutdown_session()
    await client.stop()


async def wait_until(
    predicate: Callable[[], bool], timeout: float = 10.0, what: str = "condition"
) -> None:
    """Poll client-side state; race-free where waiting for one notification is not."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


def codes(client: LanguageClient, uri: str) -> list[str]:
    return sorted(str(d.code) for d in client.diagnostics.get(uri, ()))


def open_file(client: LanguageClient, path: Path, text: str | None = None, version: int = 1) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri,
                language_id="python",
                version=version,
                text=path.read_text() if text is None else text,
            )
        )
    )
    return uri


def replace_text(client: LanguageClient, uri: str, text: str, version: int) -> None:
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


def doc(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=uri)


def store_measured_gelu_search(workspace: Path, variant_source: str | None = None) -> str:
    """A finished, measured GPU search of the examples' gelu kernel in `workspace`'s store
    (sealed by this test run's key, as a search here would): enough for the measured view's
    KB3xx. With `variant_source`, it found that variant 1.6x faster, and torch.compile of the
    reference was timed beside it. Returns the kernel's source as stored."""
    import msgspec

    from kernelbrain.engine.api.budget import Budget, Spent
    from kernelbrain.engine.api.results import (
        BaselineCase,
        BudgetReport,
        CandidateCounts,
        CaseValue,
        SearchResult,
        Variant,
    )
    from kernelbrain.engine.index.builder import source_hash
    from kernelbrain.engine.store import Store, kernel_key
    from kernelbrain.engine.task import find_task

    task = find_task(workspace / "ops" / "gelu.py", "gelu_kernel")
    original = (workspace / "ops" / "gelu.py").read_text()
    result = SearchResult(
        kernel="gelu_kernel",
        file=task.file,
        device="cuda:0",
        measured=True,
        baseline=[
            BaselineCase(
                "bfloat16[268435456]",
                2686.0,
                True,
                compile_us={"default": 1850.0} if variant_source else {},
            )
        ],
        variants=[
            Variant(
                "fasterv001",
                "config",
                "a wider block",
                1.6,
                [CaseValue("bfloat16[268435456]", 2686.0, 1678.75, 1.6, "faster")],
                ["smoke", "sweep", "stability", "determinism", "edge"],
                True,
                "",
                "**What changed**: a wider block",
                source=variant_source,
            )
        ]
        if variant_source
        else [],
        best="fasterv001" if variant_source else None,
        time_to_best_s=None,
        budget=BudgetReport(Budget(), Spent()),
        candidates=CandidateCounts(),
        stopped="budget: wall time",
        case_bytes=[1 << 30],
        case_flops=[None],
        ceilings={"copy_gbps": 4218.0, "bf16_tflops": 700.0},
        original=original,
        entry="gelu",
        source_hash=source_hash(original),
    )
    store = Store(workspace)
    sid = store.start_search(
        kernel_key(task.file, task.kernel, source_hash(original)), task.file, task.kernel, "cuda:0"
    )
    store.finish_search(sid, "finished", msgspec.to_builtins(result))
    store.close()
    return original
