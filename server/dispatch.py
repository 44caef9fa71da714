"""One dispatch path for every request the server gets, in the manner of ruff's server: each
request is answered, with its result or with an error response that says what went wrong.

- Parameters that do not fit the method's type (a number where a URI goes) are answered with an
  InvalidParams error; pygls alone logs them and leaves the client waiting forever.
- A handler that raises is answered with an error naming the method and the exception, logged
  as one line: the response is the trace, not a traceback in the log.
- Handlers check the types of what they use with `expect`, before using it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from concurrent.futures import Future
from typing import Any

from lsprotocol.types import ResponseErrorMessage
from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcInvalidParams
from pygls.protocol.json_rpc import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
)
from pygls.protocol.language_server import LanguageServerProtocol

log = logging.getLogger("kernelbrain.server.dispatch")
MAX_ERROR_CHARS = 500


class _Answered:
    """What `structure_message` gives for a request it already answered with an error."""

    jsonrpc = None


ANSWERED = _Answered()


def expect(value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    """`value` if it is of `kind`, else an InvalidParams error that names the parameter."""
    if isinstance(value, bool) and kind in (int, float):
        value = None  # JSON true is no number
    if not isinstance(value, kind):
        names = "/".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise JsonRpcInvalidParams(message=f"{what} must be {names}, got {type(value).__name__}")
    return value


def guarded(fn, name: str):
    """`fn` with any exception but a JSON-RPC error turned into an InternalError that names the
    method; sync stays sync and async stays async, so pygls runs it as before."""

    def failure(exc: Exception) -> JsonRpcInternalError:
        text = f"{name} failed: {type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]
        log.error("%s", text)
        return JsonRpcInternalError(message=text)

    if asyncio.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def run_async(*args, **kwargs):
            try:
                return await fn(*args, **kwargs)
            except (JsonRpcException, asyncio.CancelledError):
                raise
            except Exception as exc:
                raise failure(exc) from None

        return run_async

    @functools.wraps(fn)
    def run(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except JsonRpcException:
            raise
        except Exception as exc:
            raise failure(exc) from None

    return run


class AnsweringProtocol(LanguageServerProtocol):
    """pygls's protocol, answering what it would leave unanswered or answer with a traceback."""

    def structure_message(self, data: dict[str, Any]):
        """pygls's structuring of a message (same types), without its traceback in the log, and
        with a request whose params do not fit answered at once."""
        if "jsonrpc" not in data:
            return data
        try:
            method = data.get("method")
            if "id" in data:
                if "error" in data:
                    return self._converter.structure(data, ResponseErrorMessage)
                if method is not None:
                    return self._converter.structure(
                        data, self.get_message_type(method) or JsonRPCRequestMessage
                    )
                kind = self._result_types.pop(data["id"], None) or JsonRPCResponseMessage
                return self._converter.structure(data, kind)
            return self._converter.structure(
                data, self.get_message_type(method or "") or JsonRPCNotification
            )
        except Exception as exc:
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            log.warning("params of %r do not fit: %s", data.get("method"), first)
            if "id" in data and "method" in data:
                error = JsonRpcInvalidParams(
                    message=f"invalid params for {data['method']!r}: {first}"[:MAX_ERROR_CHARS]
                )
                self._send_response(data["id"], error=error.to_response_error())
            return ANSWERED

    def handle_message(self, message):
        if message is ANSWERED:
            return
        super().handle_message(message)

    def _send_handler_result(self, future: Future, *, msg_id):
        exc = None if future.cancelled() else future.exception()
        if isinstance(exc, JsonRpcException):
            self._request_futures.pop(msg_id, None)
            log.warning("request %s answered with an error: %s", msg_id, exc.message)
            self._send_response(msg_id, error=exc.to_response_error())
            return
        super()._send_handler_result(future, msg_id=msg_id)

    def _check_handler_result(self, future: Future):
        exc = None if future.cancelled() else future.exception()
        if isinstance(exc, JsonRpcException):  # a notification has no one to answer: one line
            log.warning("notification failed: %s", exc.message)
            return
        super()._check_handler_result(future)
