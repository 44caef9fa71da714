"""The LLM mutator: asks for rewrites, feeds failures back, and keeps the LLM's budget.

The search calls `propose` with the best candidate and what it knows (`prompt.Diagnosis`), and
`repair` with a proposal that failed to compile or verify; both return ordinary `Mutation`s
(origin `llm`) that enter the same ladder as every other candidate. Requests run a few at a
time (`concurrency`). Every request is priced before it is sent: one that could take the
search past its token or dollar cap is not sent (its prompt counted at a character a token,
more than any tokenizer's average, and its completion at the completion limit), so the caps
hold. An endpoint that cannot be reached or refuses the key turns the LLM off for the rest of
the search, said once; anything else (a timeout, a 429 after retries, garbage, a cut-off
answer) costs that one proposal.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from ..api.secrets import register, scrub
from ..mutate.registry import Mutation
from .answer import SCHEMA, BadAnswer, decode
from .client import LLMClient, LLMError
from .prompt import Diagnosis, proposal_messages, repair_messages
from .settings import LLMSettings

ORIGIN = "llm"
MIN_REQUEST_S = 5.0  # a request with less wall time left than this is not sent


class LLMUnavailable(Exception):
    """The LLM is off for this search (no key, unreachable, key refused, budget spent)."""


class LLMMutator:
    def __init__(
        self,
        settings: LLMSettings,
        api_key: str | None,
        notify: Callable[[str], None] | None = None,
    ):
        self.settings = settings
        self._notify = notify or (lambda text: None)
        self.notices: list[str] = []  # what was said (the search's notes repeat it)
        self.tokens = 0
        self.dollars = 0.0
        self.requests = 0
        self.outcomes: Counter[str] = Counter()  # how requests ended: ok, or an error kind
        self.off: str | None = None
        self._lock = threading.Lock()
        if not api_key:
            self._turn_off(
                "no API key (KERNELBRAIN_API_KEY or OPENAI_API_KEY, or the editor's): the "
                "search runs with the offline mutators only"
            )
            self.client = None
        else:
            register(api_key)  # scrubbed from everything user code or the endpoint sends back
            self.client = LLMClient(settings, api_key)
        if settings.price() is None and self.client is not None:
            self.notify(
                f"no price known for model {settings.model}: its tokens are capped "
                f"({settings.max_tokens}), its dollars are not counted"
            )

    # -- state ------------------------------------------------------------------------------------
    def notify(self, text: str) -> None:
        self.notices.append(text)
        self._notify(text)

    @property
    def available(self) -> bool:
        return self.off is None

    def _turn_off(self, why: str) -> None:
        with self._lock:
            if self.off is not None:
                return
            self.off = why
        self.notify(f"LLM off: {why}")

    def _price(self, messages: list[dict]) -> tuple[int, float]:
        """The most a request can cost: (tokens, dollars)."""
        prompt = len(json.dumps(messages))  # a character a token: no tokenizer averages more
        completion = self.settings.max_completion_tokens
        return prompt + completion, self.settings.dollars(prompt, completion)

    def _reserve(self, messages: list[dict]) -> tuple[int, float]:
        tokens, dollars = self._price(messages)
        with self._lock:
            if self.tokens + tokens > self.settings.max_tokens:
                raise LLMUnavailable(
                    f"the LLM token budget ({self.settings.max_tokens}) has no room for another "
                    f"request ({self.tokens} spent)"
                )
            if self.dollars + dollars > self.settings.max_dollars:
                raise LLMUnavailable(
                    f"the LLM dollar budget (${self.settings.max_dollars:.2f}) has no room for "
                    f"another request (${self.dollars:.3f} spent)"
                )
            self.tokens += tokens  # held until the answer says what was used
            self.dollars += dollars
        return tokens, dollars

    def _settle(self, held: tuple[int, float], prompt: int, completion: int) -> None:
        with self._lock:
            self.tokens += prompt + completion - held[0]
            self.dollars += self.settings.dollars(prompt, completion) - held[1]

    # -- requests ---------------------------------------------------------------------------------
    def ask(self, messages: list[dict], left_s: float) -> Mutation:
        """One answer (a module and its rationale), counted against the token and dollar caps;
        an `LLMError` or `BadAnswer` when it failed, `LLMUnavailable` when the LLM is off."""
        if self.off is not None or self.client is None:
            raise LLMUnavailable(self.off or "no client")
        if left_s < MIN_REQUEST_S:
            raise LLMUnavailable("too little time left for a request")
        held = self._reserve(messages)
        used = (0, 0)
        try:
            with self._lock:
                self.requests += 1
            reply = self.client.complete(
                messages, SCHEMA, timeout_s=min(self.settings.timeout_s, left_s)
            )
            used = (reply.prompt_tokens, reply.completion_tokens)
            rewrite = decode(reply.text, reply.finish_reason)
        except LLMError as exc:
            with self._lock:
                self.outcomes[exc.kind] += 1
            if exc.kind in ("unreachable", "auth"):
                self._turn_off(scrub(str(exc), 300) + "; the search goes on offline")
            raise
        except BadAnswer:
            with self._lock:
                self.outcomes["bad-answer"] += 1
            raise
        finally:
            self._settle(held, *used)
        with self._lock:
            self.outcomes["ok"] += 1
        # An answer that echoes a configured secret (an injected instruction's exfiltration)
        # would carry it into the store, the report and the user's file: it never gets that far.
        source = scrub(rewrite.source, limit=len(rewrite.source) + 1)
        return Mutation(source, ORIGIN, scrub(rewrite.rationale.strip(), 600) or "an LLM rewrite")

    def propose(
        self, ctx, diagnosis: Diagnosis, left_s: float, count: int | None = None
    ) -> tuple[list[Mutation], list[str]]:
        """Up to `count` (default `proposals_per_generation`) rewrites of `ctx.source`, asked
        for concurrently; and why the others failed (for the search's notes)."""
        if not self.available:
            return [], []
        messages = proposal_messages(ctx, diagnosis)
        n = self.settings.proposals_per_generation if count is None else count
        return self._gather([messages] * max(0, n), left_s)

    def repair(
        self, ctx, rationale: str, failure: str, left_s: float
    ) -> tuple[list[Mutation], list[str]]:
        """The proposal in `ctx.source` fixed after `failure` (a compile or harness error)."""
        if not self.available:
            return [], []
        return self._gather([repair_messages(ctx, rationale, failure)], left_s)

    def _gather(
        self, requests: list[list[dict]], left_s: float
    ) -> tuple[list[Mutation], list[str]]:
        made, failed = [], []

        def one(messages):
            try:
                return self.ask(messages, left_s), None
            except (LLMError, BadAnswer, LLMUnavailable) as exc:
                return None, f"{type(exc).__name__}: {scrub(str(exc), 400)}"
            except Exception as exc:  # a client bug costs a proposal, never the search
                with self._lock:
                    self.outcomes["error"] += 1
                return None, f"{type(exc).__name__}: {scrub(str(exc), 400)}"

        workers = max(1, min(self.settings.concurrency, len(requests)))
        with ThreadPoolExecutor(workers, thread_name_prefix="llm") as pool:
            for mutation, error in pool.map(one, requests):
                if mutation is not None:
                    made.append(mutation)
                elif error:
                    failed.append(error)
        return made, failed

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.outcomes.items()))
        return (
            f"LLM ({self.settings.model}): {self.requests} requests ({kinds or 'none'}), "
            f"{self.tokens} tokens, ${self.dollars:.3f}"
        )
