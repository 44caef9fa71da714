"""What a front end asks of the engine: one optimize request, the same from the CLI and the
editor, with the defaults defined here once.

A front end says what to search and within what; how the LLM is reached it states as overrides
(`LLMOptions`) on top of the engine's environment, resolved where the search runs
(`llm.settings.from_environment`). The API key never travels in a request: requests are logged
and stored, the key is handed over apart.
"""

from __future__ import annotations

import msgspec

from .budget import DEFAULT_WALL_S


class LLMOptions(msgspec.Struct, kw_only=True):
    """How the LLM is asked, as a front end chooses it; a field left None takes the engine's
    environment (`KERNELBRAIN_LLM_*`), else the default of `LLMSettings`."""

    model: str | None = None
    base_url: str | None = None
    max_tokens: int | None = None  # per search, prompt and completion
    max_dollars: float | None = None  # per search
    temperature: float | None = None
    concurrency: int | None = None
    timeout_s: float | None = None
    max_repairs: int | None = None
    max_retries: int | None = None
    proposals_per_generation: int | None = None
    max_completion_tokens: int | None = None
    price: tuple[float, float] | None = None  # the model's $ per million (input, output) tokens


class OptimizeRequest(msgspec.Struct):
    """One search of one kernel."""

    file: str
    kernel: str | None = None  # None: the file's only task
    budget_s: float = DEFAULT_WALL_S
    max_candidates: int | None = None  # None: no cap (the time budget and stagnation end it)
    device: str = "auto"
    seed: int = 0
    llm: LLMOptions | None = None  # None: the offline mutators only
    memory: bool | None = None  # the experience memory; None: on unless KERNELBRAIN_MEMORY=off
    # torch.compile's kernels of the reference as candidates (`search/lowering_step.py`);
    # None: on a GPU
    lowering: bool | None = None
    mutators: list[str] | None = None  # None: every offline mutator
    compile_workers: int | None = None  # None: `pool.default_compile_workers()`
    wait: bool = False  # another search of the kernel running: wait for it (else SearchBusy)
    # `time.monotonic()` when the user's wait began (the CLI's process start); None: when the
    # request is served. The wall budget counts from it (`Budget.started_at`).
    started_at: float | None = None
