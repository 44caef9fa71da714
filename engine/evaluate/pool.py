"""Evaluation worker processes, one per device, driven from the engine (no torch here).

Every call has a timeout. A worker that hangs is killed; one that dies (os._exit, a segfault, a
CUDA illegal address, the OOM killer) is classified from its exit status and the tail of its
stderr, and the next call starts a fresh one. Workers run in their own process group with an
environment scrubbed of secrets; the CPU worker also gets an address-space limit so a huge
allocation fails inside it instead of exhausting the machine.
"""

from __future__ import annotations

import collections
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable

from . import messages as m

STARTUP_TIMEOUT_S = 180.0  # importing torch + triton on a cold 2-core machine
SECRET = re.compile(r"(KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION)", re.I)
SECRET_PREFIXES = (
    "OPENAI_",
    "ANTHROPIC_",
    "AWS_",
    "AZURE_",
    "GOOGLE_",
    "GITHUB_",
    "HF_",
    "HUGGING",
)


class WorkerDied(Exception):
    """A call that ended without an answer: `kind` says how, `stage` where."""

    def __init__(self, kind: str, message: str, stage: str | None = None, stderr: str = ""):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.stage = stage
        self.stderr = stderr


def scrubbed_env(device: str) -> dict[str, str]:
    """The worker's environment: no API keys, tokens or credentials; one device visible."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not SECRET.search(k) and not k.startswith(SECRET_PREFIXES)
    }
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    elif device.startswith("compile"):
        env.pop("TRITON_INTERPRET", None)
        env["CUDA_VISIBLE_DEVICES"] = ""
    else:
        env.pop("TRITON_INTERPRET", None)
        index = int(device.split(":")[1]) if ":" in device else 0
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        ids = [x for x in visible.split(",") if x.strip()] if visible else None
        env["CUDA_VISIBLE_DEVICES"] = ids[index] if ids and index < len(ids) else str(index)
    return env


def _memory_limit_bytes() -> int:
    """Address-space cap for CPU workers: 60% of physical memory, at least 4 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 16 << 30
    return max(4 << 30, int(total * 0.6))


def classify_death(returncode: int | None, stderr: str) -> tuple[str, str]:
    text = stderr.lower()
    if "illegal memory access" in text or "illegal address" in text:
        return "illegal-memory-access", "CUDA illegal memory access"
    if (
        "out of memory" in text
        or "cannot allocate memory" in text
        or "can't allocate memory" in text
    ):
        return "out-of-memory", "out of memory"
    if returncode is None:
        return "crash", "the worker stopped answering"
    if returncode < 0:
        sig = -returncode
        name = (
            signal.Signals(sig).name
            if sig in signal.Signals._value2member_map_
            else f"signal {sig}"
        )
        if sig == signal.SIGSEGV:
            return "segfault", "segmentation fault (SIGSEGV)"
        if sig == signal.SIGBUS:
            return "segfault", "bus error (SIGBUS)"
        if sig == signal.SIGKILL:
            return (
                "out-of-memory",
                "killed by SIGKILL (most often the kernel's out-of-memory killer)",
            )
        if sig == signal.SIGABRT:
            return "crash", "aborted (SIGABRT)"
        return "crash", f"killed by {name}"
    return (
        "exit",
        f"the process exited with status {returncode} (os._exit or sys.exit in user code)",
    )


