"""Isolation for every process that runs workspace or candidate code (engine side, no torch).

Such a process (an evaluation worker, a compile worker, the compiled view's worker, a profiled
program) runs inside bubblewrap (`bwrap`), a tool made for exactly this:

- its own network namespace: only a loopback of its own, so nothing outside is reachable,
  127.0.0.1 of the machine included;
- its own PID namespace with a fresh /proc: it sees only its own processes, never the engine's
  environment (`/proc/<ppid>/environ`), and when the sandbox's first process dies the kernel
  kills every process left in it (a `setsid` + fork cannot outlive the run);
- the whole filesystem read-only (/tmp included: workspaces and test folders live there), a
  private temporary folder and home (`TMPDIR` and `HOME` in its scratch folder), and well-known
  credential stores of the real home hidden; writable only: its own scratch folder and its
  pool's private Triton cache (which the compile workers fill for the GPU worker; never the
  user's, see `pool.private_triton_cache`);
- no capabilities, no new privileges (bwrap sets `PR_SET_NO_NEW_PRIVS`), a new session (no
  terminal to inject keystrokes into), and it dies with the engine process that started it;
- on a GPU, the NVIDIA device nodes bound into an otherwise minimal /dev.

`probe()` runs bwrap once per engine process to learn whether the machine allows it (it needs
user namespaces or root). Where it does not, workers run unsandboxed and `notice()` says so, once.
"""

from __future__ import annotations

import fnmatch
import functools
import glob
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from ..api.secrets import register_file, state_dir

# The real home folder is an empty one inside the sandbox (a tmpfs of HOME_QUOTA_BYTES), but for
# what the worker needs from it: its interpreter and packages, this package, the task's workspace
# (`_needed_under`). Credentials there come in more shapes than any list names (histories, token
# files, registry and cloud configurations, keys), so none of the home is shown by default.
# Where the workspace is the home folder itself, or holds it, these well-known stores stay hidden
# in it (folders masked by an empty tmpfs, files by /dev/null).
HOME_QUOTA_BYTES = 64 << 20
HIDDEN_HOME_DIRS = (
    ".ssh",
    ".aws",
    ".azure",
    ".gnupg",
    ".config",
    ".docker",
    ".kube",
    ".cache/huggingface",
    ".huggingface",
    ".password-store",
    ".local/share",  # keyrings, shell histories (fish), application tokens
    ".claude",
    ".codex",
    ".cargo",
    ".m2",
    ".gradle",
    ".kaggle",
    ".pip",
    ".terraform.d",
    ".vault.d",
)
HIDDEN_HOME_FILES = (
    ".netrc",
    ".git-credentials",
    ".gitconfig",
    ".npmrc",
    ".pgpass",
    ".pypirc",
    ".claude.json",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".psql_history",
    ".node_repl_history",
    ".mysql_history",
    ".sqlite_history",
    ".lesshst",
    ".vault-token",
    ".boto",
    ".s3cfg",
    ".dockercfg",
)
# Folders where programs of the user keep their unix sockets (an editor's IPC, a git askpass, a
# session bus): a path socket is reachable from any network namespace, so these are masked by
# an empty tmpfs and only what the worker needs in them is bound back, read-only.
SOCKET_DIRS = ("/tmp", "/var/tmp", "/run", "/var/run")
# What a workspace holds that its kernels never need and that may hold secrets or verdicts: the
# repository (remotes with tokens, history), KernelBrain's own store, dotenv files. Hidden in
# each folder from a task's file up to its repository's root.
HIDDEN_WORKSPACE_DIRS = (
    ".git",
    ".hg",
    ".svn",
    # credential folders, wherever they sit (a workspace that holds a home's dotfiles)
    ".ssh",
    ".aws",
    ".azure",
    ".gnupg",
    ".kube",
    ".docker",
    ".password-store",
)
HIDDEN_WORKSPACE_FILES = (".env", ".envrc", ".netrc", ".git-credentials", ".pypirc")
# Secret-looking names hidden anywhere below the workspace root, not only beside the kernel:
# `config/.env`, `prod.env`, keys and certificates, cloud credentials.
SECRET_NAME_PATTERNS = (  # matched against the lower-cased name
    ".env*",  # `.env.local`, `.env-prod`, an editor's `.env~`
    "*.env",
    "*.env~",
    "*secret*",  # `secret.txt`, `client_secret.json`
    "*credential*",
    "*password*",
    "*passwd*",
    ".envrc",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    ".pgpass",
    ".vault-token",
    "*_history",  # shell and REPL histories hold pasted tokens
    ".*history",
    "*service?account*.json",  # cloud service-account keys
    "*serviceaccount*.json",
    "kaggle.json",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "*.ppk",
    "*.kdbx",
    "id_rsa*",  # SSH private keys, every algorithm
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "id_xmss*",
    # configurations that hold passwords and tokens under plain names
    ".my.cnf",
    ".s3cfg",
    ".boto",
    ".dockercfg",
    "*.tfstate",
    "*.tfstate.backup",
    ".yarnrc.yml",
    "rclone.conf",
)
# Token files (`hf_token.txt`, `github-token`, `api.token`; not `tokenizer.json` nor
# `input_tokens.npy`), but no source file: a module named `token_utils.py` is code.
TOKEN_NAME_PATTERNS = ("token", "token.*", "*[_.-]token", "*[_.-]token.*")
SOURCE_SUFFIXES = (".py", ".pyi")
# Folders not searched for them (too large to walk at every start, and never the workspace's
# own secrets): environments, dependencies, caches.
UNSEARCHED_DIRS = frozenset(
    {"node_modules", ".venv", "venv", "site-packages", "__pycache__", ".tox", ".mypy_cache"}
)
SECRET_SEARCH_LIMIT = 20_000  # entries looked at below the workspace root, at most
# In `.kernelbrain/`, the store's files are hidden (the database, its journal, copies moved
# aside); harness drafts beside them stay readable: the harness being drafted runs from there.
STORE_FOLDER, STORE_FILES = ".kernelbrain", "kernelbrain.db"
PROBE_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Isolation:
    """What this machine allows: `available` means every layer below is in place."""

    available: bool
    tool: str | None  # the bwrap binary
    reason: str  # why it is unavailable ('' when available)

    def describe(self) -> str:
        if self.available:
            return (
                "sandboxed with bubblewrap: no network, own PID namespace, read-only filesystem "
                "with a private scratch folder and home, no capabilities"
            )
        return (
            "NOT sandboxed: " + self.reason + ". Workspace and candidate code runs with this "
            "user's rights and network (install bubblewrap, e.g. `apt-get install bubblewrap`)"
        )


