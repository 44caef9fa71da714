"""The adversarial suite: every attack in `attacks.py` is rejected for the right reason, at the
right stage, by one worker pool that survives all of them; past the static gate the sandbox and
the out-of-process judge hold on their own; and nothing gets out: no connection reaches a
listener on 127.0.0.1, no file appears outside the sandbox's scratch folder, no process started
by a candidate outlives the pool, and the sentinel key never appears in a result or a log."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import msgspec
import pytest

from kernelbrain.engine.api import facts as m
from kernelbrain.engine.evaluate import sandbox
from kernelbrain.engine.evaluate.pool import WorkerPool, scrubbed_env
from kernelbrain.engine.evaluate.verify import (
    claimed_seconds,
    held_to_clock,
    run_harness,
    verify,
)
from kernelbrain.engine.evaluate.work_floor import WorkFloor, held_to_floor
from kernelbrain.engine.task import find_task

from .attacks import ATTACKS, AUTOTUNED, BASE, CONTAINED, HONEST, SOURCE, at_top, edit, in_launcher

SENTINEL = "kb-sentinel-7f3a9c2e51d8"  # the configured key no output may carry
MARK = "987654.321"  # the `sleep` of any process an attack starts: found by its command line
SLOW = {"infinite loop": 25.0}  # per-attack harness time limits


class Listener:
    """A TCP server on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


class World(msgspec.Struct):
    workspace: Path
    outside: Path
    port: int

    def fill(self, source: str) -> str:
        return (
            source.replace("@PORT@", str(self.port))
            .replace("@OUTSIDE@", str(self.outside))
            .replace("@MARK@", MARK)
            .replace("@SECRET_FILE@", str(self.workspace / "secret.txt"))
        )


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if "__pycache__" not in p.parts}


def _marked_processes() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if MARK.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.fixture(scope="module")
def listener():
    server = Listener()
    yield server
    server.close()


@pytest.fixture(scope="module")
def world(tmp_path_factory, listener):
    root = tmp_path_factory.mktemp("adversarial")
    workspace = root / "workspace"
    shutil.copytree(BASE.parent, workspace)
    (workspace / "secret.txt").write_text(SENTINEL)
    outside = root / "outside"
    outside.mkdir()
    return World(workspace, outside, listener.port)


@pytest.fixture(scope="module")
def task(world):
    return find_task(world.workspace / "softmax.py", "softmax_kernel")


@pytest.fixture(scope="module")
def pool():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNELBRAIN_API_KEY", SENTINEL)  # what the engine holds; workers never do
        with WorkerPool() as p:
            yield p


@pytest.mark.slow
def test_attacks_are_rejected_and_contained(pool, task, world, listener):
    assert sandbox.probe().available, sandbox.probe().describe()  # CI installs bubblewrap
    before = _files(world.workspace)
    texts, wrong = [], []
    for name, attack in ATTACKS.items():
        source = world.fill(attack.source)
        report = verify(pool, task, source, "cpu", timeout_s=SLOW.get(name))
        texts.append(msgspec.json.encode(report).decode())
        if (report.accepted, report.stage, report.reason) != (False, *attack.gate):
            wrong.append(
                f"{name}: expected {attack.gate}, got {report.stage, report.reason}: "
                f"{report.message[:300]}"
            )
        if attack.unguarded is None or report.stage != "gate":
            continue
        # The gate is a first filter: past it, the sandbox and the judge must hold on their own.
        result = run_harness(pool, task, source, "cpu", timeout_s=SLOW.get(name))
        texts.append(msgspec.json.encode(result).decode())
        if attack.unguarded != CONTAINED and (result.accepted, result.stage, result.reason) != (
            False,
            *attack.unguarded,
        ):
            wrong.append(
                f"{name} past the gate: expected {attack.unguarded}, got "
                f"{result.accepted, result.stage, result.reason}: {result.message[:300]}"
            )
    texts += [pool.worker(d).stderr_tail(300) for d in ("cpu", "judge@cpu")]
    assert not wrong, "\n".join(wrong)
    assert len(ATTACKS) >= 50
    assert pool.restarts >= 4  # the crashes ended their workers, never the pool
    # Nothing got out.
    assert listener.connections == 0
    assert list(world.outside.iterdir()) == []
    assert _files(world.workspace) == before
    assert not any(SENTINEL in t for t in texts), "the sentinel key came out"
    assert all(len(t) < 200_000 for t in texts)  # a flooded message is truncated
    pool.close()
    deadline = time.monotonic() + 10
    while _marked_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _marked_processes() == [], "a process started by a candidate outlived the pool"


