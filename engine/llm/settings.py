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


# Settings the environment may set, by variable (strings are converted to the field's type).
ENV_SETTINGS = {
    "KERNELBRAIN_LLM_MODEL": "model",
    "KERNELBRAIN_LLM_TEMPERATURE": "temperature",
    "KERNELBRAIN_LLM_CONCURRENCY": "concurrency",
    "KERNELBRAIN_LLM_TIMEOUT": "timeout_s",
    "KERNELBRAIN_LLM_MAX_REPAIRS": "max_repairs",
    "KERNELBRAIN_LLM_MAX_TOKENS": "max_tokens",
    "KERNELBRAIN_LLM_MAX_DOLLARS": "max_dollars",
}
PRICES_VARIABLE = "KERNELBRAIN_LLM_PRICES"  # JSON: {"model": [input, output]} $ per M tokens


def validate(settings: LLMSettings) -> None:
    """Raise ValueError naming the first setting out of range."""
    for name, ok in (
        ("temperature", 0 <= settings.temperature <= 2),
        ("concurrency", settings.concurrency >= 1),
        ("timeout_s", settings.timeout_s > 0),
        ("max_repairs", settings.max_repairs >= 0),
        ("max_tokens", settings.max_tokens >= 0),
        ("max_dollars", settings.max_dollars >= 0),
    ):
        if not ok:
            raise ValueError(f"LLM setting {name} = {getattr(settings, name)!r} is out of range")
    for model, price in settings.prices.items():
        if len(price) != 2 or any(p < 0 for p in price):
            raise ValueError(f"the price of {model} must be [input, output] dollars >= 0")


def resolve_llm(options) -> tuple[LLMSettings, str | None]:
    """A front end's `LLMOptions` over the environment's settings, and the environment's key."""
    fields = msgspec.structs.asdict(options)
    return from_environment(price=fields.pop("price"), **fields)


def from_environment(
    env: dict[str, str] | None = None,
    *,
    price: tuple[float, float] | None = None,
    **overrides,
) -> tuple[LLMSettings, str | None]:
    """Settings from the environment (`ENV_SETTINGS`, `PRICES_VARIABLE`), then `overrides` that
    are not None, and `price` (input, output dollars per million tokens) for the model chosen;
    and the API key. A value that does not parse or is out of range raises ValueError."""
    env = os.environ if env is None else env
    fields: dict = {"base_url": next((env[v] for v in BASE_URL_VARIABLES if env.get(v)), None)}
    for variable, name in ENV_SETTINGS.items():
        if env.get(variable):
            fields[name] = env[variable]
    fields.update({k: v for k, v in overrides.items() if v is not None})
    known = dict(DEFAULT_PRICES)
    try:
        if env.get(PRICES_VARIABLE):
            known.update(msgspec.json.decode(env[PRICES_VARIABLE]))
        settings = msgspec.convert(dict(fields, prices=known), LLMSettings, strict=False)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise ValueError(f"LLM settings: {exc}") from exc
    if price is not None:
        settings.prices[settings.model] = tuple(price)
    validate(settings)
    key = next((env[v] for v in KEY_VARIABLES if env.get(v)), None)
    return settings, key