def _disabled() -> bool:
    return os.environ.get("KERNELBRAIN_SANDBOX", "").lower() in ("0", "off", "no", "false")


@functools.lru_cache(maxsize=1)
def probe() -> Isolation:
    """Run bwrap once with the layers the workers need; cached for the process."""
    if _disabled():
        return Isolation(False, None, "the sandbox is turned off (KERNELBRAIN_SANDBOX=0)")
    tool = shutil.which("bwrap")
    if tool is None:
        return Isolation(False, None, "bubblewrap (`bwrap`) is not installed")
    scratch = Path(os.environ.get("TMPDIR", "/tmp"))
    argv = _bwrap_argv(tool, str(scratch), [], gpu=False) + ["--", sys.executable, "-c", "pass"]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, env=_outer_env()
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Isolation(False, tool, f"bubblewrap could not start ({exc})")
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no message"])[-1][:200]
        return Isolation(False, tool, f"bubblewrap is refused on this machine: {last}")
    return Isolation(True, tool, "")


_noticed = False


def _outer_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """bwrap's own environment: what it needs to start (a bwrap unpacked from a .deb finds its
    libraries through LD_LIBRARY_PATH), nothing else; the sandbox gets its own with --setenv."""
    source = os.environ if env is None else env
    out = {"PATH": source.get("PATH", "/usr/bin:/bin")}
    if source.get("LD_LIBRARY_PATH"):
        out["LD_LIBRARY_PATH"] = source["LD_LIBRARY_PATH"]
    return out


