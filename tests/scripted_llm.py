"""An OpenAI-compatible chat-completions server on 127.0.0.1 that answers from a script.

Each request to `POST /v1/chat/completions` takes the next step of the script (the last one
repeats): an answer (`Answer`: the content, a finish reason, usage), an HTTP error (`Status`),
a delay before answering (`Slow`), or raw bytes that are no chat completion (`Raw`). Every
request is recorded (headers and body) so tests can check what the engine sent.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Answer:
    content: str
    finish_reason: str = "stop"
    prompt_tokens: int = 1000
    completion_tokens: int = 500


@dataclass
class Status:
    code: int
    body: dict = field(default_factory=lambda: {"error": {"message": "scripted error"}})
    headers: dict = field(default_factory=dict)


@dataclass
class Slow:
    seconds: float
    then: Answer


@dataclass
class Raw:
    body: bytes


def rewrite(source: str, rationale: str = "a scripted rewrite", **kw) -> Answer:
    """An answer carrying `source` as the structured output asks."""
    return Answer(json.dumps({"rationale": rationale, "source": source}), **kw)


class ScriptedLLM:
    def __init__(self, script: list):
        self.script = list(script)
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> "ScriptedLLM":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next(self):
        with self._lock:
            return self.script.pop(0) if len(self.script) > 1 else self.script[0]

    def _handler(self):
        llm = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with llm._lock:
                    llm.requests.append({"headers": dict(self.headers), "body": body})
                step = llm._next()
                if isinstance(step, Slow):
                    time.sleep(step.seconds)
                    step = step.then
                if isinstance(step, Status):
                    self._send(step.code, json.dumps(step.body).encode(), step.headers)
                elif isinstance(step, Raw):
                    self._send(200, step.body)
                else:
                    self._send(200, json.dumps(_completion(body, step)).encode())

            def _send(self, code: int, payload: bytes, headers: dict | None = None) -> None:
                try:
                    self.send_response(code)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        return Handler


def _completion(request: dict, answer: Answer) -> dict:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "scripted"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": answer.content},
                "finish_reason": answer.finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": answer.completion_tokens,
            "total_tokens": answer.prompt_tokens + answer.completion_tokens,
        },
    }
