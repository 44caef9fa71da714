"""The language server's side of the engine agent (`kernelbrain.engine.agent.main`).

The agent is started on first use and restarted if it dies; all compiling, running and
searching happens there, so the server process never imports torch or triton.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Callable, TypeVar

from pygls.client import JsonRPCClient

from kernelbrain.engine.agent import protocol as p

log = logging.getLogger("kernelbrain.server.engine")
T = TypeVar("T")


class EngineUnavailable(Exception):
    pass


class EngineBridge:
    def __init__(
        self,
        on_progress: Callable[[p.JobProgress], None],
        on_finished: Callable[[p.JobFinished], None],
        on_restart: Callable[[str], None],
        on_changed: Callable[[p.JobList], None] = lambda jobs: None,
    ):
        self.on_progress = on_progress
        self.on_finished = on_finished
        self.on_changed = on_changed
        self.on_restart = on_restart
        self._client: JsonRPCClient | None = None
        self._lock = asyncio.Lock()
        self._starts = 0
        self.pid: int | None = None
        self.api_key: str | None = None  # the editor's LLM key, re-sent to every new agent

    def _alive(self) -> bool:
        c = self._client
        return c is not None and c._server is not None and c._server.returncode is None

    async def _ensure(self) -> JsonRPCClient:
        async with self._lock:
            if self._alive():
                return self._client  # type: ignore[return-value]
            if self._starts:
                self.on_restart(
                    "the KernelBrain engine process stopped; it was restarted (running searches were lost)"
                )
            self._starts += 1
            client = JsonRPCClient()
            client.feature(p.JOB_PROGRESS)(
                lambda params: self._safe(self.on_progress, params, p.JobProgress)
            )
            client.feature(p.JOB_FINISHED)(
                lambda params: self._safe(self.on_finished, params, p.JobFinished)
            )
            client.feature(p.JOB_CHANGED)(
                lambda params: self._safe(self.on_changed, params, p.JobList)
            )
            await client.start_io(sys.executable, "-m", "kernelbrain.engine.agent.main")
            asyncio.get_running_loop().create_task(self._drain(client))
            hello = p.unpack(await client.protocol.send_request_async(p.HELLO, {}), p.Hello)
            self.pid = hello.pid
            if self.api_key:
                await client.protocol.send_request_async(p.API_KEY, p.pack(p.ApiKey(self.api_key)))
            self._client = client
            return client

    async def set_api_key(self, key: str | None) -> None:
        """Hand the editor's LLM key to the agent now (if it runs) and to every later one."""
        self.api_key = key or None
        if self._alive():
            await self._client.protocol.send_request_async(  # type: ignore[union-attr]
                p.API_KEY, p.pack(p.ApiKey(self.api_key))
            )

    @staticmethod
    def _safe(fn, params, kind) -> None:
        try:
            fn(p.unpack(params, kind))
        except Exception:  # a bad notification must never break the protocol loop
            log.exception("engine notification failed")

    @staticmethod
    async def _drain(client: JsonRPCClient) -> None:
        """The agent's stderr must be read, or a chatty agent would block on a full pipe."""
        stream = client._server.stderr if client._server else None
        if stream is None:
            return
        while line := await stream.readline():
            log.info("%s", line.decode("utf-8", "replace").rstrip())

    async def request(self, method: str, message, result: type[T]) -> T | None:
        client = await self._ensure()
        try:
            answer = await client.protocol.send_request_async(method, p.pack(message))
        except RuntimeError as exc:  # the agent exited while the request was pending
            self._client = None
            raise EngineUnavailable(str(exc)) from exc
        return None if answer is None else p.unpack(answer, result)

    async def stop(self) -> None:
        c = self._client
        self._client = None
        if c is not None and c._server is not None and c._server.returncode is None:
            try:
                c._server.stdin.close()  # EOF: the agent cancels its jobs and exits
                await asyncio.wait_for(c._server.wait(), 10)
            except (asyncio.TimeoutError, ProcessLookupError, OSError):
                c._server.kill()