@pytest.mark.slow
def test_honest_variants_are_accepted(pool, task):
    for name, source in HONEST.items():
        report = verify(pool, task, source, "cpu")
        assert report.accepted, f"{name}: {report.stage} {report.reason} {report.message}"
        assert [s.name for s in report.stages] == [
            "smoke",
            "sweep",
            "stability",
            "determinism",
            "edge",
        ]
        assert all(c.ok for c in report.cases)
        assert report.timing is None  # no timing without a GPU
    assert len(HONEST) >= 5


def test_rejections_say_what_and_where(pool, task):
    report = verify(pool, task, ATTACKS["correct only at power-of-two sizes"].source, "cpu")
    assert report.stage == "sweep" and "->" in report.message  # names the perturbed size
    failing = [c for c in report.cases if not c.ok]
    assert failing and failing[-1].mismatched > 0 and failing[-1].max_abs_err > 0
    report = verify(pool, task, AUTOTUNED, "cpu")
    assert report.stage == "sweep" and "autotune config BLOCK=128" in report.message, report.message
    report = verify(pool, task, ATTACKS["torch fallback"].source, "cpu")
    assert "aten._softmax" in report.message and report.torch_ops == ["_softmax"]
    report = verify(pool, task, edit(("import torch\n", "import os\nimport torch\n")), "cpu")
    assert report.line == 7 and "import os" in report.message
    report = verify(pool, task, ATTACKS["result written into the input"].source, "cpu")
    assert "changed its input" in report.message


def test_zero_answer_fails_a_loose_tolerance_on_small_outputs(tmp_path):
    """A task's atol of 0.5 holds every softmax value of a 128-wide row (~0.008 on average), so
    zeros would pass it: the tolerance scales down to the output's magnitude."""
    shutil.copy(BASE, tmp_path / "softmax.py")
    config = (BASE.parent / "kernelbrain.toml").read_text()
    (tmp_path / "kernelbrain.toml").write_text(config + "rtol = 1e-2\natol = 0.5\n")
    task = find_task(tmp_path / "softmax.py", "softmax_kernel")
    zeros = edit(
        (
            "    return out\n\n\ndef softmax_ref",
            "    if n_cols > 96:\n        return torch.zeros_like(x)\n    return out\n\n\ndef softmax_ref",
        )
    )
    with WorkerPool() as p:
        report = verify(p, task, zeros, "cpu")
        assert (report.accepted, report.stage, report.reason) == (False, "smoke", "mismatch")
        assert verify(p, task, SOURCE + "\n", "cpu").accepted


def test_environment_of_workers_holds_no_secret(monkeypatch):
    """The worker's own environment is clean even when the engine's holds keys."""
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    monkeypatch.setenv("MY_SERVICE_TOKEN", SENTINEL)
    # secrets under names no pattern knows (a red team read these from /proc/self/environ)
    monkeypatch.setenv("DATABASE_URL", f"postgres://admin:{SENTINEL}@db:5432/prod")
    monkeypatch.setenv("MYSQL_PWD", SENTINEL)
    monkeypatch.setenv("GH_PAT", SENTINEL)
    monkeypatch.setenv("SENTRY_DSN", f"https://{SENTINEL}@sentry.example/1")
    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING", "1")  # a toolchain's own setting passes
    env = scrubbed_env("cpu")
    assert SENTINEL in os.environ["OPENAI_API_KEY"]
    assert SENTINEL not in "".join(env.values())
    assert "OPENAI_API_KEY" not in env and "MY_SERVICE_TOKEN" not in env
    assert env["TRITON_PRINT_AUTOTUNING"] == "1" and "PATH" in env


def test_a_missing_sandbox_is_said_plainly():
    """Where bubblewrap is missing or off, the engine says that workers run unsandboxed."""
    probe = "from kernelbrain.engine.evaluate import sandbox; print(sandbox.probe().describe())"
    off = subprocess.run(
        [sys.executable, "-c", probe],
        env=dict(os.environ, KERNELBRAIN_SANDBOX="0"),
        capture_output=True,
        text=True,
        check=True,
    )
    assert off.stdout.startswith("NOT sandboxed") and "KERNELBRAIN_SANDBOX=0" in off.stdout
    on = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert on.stdout.startswith("sandboxed with bubblewrap")


