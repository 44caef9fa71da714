"""Typed server settings with defaults; bad values fall back to the default with one message."""

from __future__ import annotations

from typing import Any

import msgspec


class Settings(msgspec.Struct, forbid_unknown_fields=False):
    # Re-analysis delay after a keystroke burst. 200 ms keeps diagnostics calm while typing.
    debounce_ms: int = 200
    # Publish static diagnostics for kernel files that are not open (the Problems panel).
    workspace_diagnostics: bool = True


def parse_settings(raw: Any, current: Settings | None = None) -> tuple[Settings, list[str]]:
    """Merge `raw` (a dict from the client) into defaults; return the settings and one message per bad key."""
    base = msgspec.structs.asdict(current or Settings())
    problems: list[str] = []
    if not isinstance(raw, dict):
        return Settings(**base), ([] if raw is None else [f"settings must be an object, got {type(raw).__name__}"])
    for key, value in raw.items():
        camel_to_snake = "".join("_" + c.lower() if c.isupper() else c for c in key)
        if camel_to_snake not in base:
            continue
        trial = dict(base, **{camel_to_snake: value})
        try:
            msgspec.convert(trial, Settings)
        except msgspec.ValidationError as exc:
            problems.append(f"setting `{key}` = {value!r} is invalid ({exc}); using {base[camel_to_snake]!r}")
            continue
        base = trial
    return msgspec.convert(base, Settings), problems
