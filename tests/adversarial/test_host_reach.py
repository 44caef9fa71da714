"""What of the user's machine outside the workspace a candidate can reach, whatever it runs (as
if the gate had been bypassed: candidates go straight to the sandboxed harness).

- **Sockets on paths.** A path socket is reachable from any network namespace: an editor's IPC
  socket in a temporary folder, a session bus, a container daemon's socket under `/run` would
  hand a candidate a process outside the sandbox. The temporary and runtime folders are masked;
  only what the worker loads from (its interpreter, the task's workspace) shows through them.
- **The machine's key** that seals stored verdicts (`engine/store/seal.py`): whoever reads it
  forges a verified row.
- **Credentials in the home folder** (git, npm, database and assistant configurations)."""

from __future__ import annotations

import socket
import tempfile
import threading
import time

import pytest

from kernelbrain.engine.evaluate import sandbox
from kernelbrain.engine.evaluate.pool import WorkerPool
from kernelbrain.engine.evaluate.verify import run_harness

from .attacks import at_top, base_task

SECRET = "kb-host-secret-5e7a"


def _listen(path: str) -> tuple[socket.socket, list[bytes]]:
    """A unix socket server at `path` that records whatever a client sends."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(4)
    got: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                got.append(conn.recv(1024))

    threading.Thread(target=serve, daemon=True).start()
    return server, got


CONNECT = (
    "import socket as kb_socket",
    "kb_reached = []",
    "for kb_p in @PATHS@:",
    "    kb_s = kb_socket.socket(kb_socket.AF_UNIX, kb_socket.SOCK_STREAM)",
    "    try:",
    "        kb_s.connect(kb_p)",
    "        kb_s.sendall(b'escaped')",
    "        kb_reached.append(kb_p)",
    "    except OSError:",
    "        pass",
    "    finally:",
    "        kb_s.close()",
    "if kb_reached:",
    "    raise RuntimeError('connected to ' + ' '.join(kb_reached))",
)

READ = (
    "kb_got = []",
    "for kb_p in @PATHS@:",
    "    try:",
    "        kb_got.append(open(kb_p).read())",
    "    except OSError:",
    "        pass",
    "if kb_got:",
    "    raise RuntimeError('leaked: ' + ' | '.join(kb_got))",
)

# the path class a module the gate allows hands out, as a red team found it
READ_VIA_TRITON = (
    "from triton.compiler import compiler as kb_c",
    "kb_got = []",
    "for kb_p in @PATHS@:",
    "    try:",
    "        kb_got.append(kb_c.Path(kb_p).read_text())",
    "    except OSError:",
    "        pass",
    "if kb_got:",
    "    raise RuntimeError('leaked: ' + ' | '.join(kb_got))",
)
# whatever the home holds, by walking it: nothing there has content but what Triton writes (the
# names of hidden files may show: an empty file is bound over each)
LIST_HOME = (
    "import os as kb_os",
    "kb_seen = []",
    "for kb_d, _, kb_ns in kb_os.walk(kb_os.path.expanduser('~')):",
    "    for kb_n in kb_ns:",
    "        kb_p = kb_os.path.join(kb_d, kb_n)",
    "        if '/.triton/' not in kb_p and kb_os.path.getsize(kb_p):",
    "            kb_seen.append(kb_p)",
    "if kb_seen:",
    "    raise RuntimeError('the home holds ' + ' '.join(kb_seen[:20]))",
)


def _fill(lines: tuple[str, ...], paths: list[str]) -> str:
    return at_top(*lines).replace("@PATHS@", repr(paths))


@pytest.mark.slow
def test_a_candidate_reaches_no_socket_key_or_credential_outside_the_workspace(
    tmp_path, monkeypatch
):
    assert sandbox.probe().available, sandbox.probe().describe()  # CI installs bubblewrap
    ws = tmp_path / "ws"
    task = base_task(ws)
    (ws / "kernelbrain.toml").touch()  # the workspace's root: the worker sees it, nothing beside
    # sockets as an editor, an agent and a daemon leave them: in a temporary folder of their own,
    # directly in the temporary folder, and beside the workspace
    own = tempfile.mkdtemp(prefix="kb-ipc-")
    paths = [f"{own}/ipc.sock", f"{tempfile.mkdtemp(prefix='kb-agent-')}.sock"]
    paths.append(str(tmp_path / "daemon.sock"))
    listeners = [_listen(p) for p in paths]
    # the machine's key and the user's credentials, placed where the worker could otherwise read
    # them: inside the workspace's folder
    state = ws / "state"
    state.mkdir()
    (state / "machine.key").write_text(SECRET)
    monkeypatch.setenv("KERNELBRAIN_STATE_DIR", str(state))
    home = ws / "home"
    # the home's credentials in every shape: assistant, git, npm and database configurations,
    # shell and REPL histories, token files, registry and cloud configurations, and a file of
    # the user's own that no list could name
    in_home = [
        ".claude/credentials.json",
        ".gitconfig",
        ".npmrc",
        ".pgpass",
        ".local/share/fish/fish_history",
        ".node_repl_history",
        ".kaggle/kaggle.json",
        ".huggingface/token",
        ".m2/settings.xml",
        ".vault-token",
        ".pip/pip.conf",
        ".cargo/credentials.toml",
        "notes/prod-db.txt",
    ]
    for name in in_home:
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(SECRET)
    monkeypatch.setenv("HOME", str(home))
    secrets = [str(state / "machine.key")] + [str(home / n) for n in in_home]
    try:
        with WorkerPool() as pool:
            honest = run_harness(pool, task, (ws / "softmax.py").read_text(), "cpu")
            assert honest.accepted, honest.message  # the workspace itself is readable
            for name, source in {
                "connect": _fill(CONNECT, paths),
                "read": _fill(READ, secrets),
                "read through Triton's own imports": _fill(READ_VIA_TRITON, secrets),
                "list the home": _fill(LIST_HOME, []),
            }.items():
                result = run_harness(pool, task, source, "cpu")
                assert SECRET not in result.message, f"{name}: {result.message[:500]}"
                assert result.accepted, f"{name}: {result.reason}: {result.message[:500]}"
        # the same sockets from outside the sandbox: each listener works and heard only this
        for path in paths:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as outside:
                outside.connect(path)
                outside.sendall(b"outside")
        deadline = time.monotonic() + 10
        while any(not got for _, got in listeners) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [got for _, got in listeners] == [[b"outside"]] * len(paths)
    finally:
        for server, _ in listeners:
            server.close()
    assert (state / "machine.key").read_text() == SECRET  # the engine itself still reads it