def test_a_timing_that_claims_more_time_than_passed_is_forged():
    """The engine's own clock bounds a timing's claims: 100 repetitions of a 5 ms original and
    a 1 ms candidate cannot have run in 0.3 s (a forged answer inflating the original)."""
    case = m.CaseTiming("x", 5.0, 1.0, 5.0, 4.9, 5.1, 1e-9, 0.01, "faster", 100, True)
    result = m.TimingResult([case, case], 5.0, "faster")
    assert abs(claimed_seconds(result) - 1.2) < 1e-9
    forged = held_to_clock(result, 0.3)
    assert forged.rejection is not None and forged.rejection.reason == "forged-timing"
    assert "1.20 s" in forged.rejection.message
    assert held_to_clock(result, 2.0).rejection is None  # an honest timing fits its clock


def test_a_candidate_time_below_the_work_floor_is_forged():
    """A candidate's claimed time cannot beat writing its outputs: 200 MB of outputs beyond a
    50 MB L2 at a 4 TB/s fill rate take at least 25 us (at the margin's 6 TB/s); a runner that
    reports 2 us is rejected, an honest 60 us is not, and a case whose outputs fit in the L2
    (nothing bounds it) is never rejected."""
    floor = WorkFloor({"big": 200_000_000, "small": 10_000_000}, 50_000_000, 4000.0)
    assert abs(floor.min_ms("big") - 0.025) < 1e-9
    assert floor.min_ms("small") == 0.0 and floor.min_ms("unknown case") == 0.0

    def timing(label: str, candidate_ms: float) -> m.TimingResult:
        case = m.CaseTiming(
            label, 0.1, candidate_ms, 0.1 / candidate_ms, 1, 1, 1e-9, 0.01, "faster", 100, True
        )
        return m.TimingResult([case], case.speedup, "faster")

    forged = floor.held(timing("big", 0.002))
    assert forged.rejection is not None and forged.rejection.reason == "less-work"
    assert "does less work than the task" in forged.rejection.message
    assert floor.held(timing("big", 0.060)).rejection is None
    assert floor.held(timing("small", 0.0001)).rejection is None
    both = held_to_floor(m.TimingResults([timing("big", 0.002), timing("big", 0.06)]), floor)
    assert [r.rejection is not None for r in both.results] == [True, False]
    # no floor without the judge's sizes or a measured fill rate
    assert WorkFloor.of(m.HarnessResult(True, None, None, ""), None) is None
    ceilings = m.Ceilings("gpu", 4000.0, 900.0, "", 4000.0, 50_000_000)
    assert WorkFloor.of(m.HarnessResult(True, None, None, ""), ceilings) is None
    sized = m.HarnessResult(True, None, None, "", output_bytes={"big": 200_000_000})
    assert WorkFloor.of(sized, ceilings) == WorkFloor({"big": 200_000_000}, 50_000_000, 4000.0)


PROFILED_SCRIPT = """
import os, socket, sys
for attempt in (
    lambda: open(os.path.join(@OUTSIDE@, "from-profile.txt"), "w").write("escaped"),
    lambda: open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "beside.txt"), "w"),
    lambda: socket.create_connection(("127.0.0.1", @PORT@), timeout=2),
):
    try:
        attempt()
        print("attempt succeeded", file=sys.stderr)
    except OSError as exc:
        print("attempt failed:", type(exc).__name__, file=sys.stderr)
print("environment:", sorted(os.environ.items()), file=sys.stderr)
"""


def test_a_profiled_script_runs_in_the_sandbox(tmp_path, listener, monkeypatch, capfd):
    """`kernelbrain profile` runs the user's script as a worker runs: it cannot write outside its
    scratch folder (its own folder included), connect anywhere, or see a key the engine holds."""
    from kernelbrain.engine.profile.whole_program import run_profile

    monkeypatch.setenv("KERNELBRAIN_API_KEY", SENTINEL)
    outside = tmp_path / "outside"
    outside.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    script = project / "model.py"
    script.write_text(
        PROFILED_SCRIPT.replace("@OUTSIDE@", repr(str(outside))).replace(
            "@PORT@", str(listener.port)
        )
    )
    before = listener.connections
    try:
        run_profile(script, [], project, timeout_s=300)
    except RuntimeError:
        pass  # without a GPU the profiler fails after the script ran: what it did still counts
    err = capfd.readouterr().err
    assert err.count("attempt failed:") == 3, err[-3000:]
    assert "environment:" in err and SENTINEL not in err
    assert _files(outside) == set() and _files(project) == {"model.py"}
    assert listener.connections == before


