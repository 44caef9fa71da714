"""One chat completion from an OpenAI-compatible endpoint, through the `openai` SDK.

The SDK retries 429s, 5xx answers and dropped connections with exponential backoff (honouring
`Retry-After`); what still fails comes back as an `LLMError` with a kind the mutator acts on:
`unreachable` and `auth` turn the LLM off for the rest of the search, the others cost one
proposal. Structured output is asked for with a JSON schema; an endpoint that refuses
`response_format` is asked again without it (and never again with it), and the answer is then
decoded tolerantly (`answer.py`).
"""

from __future__ import annotations

import msgspec

from .settings import LLMSettings


class LLMError(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = (
            kind  # unreachable | auth | timeout | rate-limited | server | refused | bad-request
        )


class Reply(msgspec.Struct):
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None


class LLMClient:
    def __init__(self, settings: LLMSettings, api_key: str):
        import openai  # here: an engine without the LLM in use never needs the SDK

        self.settings = settings
        self.structured = True  # until the endpoint refuses `response_format`
        self._client = openai.OpenAI(
            api_key=api_key,
            base_url=settings.base_url,
            timeout=settings.timeout_s,
            max_retries=settings.max_retries,
        )

    def complete(self, messages: list[dict], schema: dict, timeout_s: float | None = None) -> Reply:
        """One answer to `messages`, asked for as JSON matching `schema`."""
        kwargs = dict(
            model=self.settings.model,
            messages=messages,
            temperature=self.settings.temperature,
            max_tokens=self.settings.max_completion_tokens,
        )
        if timeout_s is not None:
            kwargs["timeout"] = timeout_s
        if self.structured:
            fmt = {
                "type": "json_schema",
                "json_schema": {"name": "kernel_rewrite", "schema": schema},
            }
            try:
                return self._create(kwargs | {"response_format": fmt})
            except LLMError as exc:
                if exc.kind != "bad-request" or "response_format" not in str(exc):
                    raise
                self.structured = False
        return self._create(kwargs)

    def _create(self, kwargs: dict) -> Reply:
        import openai

        try:
            completion = self._client.chat.completions.create(**kwargs)
        except openai.APITimeoutError as exc:
            raise LLMError(
                "timeout",
                f"no answer within {kwargs.get('timeout') or self.settings.timeout_s:.0f} s",
            ) from exc
        except openai.APIConnectionError as exc:
            raise LLMError("unreachable", f"cannot reach {self._client.base_url}: {exc}") from exc
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise LLMError("auth", f"the endpoint refused the key ({exc.status_code})") from exc
        except openai.RateLimitError as exc:
            raise LLMError(
                "rate-limited", f"rate-limited after {self.settings.max_retries} retries"
            ) from exc
        except openai.BadRequestError as exc:
            raise LLMError("bad-request", _error_text(exc)) from exc
        except openai.APIStatusError as exc:
            raise LLMError(
                "server", f"the endpoint answered {exc.status_code}: {_error_text(exc)}"
            ) from exc
        except (openai.OpenAIError, ValueError) as exc:  # a body that is no completion at all
            raise LLMError(
                "server", f"the endpoint's answer is not a chat completion: {exc}"
            ) from exc
        choices = getattr(completion, "choices", None)
        if not isinstance(choices, list):
            raise LLMError(
                "server", f"the endpoint's answer is not a chat completion: {completion!s:.200}"
            )
        choice = choices[0] if choices else None
        if choice is None:
            raise LLMError("server", "the endpoint answered with no choices")
        message = choice.message
        if getattr(message, "refusal", None):
            raise LLMError("refused", f"the model refused: {message.refusal}")
        usage = completion.usage
        return Reply(
            text=message.content or "",
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            finish_reason=choice.finish_reason,
        )


def _error_text(exc) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    return str(exc)
