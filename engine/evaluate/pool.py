"""Evaluation worker processes, two per device, driven from the engine (no torch here).

Per device a runner (imports candidates) and a judge (runs the harness, never imports a
candidate); the pool relays the judge's requests for candidate runs to the runner (`worker.py`).
Every call has a timeout. A worker that hangs is killed; one that dies (os._exit, a segfault, a
CUDA illegal address, the OOM killer) is classified from its exit status and the tail of its
stderr, and the next call starts a fresh one. Workers run in the sandbox (`sandbox.py`) with an
environment scrubbed of secrets, and every string they send back is scrubbed too
(`secrets.py`); CPU workers also get an address-space limit so a huge allocation fails inside
them instead of exhausting the machine.
"""

from __future__ import annotations

import collections
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import msgspec

from .. import protocol as m
from ..api import facts
from ..api.secrets import scrub, scrub_struct, worker_environment
from . import sandbox

STARTUP_TIMEOUT_S = 180.0  # importing torch + triton on a cold 2-core machine


class WorkerDied(Exception):
    """A call that ended without an answer: `kind` says how, `stage` where."""

    def __init__(self, kind: str, message: str, stage: str | None = None, stderr: str = ""):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.stage = stage
        self.stderr = stderr


def default_compile_workers(cpus: int | None = None) -> int:
    """How many compile workers a search starts: one a core up to four, and on a host with more
    than eight cores half of them, up to eight. Candidates' dry runs and ahead-of-time compiles
    are single-threaded and parallel across workers; with four on the 16-core H200 host the
    suite's softmax search spent 55 s of its 120 in compiles, its GPU idle."""
    cpus = cpus or os.cpu_count() or 2
    return max(1, min(4, cpus)) if cpus <= 8 else min(8, cpus // 2)


JUDGE_PREFIX = "judge@"  # the judge of a device: `judge@cpu`, `judge@cuda:0` (worker.py)
RELAY_MARGIN_S = 2.0  # of a harness's time limit, kept for the judge to answer after its runner


def base_device(device: str) -> str:
    """The device a worker runs on, whatever its role."""
    return device.removeprefix(JUDGE_PREFIX)


def fatal(answer) -> bool:
    """An answer after which its worker's device context is unusable (the worker exits)."""
    failed = getattr(answer, "failed", None)
    return (
        getattr(answer, "reason", None) in facts.FATAL_REASONS
        or getattr(failed, "reason", None) in facts.FATAL_REASONS
    )


def scrubbed_env(device: str) -> dict[str, str]:
    """The worker's environment: no API keys, tokens or credentials; one device visible."""
    device = base_device(device)
    env = worker_environment()
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    # A reference under torch.compile compiles inside the worker: no pool of Inductor processes
    # outlives a request (the tamper watch counts the processes a request leaves running).
    env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
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


def task_paths(task) -> list[str]:
    """The paths a task's code loads from: its kernel's file, its reference's module, its config
    and its root, where given."""
    found = [getattr(task, name, None) for name in ("file", "reference_module", "config", "root")]
    return [p for p in found if isinstance(p, str) and p]


def private_triton_cache() -> str:
    """A Triton kernel cache of its own for one pool's workers (or one profiled program).

    Never the user's (`~/.triton/cache`): every Triton process of the user trusts that folder
    and loads what it holds, native code included (the C launchers and driver helpers Triton
    builds there), so a candidate that could write it would run its code outside the sandbox
    the next time any Triton program starts. The price is a cold cache per run: the original's
    kernels compile again (seconds), candidates' are new anyway."""
    return tempfile.mkdtemp(prefix="kb-triton-")


# A worker's scratch folder (its TMPDIR and HOME: candidate modules, compiler temporaries, CUDA's
# JIT cache) is a tmpfs of this size, and no file it writes anywhere may pass FILE_LIMIT: a
# candidate cannot fill the disk (a 200 MB scratch fill ran unhindered before).
SCRATCH_QUOTA_BYTES = 512 << 20
FILE_LIMIT_BYTES = 512 << 20


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


# Every worker process is forked from this one thread, which lives as long as the engine: the
# sandbox's --die-with-parent (PR_SET_PDEATHSIG) kills a child when the *thread* that forked it
# ends, not the process. Forked from a search's short-lived threads (a background start, the
# prewarm's and the compile batches' pools), workers would die as those end and every search
# would start them again, which costs an H200 machine 35 s for four compile workers.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kb-worker-spawner")


def _spawn(argv: list[str], **kw) -> subprocess.Popen:
    return _SPAWNER.submit(subprocess.Popen, argv, **kw).result()


class WorkerProcess:
    """One worker process and its pipes."""

    def __init__(self, device: str, triton_cache: str, workspace_files: list[str] | None = None):
        self.device = device
        self.triton_cache = triton_cache  # shared with the pool's other workers, no one else
        # Task files whose workspace's private folders and files the sandbox hides (the pool's
        # list, read at each start); `started_for` is what the running process hides.
        self.workspace_files = workspace_files if workspace_files is not None else []
        self.started_for: tuple[str, ...] = ()
        self.view: sandbox.View | None = None  # what the running process shows and hides
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
        self.info = None  # until it says Ready
        self._stderr.clear()
        self._timeout_s = STARTUP_TIMEOUT_S
        self._remove_workdir()
        # Candidate modules are written here; the engine removes it, since a killed worker cannot.
        # A plain temporary name: it is the worker's TMPDIR, which a kernel can read.
        self._workdir = tempfile.mkdtemp()
        env = scrubbed_env(self.device)
        env["KERNELBRAIN_WORKDIR"] = self._workdir
        cache = self.triton_cache
        os.makedirs(cache, exist_ok=True)
        env["TRITON_CACHE_DIR"] = cache
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        m.widen_pipe(to_child_w)
        m.widen_pipe(from_child_r)
        on_gpu = base_device(self.device).startswith("cuda")
        limit = None if on_gpu else _memory_limit_bytes()

        def preexec() -> None:
            import resource

            if limit is not None:
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT_BYTES, FILE_LIMIT_BYTES))

        unsandboxed = sandbox.notice()
        if unsandboxed:  # said once per engine process, plainly
            sys.stderr.write(f"kernelbrain: {unsandboxed}\n")
        view = sandbox.view(self.workspace_files)
        argv, env = sandbox.command(
            [
                sys.executable,
                "-m",
                "kernelbrain.engine.worker.process",
                self.device,
                str(to_child_r),
                str(from_child_w),
            ],
            env,
            self._workdir,
            [cache],
            gpu=on_gpu,
            workspace_files=list(self.workspace_files),
            scratch_quota=SCRATCH_QUOTA_BYTES,
            seen=view,
        )
        self.started_for, self.view = tuple(self.workspace_files), view
        self.proc = _spawn(
            argv,
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
        return scrub("\n".join(list(self._stderr)[-lines:]))

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
                    answer = m.read_answer(self._rfd)
                    # A judge's request carries a candidate's source to its runner, whole; all
                    # else is text for people, scrubbed and truncated.
                    return answer if isinstance(answer, m.NeedRuns) else scrub_struct(answer)
                except msgspec.DecodeError as exc:
                    self.kill()  # what it sends can no longer be trusted to be framed
                    raise WorkerDied(
                        "protocol", f"the worker sent a malformed message: {scrub(str(exc))}", stage
                    ) from exc
                except (EOFError, OSError):
                    self._died(stage)
            elif not self.alive:
                self._died(stage)

    def _died(self, stage: str | None):
        code = None
        if self.proc is not None:
            try:
                code = sandbox.normalise_returncode(self.proc.wait(timeout=5))
            except subprocess.TimeoutExpired:
                self.kill()
        time.sleep(0.05)  # let the stderr reader catch the last lines
        tail = self.stderr_tail()
        kind, what = classify_death(code, tail)
        self.close_pipes()
        raise WorkerDied(kind, f"the worker died during {stage or 'the call'}: {what}", stage, tail)

    def call(
        self,
        request,
        timeout_s: float,
        on_progress: Callable[[m.Progress], None] | None = None,
        on_need: Callable[[m.NeedRuns], object] | None = None,
    ):
        """Send `request`; pass on progress; answer a judge's `NeedRuns` with `on_need`."""
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
            if isinstance(answer, m.NeedRuns):
                if on_need is None:  # only a judge, inside a harness, may ask for its runner
                    self.kill()
                    raise WorkerDied(
                        "protocol", "the worker sent a request of its own outside a harness", stage
                    )
                reply = on_need(answer)
                try:
                    m.write_message(self._wfd, reply)
                except (BrokenPipeError, OSError):
                    self._died(stage)
                continue
            if not m.answers(request, answer):
                self.kill()  # its answer pipe carries what its code wrote: trust nothing more
                raise WorkerDied(
                    "protocol",
                    f"the worker answered {type(answer).__name__} to {type(request).__name__}",
                    stage,
                )
            if fatal(answer):
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
        if self.alive and self.info is None:
            self.kill()  # still importing torch: it would read its pipe's EOF only after that
            return
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
        # The compile workers fill it for the GPU runner; removed with the pool.
        self.triton_cache = private_triton_cache()
        self.workspace_files: list[str] = []  # task files served: their workspaces' secrets hidden
        self._workers: dict[str, WorkerProcess] = {}
        self._locks: dict[str, threading.Lock] = collections.defaultdict(threading.Lock)
        self.restarts = 0
        self.killed = False  # after kill(): no new worker is started, every call fails at once

    def worker(self, device: str) -> WorkerProcess:
        if device not in self._workers:
            self._workers[device] = WorkerProcess(device, self.triton_cache, self.workspace_files)
        return self._workers[device]

    def call(self, device: str, request, timeout_s: float, on_progress=None, *, from_call=False):
        """`request` on `device`'s worker. A harness and the ceilings go to the device's judge,
        which never imports a candidate; the judge's requests for candidate runs are relayed
        here to the device's runner, within the harness's time limit. The limit counts from the
        request's arrival at a ready worker, or with `from_call` from this call: waiting for
        the worker and its start-up included (a budget's share, not a candidate's allowance)."""
        since = time.monotonic() if from_call else None
        if isinstance(request, m.RunHarness):
            return self._judge(device, request, timeout_s, on_progress, since)
        if isinstance(request, (m.MeasureCeilings, m.LowerReference)):
            # what timings are held to, and the reference compiled: no candidate near
            return self._call(JUDGE_PREFIX + device, request, timeout_s, on_progress, since=since)
        return self._call(device, request, timeout_s, on_progress, since=since)

    def _judge(self, device: str, request: m.RunHarness, timeout_s: float, on_progress, since=None):
        deadline = (since or time.monotonic()) + timeout_s

        def relay(need: m.NeedRuns):
            remaining = max(1.0, deadline - time.monotonic() - RELAY_MARGIN_S)
            try:
                answer = self._call(device, need.request, remaining, on_progress)
            except WorkerDied as d:
                tail = f"\n{d.stderr[-1500:]}" if d.stderr else ""
                return m.RunnerFailed(d.kind, d.message + tail, d.stage)
            if isinstance(answer, facts.WorkerError):
                ended = answer.reason in facts.FATAL_REASONS  # the runner exits after it
                return m.RunnerFailed(answer.reason, answer.message, ended=ended)
            return answer

        return self._call(
            JUDGE_PREFIX + device, request, timeout_s, on_progress, relay, since=since
        )

    def _call(
        self, device: str, request, timeout_s: float, on_progress=None, on_need=None, since=None
    ):
        if self.killed:
            raise WorkerDied("cancelled", "the evaluation was cancelled")
        with self._locks[device]:
            if self.killed:
                raise WorkerDied("cancelled", "the evaluation was cancelled")
            w = self.worker(device)
            self._serve(w, request)
            if since is not None:
                if not w.alive:
                    w.start()
                timeout_s -= time.monotonic() - since
                if timeout_s <= 0:
                    raise WorkerDied(
                        "timeout", "no time was left once the worker was ready", stage="load"
                    )
            try:
                return w.call(request, timeout_s, on_progress, on_need)
            except WorkerDied as died:
                if self.killed:  # our own kill, not the candidate's crash: no verdict on it
                    raise WorkerDied("cancelled", "the evaluation was cancelled") from died
                self.restarts += 1
                raise

    def protect(self, *paths: str) -> None:
        """Show the workspace of each of `paths` (a task's file, its reference's module, its
        config, its root) to every worker started from now on, with its private folders and
        files hidden (`sandbox.workspace_private`)."""
        for path in paths:
            path = os.path.realpath(path)
            if path not in self.workspace_files:
                self.workspace_files.append(path)

    def _serve(self, worker: WorkerProcess, request) -> None:
        """Before `worker` runs `request`: its task's workspace is protected, and a worker
        started before that is restarted unless its sandbox already shows and hides what a new
        one would (`sandbox.View`: another kernel of the same workspace); a restart costs the
        imports of PyTorch and Triton again."""
        paths = task_paths(getattr(request, "task", None))
        file = getattr(request, "file", None)
        if isinstance(file, str) and file:
            paths.append(file)
        if not paths:
            return
        self.protect(*paths)
        if worker.alive and any(os.path.realpath(p) not in worker.started_for for p in paths):
            if sandbox.view(self.workspace_files) == worker.view:
                worker.started_for = tuple(self.workspace_files)
            else:
                worker.stop()

    def retire(self, device: str) -> None:
        """Stop `device`'s worker, if it runs; the next call starts a fresh one."""
        with self._locks[device]:
            worker = self._workers.get(device)
            if worker is not None:
                worker.stop()

    def pids(self) -> list[int]:
        return [w.proc.pid for w in self._workers.values() if w.alive and w.proc is not None]

    def close(self) -> None:
        """Stop every worker: all are told at once (EOF on their pipes) and then awaited, so
        the user waits for the slowest interpreter shutdown, not for their sum."""
        workers = list(self._workers.values())
        for w in workers:
            w.close_pipes()
        for w in workers:
            w.stop()
        self._remove_cache()

    def kill(self) -> None:
        """Stop everything now (cancellation): running calls end with WorkerDied, new ones fail."""
        self.killed = True
        for w in list(self._workers.values()):
            w.kill()
        self._remove_cache()

    def _remove_cache(self) -> None:
        """Remove the pool's Triton cache once no worker of it runs (links in it are removed,
        never followed)."""
        if not any(w.alive for w in self._workers.values()):
            shutil.rmtree(self.triton_cache, ignore_errors=True)

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