def test_what_a_candidate_leaves_in_its_runner_ends_with_the_search(tmp_path):
    """Workers outlive the threads that start them, so a runner could outlive a search. A
    candidate past the gate leaves a mark in its runner's modules (a patch that slowed the next
    original would forge the next search's timings); once a search ends, the runner that held
    it is gone, and a later candidate that looks for the mark does not find it."""
    from kernelbrain.engine.api.budget import Budget
    from kernelbrain.engine.search.driver import Search
    from kernelbrain.engine.store import Store

    workspace = tmp_path / "workspace"
    shutil.copytree(BASE.parent, workspace)
    task = find_task(workspace / "softmax.py", "softmax_kernel")
    leaves = edit(("    return out", "    torch.kb_left_behind = True\n    return out"))
    looks = edit(
        (
            "    return out",
            "    assert not hasattr(torch, 'kb_left_behind'), 'left behind'\n    return out",
        )
    )
    with WorkerPool() as pool:
        assert run_harness(pool, task, leaves, "cpu").accepted
        assert not run_harness(pool, task, looks, "cpu").accepted  # the mark is there
        Search(task, device="cpu", budget=Budget(wall_s=30, max_candidates=1),
               store=Store(workspace), pool=pool).run()  # fmt: skip
        result = run_harness(pool, task, looks, "cpu")
        assert result.accepted, result.message


def test_code_the_original_ran_at_import_stays_allowed_only_while_what_it_calls_is_unchanged():
    """Projects build autotune lists in helpers (`configs=_configs()`): widening such a list
    (`_configs() + [...]`) keeps the original's import-time call, which the gate lets through.
    A candidate that keeps the call but changes the helper has it run new code at import
    (here a 16 TiB allocation): refused as module code, like any new import-time code."""
    from kernelbrain.engine.evaluate.policy import static_gate
    from kernelbrain.engine.mutate import MutationContext, load_mutators

    corpus = Path(__file__).resolve().parents[1] / "corpus"
    task = find_task(corpus / "matmul_pruned.py", "matmul_kernel")
    original = Path(task.file).read_text()
    widened = list(load_mutators()["autotune-space"].propose(MutationContext(task, original)))
    assert widened and all("_configs() + [" in w.source for w in widened)
    assert [static_gate(task, original, w.source) for w in widened] == [None] * len(widened)
    helper = "    configs = []\n"
    boot = widened[0].source.replace(
        helper, helper + "    torch.empty(1 << 44, dtype=torch.uint8)\n"
    )
    assert boot != widened[0].source
    rejection = static_gate(task, original, boot)
    assert rejection is not None and rejection.reason == "module-code", rejection
    assert "_configs()" in rejection.message
    # the same helper change under the unchanged original decorator: what it calls changed
    plain = original.replace(helper, helper + "    torch.empty(1 << 44, dtype=torch.uint8)\n")
    rejection = static_gate(task, original, plain)
    assert rejection is not None and rejection.reason == "module-code", rejection


@pytest.mark.parametrize(
    "lines",
    [
        ("from triton.runtime import build as kb_b",),
        ("import triton.runtime.build",),
        ("from triton.runtime.build import compile_module_from_src",),
        ("kb = triton.runtime.build.compile_module_from_src",),
        ("from triton import runtime as kb_r", "kb = kb_r.build"),
        ("from triton.backends.nvidia import driver as kb_d",),
        ("kb = torch.classes.load_library",),
        ("from torch import classes as kb_c",),
    ],
)
def test_native_code_of_the_candidates_own_is_refused_by_the_gate(lines):
    """Building and loading a C extension (Triton's build helpers, a backend's compiler) or a
    library into torch runs native code that no sandbox rule of Python can watch."""
    from kernelbrain.engine.evaluate.policy import static_gate

    from .attacks import at_top

    task = find_task(BASE, "softmax_kernel")
    rejection = static_gate(task, SOURCE, at_top(*lines))
    assert rejection is not None and rejection.reason in ("forbidden-import", "forbidden-attribute")


