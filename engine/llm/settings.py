"""How to reach an LLM and how much of it a search may spend.

The endpoint is any OpenAI-compatible server: `KERNELBRAIN_LLM_BASE_URL`, else the SDK's own
`OPENAI_BASE_URL`, else OpenAI's. The key comes from `KERNELBRAIN_API_KEY` or `OPENAI_API_KEY`
(or from the editor at run time) and is kept apart from these settings, which are printed,
stored and logged: `LLMSettings` never holds it.
"""

from __future__ import annotations

import os

import msgspec

DEFAULT_MODEL = "gpt-4.1-mini"
# US dollars per million tokens (input, output); a model not listed costs what `prices` says,
# else nothing is charged and the search says the dollar cap cannot be enforced.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.4, 1.6),
    "gpt-4.1-nano": (0.1, 0.4),
    "gpt-4o": (2.5, 10.0),
    "gpt-4o-mini": (0.15, 0.6),
    "o4-mini": (1.1, 4.4),
}
KEY_VARIABLES = ("KERNELBRAIN_API_KEY", "OPENAI_API_KEY")
BASE_URL_VARIABLES = ("KERNELBRAIN_LLM_BASE_URL", "OPENAI_BASE_URL")


class LLMSettings(msgspec.Struct, kw_only=True):
    model: str = DEFAULT_MODEL
    base_url: str | None = None
    temperature: float = 0.7
    timeout_s: float = 90.0  # one request, retries apart
    max_retries: int = 3  # on 429, 5xx and dropped connections, with backoff (the SDK's)
    concurrency: int = 2  # proposals asked for at once
    proposals_per_generation: int = 2
    max_repairs: int = 2  # rounds of feeding a proposal's compile or correctness error back
    max_completion_tokens: int = 8000
    max_tokens: int = 200_000  # per search, prompt and completion
    max_dollars: float = 0.50  # per search
    prices: dict[str, tuple[float, float]] = msgspec.field(
        default_factory=lambda: dict(DEFAULT_PRICES)
    )

    def price(self) -> tuple[float, float] | None:
        """(input, output) dollars per million tokens of this model, if known."""
        if self.model in self.prices:
            return self.prices[self.model]
        base = next(
            (m for m in sorted(self.prices, key=len, reverse=True) if self.model.startswith(m)),
            None,
        )
        return self.prices[base] if base else None

    def dollars(self, prompt_tokens: int, completion_tokens: int) -> float:
        price = self.price()
        if price is None:
            return 0.0
        return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1e6


def from_environment(
    env: dict[str, str] | None = None, **overrides
) -> tuple[LLMSettings, str | None]:
    """Settings from the environment (and `overrides` that are not None), and the API key."""
    env = os.environ if env is None else env
    base_url = next((env[v] for v in BASE_URL_VARIABLES if env.get(v)), None)
    model = env.get("KERNELBRAIN_LLM_MODEL") or DEFAULT_MODEL
    settings = LLMSettings(model=model, base_url=base_url)
    for name, value in overrides.items():
        if value is not None:
            setattr(settings, name, value)
    key = next((env[v] for v in KEY_VARIABLES if env.get(v)), None)
    return settings, key
