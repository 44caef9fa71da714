"""Typed server settings with defaults; bad values fall back to the default with one message."""

from __future__ import annotations

from typing import Any

import msgspec

from kernelbrain.engine.api.budget import DEFAULT_BUDGET, EDITOR_MAX_CANDIDATES, parse_duration
from kernelbrain.engine.api.request import LLMOptions


class Settings(msgspec.Struct, forbid_unknown_fields=False):
    # Re-analysis delay after a keystroke burst. 200 ms keeps diagnostics calm while typing.
    debounce_ms: int = 200
    # Publish static diagnostics for kernel files that are not open (the Problems panel).
    workspace_diagnostics: bool = True
    # Compile open kernels ahead of time (in the engine agent) for KB2xx diagnostics and hover.
    compiled_view: bool = True
    target_arch: int = 90
    # Hint diagnostics (with a quick fix) on kernels that have no task harness.
    harness_hints: bool = True
    # Search defaults for "Optimize kernel".
    budget: str = DEFAULT_BUDGET
    max_candidates: int = EDITOR_MAX_CANDIDATES
    device: str = "auto"
    # Import and run this workspace's code (compiled view, searches). Clients without a workspace
    # trust model of their own set it; VS Code's extension passes its trust instead, which wins.
    trust_workspace: bool = False
    # The LLM mutator in editor searches: any OpenAI-compatible endpoint (None: the engine's
    # environment, KERNELBRAIN_LLM_BASE_URL or OPENAI_BASE_URL), a model, and caps per search.
    # The key is never a setting: the editor hands it over (`kernelbrain/setApiKey`).
    llm: bool = False
    llm_endpoint: str | None = None
    llm_model: str | None = None
    llm_max_tokens: int = 200_000
    llm_max_dollars: float = 0.5
    llm_temperature: float = 0.7
    llm_concurrency: int = 2  # requests at once
    llm_timeout: float = 90.0  # seconds per request, retries apart
    llm_max_repairs: int = 2  # rounds of feeding a proposal's error back
    # The experience memory shared across searches and workspaces (~/.cache/kernelbrain); None:
    # the engine's default (on, unless KERNELBRAIN_MEMORY=off in its environment).
    memory: bool | None = None

    def llm_options(self) -> LLMOptions:
        """The LLM settings as the engine agent takes them."""
        return LLMOptions(
            model=self.llm_model,
            base_url=self.llm_endpoint,
            max_tokens=self.llm_max_tokens,
            max_dollars=self.llm_max_dollars,
            temperature=self.llm_temperature,
            concurrency=self.llm_concurrency,
            timeout_s=self.llm_timeout,
            max_repairs=self.llm_max_repairs,
        )


def _check(settings: Settings) -> None:
    parse_duration(settings.budget)
    if settings.max_candidates < 1 or settings.debounce_ms < 0 or settings.target_arch < 70:
        raise ValueError("out of range")
    if settings.llm_max_tokens < 0 or settings.llm_max_dollars < 0:
        raise ValueError("a negative LLM budget")
    if not 0 <= settings.llm_temperature <= 2 or settings.llm_max_repairs < 0:
        raise ValueError("out of range")
    if settings.llm_concurrency < 1 or settings.llm_timeout <= 0:
        raise ValueError("out of range")
    if not (settings.device in ("auto", "cpu", "cuda") or settings.device.startswith("cuda:")):
        raise ValueError(f"unknown device {settings.device!r}")


def parse_settings(raw: Any, current: Settings | None = None) -> tuple[Settings, list[str]]:
    """Merge `raw` (a dict from the client) into defaults; return the settings and one message per bad key."""
    base = msgspec.structs.asdict(current or Settings())
    problems: list[str] = []
    if not isinstance(raw, dict):
        return Settings(**base), (
            [] if raw is None else [f"settings must be an object, got {type(raw).__name__}"]
        )
    for key, value in raw.items():
        snake = "".join("_" + c.lower() if c.isupper() else c for c in key)
        if snake not in base:
            continue
        trial = dict(base, **{snake: value})
        try:
            _check(msgspec.convert(trial, Settings))
        except (msgspec.ValidationError, ValueError) as exc:
            problems.append(
                f"setting `{key}` = {value!r} is invalid ({exc}); using {base[snake]!r}"
            )
            continue
        base = trial
    return msgspec.convert(base, Settings), problems
