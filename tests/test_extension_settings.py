"""The VS Code extension mirrors every server setting: each field of `server/editor_settings.py`
(workspace trust aside: the extension passes VS Code's own) is in the extension's typed table
(`src/common/settings.ts`) and declared in its `package.json`, with the same default."""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec

from kernelbrain.server.editor_settings import Settings

EXT = Path(__file__).resolve().parents[1] / "vscode-extension"


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def test_every_server_setting_is_declared_by_the_extension_with_its_default():
    server = {
        camel(f.name): f.default
        for f in msgspec.structs.fields(Settings)
        if f.name != "trust_workspace"
    }
    table = (EXT / "src" / "common" / "settings.ts").read_text()
    block = table.split("export const SERVER_SETTINGS", 1)[1].split("};", 1)[0]
    typed = dict(re.findall(r"^\s+(\w+): \{ kind: \"\w+\", default: ([^,}]+?)\s*[,}]", block, re.M))
    declared = json.loads((EXT / "package.json").read_text())["contributes"]["configuration"]
    props = declared["properties"] if isinstance(declared, dict) else declared[0]["properties"]
    assert set(typed) == set(server), set(typed) ^ set(server)
    for key, default in server.items():
        assert f"kernelbrain.{key}" in props, key
        assert props[f"kernelbrain.{key}"]["default"] == default, key
        assert json.loads(typed[key]) == default, key


def test_where_the_key_goes_and_what_it_may_spend_are_the_users_settings_only():
    """A cloned repository's `.vscode/settings.json` cannot turn the LLM on, point the stored
    key at another host, pick the model or raise what it may spend: those settings are
    machine-scoped, which VS Code never takes from a workspace."""
    declared = json.loads((EXT / "package.json").read_text())["contributes"]["configuration"]
    props = declared["properties"] if isinstance(declared, dict) else declared[0]["properties"]
    spending = ["llm", "llmEndpoint", "llmModel", "llmMaxTokens", "llmMaxDollars", "llmConcurrency"]
    for key in spending:
        assert props[f"kernelbrain.{key}"].get("scope") in ("machine", "application"), key