def notice() -> str | None:
    """The one-time plain statement that workers run unsandboxed (None when sandboxed or said)."""
    global _noticed
    iso = probe()
    if iso.available or _noticed:
        return None
    _noticed = True
    return iso.describe()


def _needed_under(folder: Path | str, workspace_files=()) -> list[str]:
    """Paths under `folder` the worker needs (the interpreter, its packages, this package, each
    task's workspace): kept visible when `folder` or a folder within it is masked."""
    needed = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    needed |= {p for p in sys.path if p}
    needed.add(str(Path(__file__).resolve().parents[2]))
    needed |= {workspace_root(f) for f in workspace_files}
    out = []
    for p in needed:
        real = os.path.realpath(p)
        if real.startswith(str(folder).rstrip(os.sep) + os.sep) and os.path.exists(real):
            out.append(real)
    # a path inside another one already kept is kept with it
    return sorted(p for p in out if not any(p.startswith(q + os.sep) for q in out))


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def masked_home() -> Path | None:
    """The real home folder, which the sandbox shows empty (None where there is none to mask)."""
    home = Path(os.path.expanduser("~")).resolve()
    return home if str(home) not in ("/", "") and home.is_dir() else None


def all_homes() -> list[Path]:
    """Every home the sandbox shows empty, outermost first: HOME's, this user's by the
    password database (a tool may set HOME elsewhere), and the machine's other homes (`/home`,
    `/root`: running as root, every user's home is readable)."""
    found: list[Path] = []
    candidates = [masked_home(), Path("/home"), Path("/root")]
    try:
        import pwd

        candidates.append(Path(pwd.getpwuid(os.getuid()).pw_dir))
    except (ImportError, KeyError):
        pass
    for c in candidates:
        if c is None:
            continue
        real = c.resolve()
        if str(real) not in ("/", "") and real.is_dir() and real not in found:
            found.append(real)
    return sorted(found, key=lambda p: len(p.parts))


def workspace_root(file: str) -> str:
    """The folder a task's modules load from: the nearest above its file that holds a harness
    config, a `pyproject.toml` or a repository; else the folder holding the file's outermost
    package (relative imports reach up to it); else the file's own."""
    real = os.path.realpath(file)
    here = start = real if os.path.isdir(real) else os.path.dirname(real)
    while True:
        if any(
            os.path.exists(os.path.join(here, marker))
            for marker in ("kernelbrain.toml", "pyproject.toml", ".git")
        ):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    here = start
    while os.path.isfile(os.path.join(here, "__init__.py")) and os.path.dirname(here) != here:
        here = os.path.dirname(here)
    return here


def workspace_private(file: str) -> tuple[list[str], list[str]]:
    """(folders, files) to hide from code run for a task whose file is `file`: in each folder
    from the file's up to the first that holds a repository (or to the home folder, or `/`), the
    folders of `HIDDEN_WORKSPACE_DIRS`, the files of `HIDDEN_WORKSPACE_FILES` (and `.env.*`) and
    the store's files; below the repository's root (without one, the workspace's root:
    `workspace_root`), every secret-looking file (`_secrets_below`).
    The kernel's modules and its harness stay readable."""
    folders: list[str] = []
    files: list[str] = []
    home = os.path.realpath(os.path.expanduser("~"))
    real = os.path.realpath(file)
    here = real if os.path.isdir(real) else os.path.dirname(real)
    while True:
        try:
            names = os.listdir(here)
        except OSError:
            names = []
        for name in names:
            # a link is hidden where it points (bwrap mounts over the real path)
            path = os.path.realpath(os.path.join(here, name))
            if name in HIDDEN_WORKSPACE_DIRS and os.path.isdir(path):
                folders.append(path)
            elif (name in HIDDEN_WORKSPACE_FILES or is_secret_file(name)) and os.path.isfile(path):
                files.append(path)
        store = os.path.join(here, STORE_FOLDER)
        if STORE_FOLDER in names and os.path.isdir(store) and not os.path.islink(store):
            for name in os.listdir(store):
                path = os.path.join(store, name)
                if name.startswith(STORE_FILES) and os.path.isfile(path):
                    files.append(path)
        parent = os.path.dirname(here)
        if ".git" in names or ".hg" in names or here in (home, parent):
            break
        here = parent
    if here in (home, os.path.dirname(here)):  # no repository: the workspace's own root
        here = workspace_root(real)
    if here not in (home, os.path.dirname(here)):  # a workspace root, not the home folder or `/`
        folders += [f for f in _secrets_below(here, files) if f not in folders]
    return folders, files