class WorkerProcess:
    """One worker process and its pipes."""

    def __init__(self, device: str):
        self.device = device
        self.proc: subprocess.Popen | None = None
        self.info: m.Ready | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=300)
        self._rfd = self._wfd = -1
        self._timeout_s = STARTUP_TIMEOUT_S
        self._workdir: str | None = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> m.Ready:
        self._stderr.clear()
        self._timeout_s = STARTUP_TIMEOUT_S
        self._remove_workdir()
        # Candidate modules are written here; the engine removes it, since a killed worker cannot.
        self._workdir = tempfile.mkdtemp(prefix="kb-worker-")
        env = scrubbed_env(self.device)
        env["KERNELBRAIN_WORKDIR"] = self._workdir
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        limit = _memory_limit_bytes() if not self.device.startswith("cuda") else None

        def preexec() -> None:
            if limit is not None:
                import resource

                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kernelbrain.engine.evaluate.worker",
                self.device,
                str(to_child_r),
                str(from_child_w),
            ],
            pass_fds=(to_child_r, from_child_w),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: a kill takes its children too
            preexec_fn=preexec,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._wfd, self._rfd = to_child_w, from_child_r
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        first = self._receive(time.monotonic() + STARTUP_TIMEOUT_S, "startup")
        if not isinstance(first, m.Ready):
            raise WorkerDied(
                "crash",
                f"worker sent {type(first).__name__} instead of Ready",
                "startup",
                self.stderr_tail(),
            )
        self.info = first
        return first

    def _drain_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for raw in self.proc.stderr:
            self._stderr.append(raw.decode("utf-8", "replace").rstrip())

    def stderr_tail(self, lines: int = 40) -> str:
        return "\n".join(list(self._stderr)[-lines:])

    def _receive(self, deadline: float, stage: str | None):
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill()
                raise WorkerDied(
                    "timeout",
                    f"no answer within {self._timeout_s:g} s (during {stage or 'the call'}): "
                    "killed, likely an endless loop or a hang",
                    stage,
                )
            ready, _, _ = select.select([self._rfd], [], [], min(remaining, 1.0))
            if ready:
                try:
                    return m.read_answer(self._rfd)
                except (EOFError, OSError):
                    self._died(stage)
            elif not self.alive:
                self._died(stage)

    def _died(self, stage: str | None):
        code = None
        if self.proc is not None:
            try:
                code = self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()
        time.sleep(0.05)  # let the stderr reader catch the last lines
        tail = self.stderr_tail()
        kind, what = classify_death(code, tail)
        self.close_pipes()
        raise WorkerDied(kind, f"the worker died during {stage or 'the call'}: {what}", stage, tail)

    def call(
        self, request, timeout_s: float, on_progress: Callable[[m.Progress], None] | None = None
    ):
        if not self.alive:
            self.start()
        stage: str | None = None
        try:
            m.write_message(self._wfd, request)
        except (BrokenPipeError, OSError):
            self._died(stage)
        deadline = time.monotonic() + timeout_s
        self._timeout_s = timeout_s
        while True:
            answer = self._receive(deadline, stage)
            if isinstance(answer, m.Progress):
                stage = answer.stage
                if on_progress is not None:
                    on_progress(answer)
                continue
            if getattr(answer, "reason", None) in m.FATAL_REASONS:
                self.kill()  # it is exiting anyway; never hand it another request
            return answer

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
            self.proc.wait()
        self.close_pipes()
        self._remove_workdir()

    def _remove_workdir(self) -> None:
        if self._workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def close_pipes(self) -> None:
        for fd in (self._rfd, self._wfd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._rfd = self._wfd = -1

    def stop(self) -> None:
        if self.alive:
            self.close_pipes()  # EOF on its request pipe ends the worker's loop
            try:
                self.proc.wait(timeout=5)  # type: ignore[union-attr]
            except subprocess.TimeoutExpired:
                self.kill()
        self.close_pipes()
        self._remove_workdir()


class WorkerPool:
    """One worker per device, started on first use, restarted after any death.

    Calls on one device are serialised (one timing at a time per GPU); different devices run
    in parallel from different threads.
    """

    def __init__(self) -> None:
        self._workers: dict[str, WorkerProcess] = {}
        self._locks: dict[str, threading.Lock] = collections.defaultdict(threading.Lock)
        self.restarts = 0
        self.killed = False  # after kill(): no new worker is started, every call fails at once

    def worker(self, device: str) -> WorkerProcess:
        if device not in self._workers:
            self._workers[device] = WorkerProcess(device)
        return self._workers[device]

    def call(self, device: str, request, timeout_s: float, on_progress=None):
        if self.killed:
            raise WorkerDied("cancelled", "the evaluation was cancelled")
        with self._locks[device]:
            if self.killed:
                raise WorkerDied("cancelled", "the evaluation was cancelled")
            w = self.worker(device)
            try:
                return w.call(request, timeout_s, on_progress)
            except WorkerDied:
                self.restarts += 1
                raise

    def pids(self) -> list[int]:
        return [w.proc.pid for w in self._workers.values() if w.alive and w.proc is not None]

    def close(self) -> None:
        for w in self._workers.values():
            w.stop()

    def kill(self) -> None:
        """Stop everything now (cancellation): running calls end with WorkerDied, new ones fail."""
        self.killed = True
        for w in list(self._workers.values()):
            w.kill()

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