RED_TEAM_GATE = {
    # getters by name, reached as attributes: any attribute of anything (builtins of `print`)
    "attrgetter as an attribute": at_top(
        "import operator", launcher=("kb = operator.attrgetter('__self__')(print)",)
    ),
    "methodcaller through an alias": at_top(
        "import operator as kb_op", launcher=("kb = kb_op.methodcaller('x')",)
    ),
    # a file mapped into a tensor
    "storage from a file": in_launcher("kb = torch.UntypedStorage.from_file('/etc/hostname')"),
    # a harmless name that is the candidate's own function, called at import
    "own Config called at import": at_top("def Config():", "    return 1", "", "", "kb = Config()"),
    "own cdiv in a default": at_top(
        "def cdiv(a=0):", "    return a", "", "", "def kb_f(n=cdiv()):", "    return n"
    ),
    # a decorator named like Triton's, defined by the candidate
    "own jit decorator": at_top(
        "def jit(f):", "    return f", "", "", "@jit", "def kb_f():", "    return 0"
    ),
    # state kept between calls
    "mutable default": at_top("def kb_count(calls=[0]):", "    return calls"),
    "mutable default by call": at_top("def kb_count(calls=dict()):", "    return calls"),
    "module written through a local alias": in_launcher("kb_t = torch", "kb_t.kb_calls = 1"),
    "alias of an alias": in_launcher("kb_t = torch", "kb_u = kb_t", "kb_u.kb_calls = 1"),
}
# Red team, pass 4: modules and builtins reached where no list names them.
RED_TEAM_GATE_4 = {
    # an allowed standard module holding builtins or another module under a name of its own
    "builtins as enum's attribute": at_top("import enum", launcher=("kb = enum.bltns",)),
    "a builtin through enum's attribute": at_top(
        "import enum as kb_e", launcher=("kb = kb_e.bltns.vars",)
    ),
    "builtins imported from enum": at_top("from enum import bltns as kb_b"),
    "re behind typing's name for it": at_top(
        "import typing", launcher=("kb = typing.stdlib_re.compile",)
    ),
    "copy through dataclasses": at_top("import dataclasses", launcher=("kb = dataclasses.copy",)),
    # a module used as a value: the chain starts where the gate reads no name
    "module in a list": in_launcher("kb = [torch][0].ops"),
    "module in a conditional": in_launcher("kb = (torch if n_rows else triton).library"),
    "module passed to a function": at_top(
        "def kb_reach(m):", "    return m", launcher=("kb = kb_reach(torch).hub",)
    ),
    # state written through functions that mutate their first argument
    "operator.setitem on module state": at_top(
        "import operator", "KB_MEMO = {}", launcher=("operator.setitem(KB_MEMO, 0, x)",)
    ),
    "dict.update unbound on module state": at_top(
        "KB_MEMO = {}", launcher=("dict.update(KB_MEMO, {0: x})",)
    ),
    "operator.iadd on a module list": at_top(
        "import operator as kb_op", "KB_SEEN = []", launcher=("kb_op.iadd(KB_SEEN, [x])",)
    ),
}