class View(NamedTuple):
    """What a sandbox started for some task files shows and hides of their workspaces: two
    sandboxes with equal views differ in nothing a task could see."""

    folders: tuple[str, ...]  # hidden (`workspace_private`)
    files: tuple[str, ...]  # hidden
    roots: tuple[str, ...]  # the workspace roots kept visible under masked folders (`/tmp`)


def view(workspace_files) -> View:
    """The `View` of a sandbox for `workspace_files` (their workspaces are walked now)."""
    folders: list[str] = []
    files: list[str] = []
    for f in workspace_files:
        more_folders, more_files = workspace_private(f)
        folders += [p for p in more_folders if p not in folders]
        files += [p for p in more_files if p not in files]
    roots = sorted({workspace_root(f) for f in workspace_files})
    for f in files:  # what they hold is scrubbed from every message, as it is now and later
        if is_secret_file(os.path.basename(f)) or f.endswith(HIDDEN_WORKSPACE_FILES):
            register_file(f)
    return View(tuple(folders), tuple(files), tuple(roots))


def is_secret_file(name: str) -> bool:
    """A file name that looks like it holds secrets (SECRET_NAME_PATTERNS, and
    TOKEN_NAME_PATTERNS for files that are not source; any case)."""
    lowered = name.lower()
    if any(fnmatch.fnmatchcase(lowered, p) for p in SECRET_NAME_PATTERNS):
        return True
    return not lowered.endswith(SOURCE_SUFFIXES) and any(
        fnmatch.fnmatchcase(lowered, p) for p in TOKEN_NAME_PATTERNS
    )


def _secrets_below(root: str, files: list[str]) -> list[str]:
    """Adds to `files` every secret-looking file below `root` (SECRET_NAME_PATTERNS); returns
    the repository folders found below it (a nested `.git`)."""
    folders: list[str] = []
    seen = 0
    for here, dirs, names in os.walk(root):
        seen += len(dirs) + len(names)
        if seen > SECRET_SEARCH_LIMIT:
            break
        for name in dirs:
            if name in HIDDEN_WORKSPACE_DIRS:
                folders.append(os.path.realpath(os.path.join(here, name)))
        dirs[:] = [d for d in dirs if d not in UNSEARCHED_DIRS and d not in HIDDEN_WORKSPACE_DIRS]
        for name in names:
            if is_secret_file(name):
                path = os.path.realpath(os.path.join(here, name))
                if os.path.isfile(path) and path not in files:
                    files.append(path)
    return folders


