"""Document lifecycle and session start/stop: open, change, save, close, initialized, shutdown."""

from __future__ import annotations

import asyncio
import os

from lsprotocol import types
from pygls.uris import to_fs_path

from ..shared import Session


def initialize(ls: Session, params: types.InitializeParams) -> None:
    options = params.initialization_options
    if isinstance(options, dict):
        ls.apply_settings(options.get("kernelbrain", options))
        trusted = options.get("workspaceTrusted")
        if isinstance(trusted, bool):  # the editor's own workspace trust (VS Code)
            ls.client_trust = trusted
        key = options.get("llmApiKey")
        if isinstance(key, str) and key:
            ls.take_api_key(key)


async def initialized(ls: Session, params: types.InitializedParams) -> None:
    """Pull settings, start the watcher, then index the workspace's kernel files."""
    ls.loop = asyncio.get_running_loop()
    await ls.pull_settings()
    ls.start_watcher()
    await ls.scan_workspace()
    # An editor restores its open files while the server starts and may ask for their lenses
    # before it is ready (VS Code then never asks again until an edit): ask it to again.
    ls.refresh_lenses()


def did_open(ls: Session, params: types.DidOpenTextDocumentParams) -> None:
    ls.analyse_open(params.text_document.uri)
    ls.refresh_lenses()  # the lenses follow the file's kernels (see `initialized`)


def did_change(ls: Session, params: types.DidChangeTextDocumentParams) -> None:
    ls.schedule_analysis(params.text_document.uri)


def did_save(ls: Session, params: types.DidSaveTextDocumentParams) -> None:
    ls.analyse_open(params.text_document.uri)


def did_close(ls: Session, params: types.DidCloseTextDocumentParams) -> None:
    """The buffer is gone: fall back to what is on disk (or clear)."""
    uri = params.text_document.uri
    ls.debouncer.cancel(uri)
    path = to_fs_path(uri)
    ls.files.drop(uri)
    if path and os.path.isfile(path):
        if ls.analyse_disk(path) is None:
            ls.clear(uri)
    else:
        ls.clear(uri)


async def did_change_configuration(ls: Session, params: types.DidChangeConfigurationParams) -> None:
    settings = params.settings
    if isinstance(settings, dict) and settings:
        ls.apply_settings(settings.get("kernelbrain", settings))
    else:
        await ls.pull_settings()


def trust(ls: Session, params) -> dict:
    """The editor's workspace trust changed (VS Code's `onDidGrantWorkspaceTrust`)."""
    trusted = getattr(params, "trusted", None)
    if isinstance(params, dict):
        trusted = params.get("trusted")
    if not isinstance(trusted, bool):
        raise ValueError("kernelbrain/trust takes {trusted: boolean}")
    ls.client_trust = trusted
    ls.on_trust_changed()
    return {"trusted": ls.trusted}


async def set_api_key(ls: Session, params) -> dict:
    """The editor's LLM key (from its secret storage), or null to forget it: kept in memory,
    handed to the engine agent, scrubbed from every log; never a setting, never on disk."""
    key = params.get("key") if isinstance(params, dict) else getattr(params, "key", None)
    if key is not None and not isinstance(key, str):
        raise ValueError("kernelbrain/setApiKey takes {key: string | null}")
    ls.take_api_key(key or None)
    await ls.engine.set_api_key(ls.api_key)
    return {"stored": ls.api_key is not None}


async def shutdown(ls: Session, params) -> None:
    if ls.watcher is not None:
        ls.watcher.stop()
        ls.watcher = None
    await ls.shutdown_engine()


def register(server) -> None:
    server.feature(types.INITIALIZE)(initialize)
    server.feature(types.INITIALIZED)(initialized)
    server.feature(types.TEXT_DOCUMENT_DID_OPEN)(did_open)
    server.feature(types.TEXT_DOCUMENT_DID_CHANGE)(did_change)
    server.feature(types.TEXT_DOCUMENT_DID_SAVE)(did_save)
    server.feature(types.TEXT_DOCUMENT_DID_CLOSE)(did_close)
    server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(did_change_configuration)
    server.feature("kernelbrain/trust")(trust)
    server.feature("kernelbrain/setApiKey")(set_api_key)
    server.feature(types.SHUTDOWN)(shutdown)