# Red team, pass 5: strings evaluated as code, state kept through a helper's parameters.
RED_TEAM_GATE_5 = {
    "code in a string annotation, resolved by get_type_hints": at_top(
        "import typing",
        "def kb_hint(v: \"__import__('os')\"):",
        "    return v",
        launcher=("typing.get_type_hints(kb_hint)",),
    ),
    "get_type_hints imported under another name": at_top(
        "from typing import get_type_hints as kb_g", launcher=("kb_g(softmax)",)
    ),
    "singledispatch resolving annotations": at_top(
        "import functools", launcher=("functools.singledispatch(len)",)
    ),
    "a string inside a subscripted annotation": at_top(
        "import typing", "def kb_f(v: typing.List['kb']):", "    return v"
    ),
    "a string return annotation": at_top("def kb_f() -> 'kb':", "    return 0"),
    "call count through a helper's parameter": at_top(
        "KB_CALLS = [0]",
        "def kb_tick(c):",
        "    c[0] = c[0] + 1",
        "    return c[0]",
        launcher=("kb_tick(KB_CALLS)",),
    ),
    "augmented write into a parameter": at_top(
        "KB_CALLS = [0]", "def kb_tick(c):", "    c[0] += 1", launcher=("kb_tick(KB_CALLS)",)
    ),
    "a helper appending to its parameter": at_top(
        "KB_SEEN = []", "def kb_keep(c, v):", "    c.append(v)", launcher=("kb_keep(KB_SEEN, x)",)
    ),
}
# Module state reached through an expression rather than a plain name: a subscript of a
# container, a builtin's result, a lambda, a getter function, a walrus.
RED_TEAM_GATE_6 = {
    "a memo reached through a subscript": at_top(
        "KB_MEMO = dict()", launcher=("kb_m = (KB_MEMO,)[0]", "kb_m[id(x)] = x")
    ),
    "a memo reached through a list": at_top(
        "KB_MEMO = dict()", launcher=("kb_m = [KB_MEMO][0]", "kb_m[id(x)] = x")
    ),
    "a memo reached through next(iter())": at_top(
        "KB_MEMO = dict()", launcher=("kb_m = next(iter([KB_MEMO]))", "kb_m.update({1: x})")
    ),
    "a memo reached through a lambda": at_top(
        "KB_MEMO = dict()", launcher=("kb_m = (lambda: KB_MEMO)()", "kb_m[id(x)] = x")
    ),
    "a memo reached through a getter": at_top(
        "KB_MEMO = dict()",
        "def kb_memo():",
        "    return KB_MEMO",
        launcher=("kb_m = kb_memo()", "kb_m[id(x)] = x"),
    ),
    "a ring written without a name": at_top(
        "KB_RING = dict()", launcher=("(KB_RING,)[0].setdefault(tuple(x.shape), []).append(x)",)
    ),
    "a subscript write without a name": at_top(
        "KB_MEMO = dict()", launcher=("(KB_MEMO,)[0][id(x)] = x",)
    ),
    "a walrus": at_top("KB_MEMO = dict()", launcher=("(kb_m := [KB_MEMO][0])[id(x)] = x",)),
}
# The second red team's counters (a time bomb after N calls): containers built in a default,
# mutating methods the list lacked, a module-level lambda, a mutating function on an expression.
RED_TEAM_GATE_7 = {
    "a default built by subscript": at_top(
        "def kb_count(box=[[]][0]):", "    box.append(0)", launcher=("kb_count()",)
    ),
    "a default built by a call": at_top(
        "def kb_count(box=tuple([[]])):", "    box[0].append(0)", launcher=("kb_count()",)
    ),
    "a set grown by symmetric_difference_update": at_top(
        "KB_SEEN = {-1}", launcher=("KB_SEEN.symmetric_difference_update({len(KB_SEEN)})",)
    ),
    "a list sorted in place": at_top("KB_SEEN = [1]", launcher=("KB_SEEN.sort()",)),
    "a module-level lambda": at_top(
        "KB_CALLS = []", "kb_tick = lambda: KB_CALLS.append(0)", launcher=("kb_tick()",)
    ),
    "operator.setitem on an expression": at_top(
        "import operator",
        "KB_M = dict()",
        launcher=("operator.setitem((KB_M, 0)[0], 'n', 1)",),
    ),
}
# Red team 5: code Python runs while it makes a class, and setting attributes by name.
RED_TEAM_GATE_8 = {
    "a metaclass function": at_top(
        "def _mk(name, bases, ns):", "    return 1", "class _B(metaclass=_mk):", "    pass"
    ),
    "a keyword a base's __init_subclass__ takes": at_top(
        "class _A:", "    pass", "class _B(_A, flag=1):", "    pass"
    ),
    "an __init_subclass__ defined": at_top(
        "class _A:",
        "    def __init_subclass__(cls):",
        "        cls.n = 1",
        "class _B(_A):",
        "    pass",
    ),
    "an __init_subclass__ assigned": at_top(
        "def _hook(cls):", "    return None", "class _A:", "    __init_subclass__ = _hook"
    ),
    "a finalizer": at_top("class _A:", "    def __del__(self):", "        return None"),
    "functools.wraps on a class": at_top(
        "import functools", launcher=("functools.wraps(len)(tl.tensor)",)
    ),
    "update_wrapper imported by name": at_top(
        "from functools import update_wrapper as _uw",
        launcher=("_uw(tl.tensor, len, assigned=('__name__',), updated=())",),
    ),
}
ALL_GATE = (
    RED_TEAM_GATE
    | RED_TEAM_GATE_4
    | RED_TEAM_GATE_5
    | RED_TEAM_GATE_6
    | RED_TEAM_GATE_7
    | RED_TEAM_GATE_8
)


@pytest.mark.parametrize("name", sorted(ALL_GATE))
def test_red_team_routes_through_the_gate_are_closed(name):
    """What a red team got through the gate, by class, each in variations of its own."""
    from kernelbrain.engine.evaluate.policy import static_gate

    task = find_task(BASE, "softmax_kernel")
    rejection = static_gate(task, SOURCE, ALL_GATE[name])
    assert rejection is not None, name
    if name in RED_TEAM_GATE_6 or name in RED_TEAM_GATE_7:
        assert rejection.reason == "stateful", rejection
    assert rejection.reason in (
        "forbidden-attribute",
        "forbidden-import",
        "module-code",
        "stateful",
    ), rejection