def _bwrap_argv(
    tool: str,
    scratch: str,
    writable: list[str],
    gpu: bool,
    hidden: tuple = ((), ()),
    scratch_quota: int | None = None,
    workspace_files: list[str] | tuple[str, ...] = (),
    mounted: tuple[tuple[str, str], ...] = (),
) -> list[str]:
    """`mounted`: (folder, where the sandbox sees it) pairs, writable, bound after the home is
    masked (Triton's cache at its default place in the home)."""
    argv = [
        tool,
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
    ]
    if gpu:
        for node in sorted(glob.glob("/dev/nvidia*")):
            argv += ["--dev-bind", node, node]
    if os.path.isdir("/dev/shm"):
        argv += ["--tmpfs", "/dev/shm"]  # torch's CPU shared memory, private to the sandbox
    for folder in SOCKET_DIRS:
        if os.path.isdir(folder) and not os.path.islink(folder):
            argv += ["--tmpfs", folder]
            for path in _needed_under(folder, workspace_files):
                argv += ["--ro-bind", path, path]
    for home in all_homes():
        argv += ["--size", str(HOME_QUOTA_BYTES), "--tmpfs", str(home)]
        needed = _needed_under(home, workspace_files)
        for path in needed:
            argv += ["--ro-bind", path, path]
        # shown again only where a needed folder holds them (a workspace that is the home)
        for name in HIDDEN_HOME_DIRS + HIDDEN_HOME_FILES:
            path = str(home / name)
            if not any(_within(path, n) for n in needed):
                continue
            if name in HIDDEN_HOME_DIRS and os.path.isdir(path):
                argv += ["--tmpfs", path]
            elif name in HIDDEN_HOME_FILES and os.path.isfile(path):
                argv += ["--ro-bind", "/dev/null", path]
        for path in needed:
            if any(
                _within(path, str(home / d)) and path != str(home / d) for d in HIDDEN_HOME_DIRS
            ):
                argv += ["--ro-bind", path, path]  # the interpreter under a masked folder
    for source, target in mounted:
        argv += ["--bind", source, target]
    private_state = os.path.realpath(state_dir())
    if os.path.isdir(private_state):
        argv += ["--tmpfs", private_state]  # the key that seals stored verdicts
    folders, files = hidden
    for path in folders:
        argv += ["--tmpfs", path]
    for path in files:
        argv += ["--ro-bind", "/dev/null", path]
    if scratch_quota is not None:
        # a tmpfs of its own, capped: nothing of it reaches the disk, and it is gone with the
        # sandbox's mount namespace
        argv += ["--size", str(scratch_quota), "--tmpfs", scratch]
        argv += ["--dir", os.path.join(scratch, "home")]
    for path in ([] if scratch_quota is not None else [scratch]) + list(writable):
        if os.path.isdir(path):
            argv += ["--bind", path, path]
    return argv


def command(
    argv: list[str],
    env: dict[str, str],
    scratch: str,
    writable: list[str],
    gpu: bool,
    workspace_files: list[str] | tuple[str, ...] = (),
    scratch_quota: int | None = None,
    seen: View | None = None,
) -> tuple[list[str], dict[str, str]]:
    """(argv, env) that run `argv` in the sandbox, or unchanged where it is unavailable.

    `scratch` is the process's only private writable folder (its home too where no sandbox
    masks the real one: inside one, the home is the real home's path, empty);
    `writable` are shared folders it may write (Triton's cache, shown where Triton looks by
    default, `~/.triton/cache`: a kernel cannot tell the judge's cache by its name); for each of
    `workspace_files` (a task's kernel file) what `workspace_private` finds is hidden. With
    `scratch_quota` (bytes) the scratch folder is a tmpfs of that size inside the sandbox
    (for processes whose scratch the engine never reads back); `seen` is the `view` of
    `workspace_files` where the caller has it already. The
    environment is passed explicitly (`--clearenv` + `--setenv`), so nothing of bwrap's own
    environment leaks in.
    """
    env = dict(env)
    home = os.path.join(scratch, "home")
    os.makedirs(home, exist_ok=True)
    env["HOME"] = home
    env["TMPDIR"] = scratch
    iso = probe()
    if not iso.available:
        return argv, env
    seen = seen if seen is not None else view(workspace_files)
    hidden = (list(seen.folders), list(seen.files))
    mounted: tuple[tuple[str, str], ...] = ()
    real_home = masked_home()
    if real_home is not None:
        env["HOME"] = str(real_home)
        cache = env.get("TRITON_CACHE_DIR")
        if cache in writable:
            writable = [w for w in writable if w != cache]
            mounted = ((cache, str(real_home / ".triton" / "cache")),)
            del env["TRITON_CACHE_DIR"]  # Triton's default: ~/.triton/cache
            env.pop("TRITON_HOME", None)
    wrapped = _bwrap_argv(
        iso.tool, scratch, writable, gpu, hidden, scratch_quota, workspace_files, mounted
    ) + ["--clearenv"]
    for key, value in sorted(env.items()):
        wrapped += ["--setenv", key, value]
    wrapped += ["--"]
    return wrapped + argv, _outer_env(env)


def normalise_returncode(returncode: int | None) -> int | None:
    """bwrap exits with 128+N when its child dies of signal N: report it as Popen would (-N)."""
    if returncode is not None and probe().available and 128 < returncode < 128 + 65:
        return -(returncode - 128)
    return returncode
