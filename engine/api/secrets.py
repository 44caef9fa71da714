"""Secrets never reach user code, and text from user code never carries them out (no torch).

Two halves:
- `clean_environment` is the environment of every process that runs workspace or candidate
  code: no variable whose name says it holds a key, token or credential.
- `scrub` is applied to every string that comes back from such a process (answers, progress,
  stderr) before anything stores, logs or prints it: each configured secret value is replaced,
  text that looks like an API key is replaced, and the whole is truncated.

"Configured secrets" are the values of the engine's own secret-named variables
(`OPENAI_API_KEY`, `KERNELBRAIN_API_KEY`, …) plus any handed over at run time (`register`), e.g.
the key the editor stores.
"""

from __future__ import annotations

import logging
import os
import re
import threading

import msgspec

SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION)", re.I)
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
# Shapes of common API keys, for secrets nobody configured here (a key read from a file).
KEY_PATTERN = re.compile(
    r"\b(sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|AKIA[0-9A-Z]{16}|hf_[A-Za-z0-9]{20,})"
)
# Terminal control: CSI and OSC escape sequences, other escapes, and every C0/C1 control but
# newline and tab (a carriage return rewrites the line it is on). Text from user code printed
# with them could forge an "ACCEPTED" line, retitle the terminal or hide what came before.
CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.?|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)
MIN_SECRET_CHARS = 6  # shorter values ("1", "yes") would redact ordinary words
SECRET_VALUE_CHARS = 8  # a secret file's shorter lines ("DEBUG=1", "[default]") stay readable
SECRET_FILE_BYTES = 65536  # what is read of a secret file for its values
SOURCE_SUFFIXES = (".py", ".pyi", ".ipynb", ".md", ".rst", ".ts", ".js", ".c", ".cc", ".cpp", ".h")
MESSAGE_LIMIT = 4000  # characters of one message from user code that are kept
REDACTED = "[redacted]"

_registered: set[str] = set()
_files: set[str] = set()  # secret files whose values are secrets (`register_file`)
_read: dict[str, tuple[tuple, set[str]]] = {}  # path -> (what it was when read, its values)
_lock = threading.Lock()


def state_dir() -> str:
    """Where this user's KernelBrain keeps what no workspace may see (the key that seals stored
    verdicts, `engine/store/seal.py`): `KERNELBRAIN_STATE_DIR`, else
    `$XDG_DATA_HOME/kernelbrain`, else `~/.local/share/kernelbrain`. Hidden from the sandbox."""
    given = os.environ.get("KERNELBRAIN_STATE_DIR")
    if given:
        return given
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share"
    )
    return os.path.join(base, "kernelbrain")


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name)) or name.startswith(SECRET_PREFIXES)


def clean_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) without any secret-named variable."""
    source = os.environ if env is None else env
    return {k: v for k, v in source.items() if not is_secret_name(k)}


# What a process running workspace or candidate code may see of the environment: toolchains,
# devices, locales and the interpreter's own settings. A secret can hide under any name
# (`DATABASE_URL` with its password, `GH_PAT`, `MYSQL_PWD`, `SENTRY_DSN`), so the rest is left out.
WORKER_VARIABLES = ("PATH", "LD_LIBRARY_PATH", "LANG", "LANGUAGE", "TZ", "VIRTUAL_ENV", "CC", "CXX")
WORKER_PREFIXES = (
    "LC_",
    "PYTHON",
    "CUDA_",
    "NVIDIA_",
    "TRITON_",
    "TORCH",
    "PYTORCH_",
    "OMP_",
    "MKL_",
    "KMP_",
    "OPENBLAS_",
    "CONDA_",
    "KERNELBRAIN_",
)


def worker_environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default: this process's) reduced to what workspace code may see
    (`WORKER_VARIABLES`, `WORKER_PREFIXES`), secret-named variables among them left out too."""
    source = clean_environment(env)
    return {
        k: v for k, v in source.items() if k in WORKER_VARIABLES or k.startswith(WORKER_PREFIXES)
    }


def register(value: str | None) -> None:
    """Treat `value` as a secret from now on (a key handed over at run time)."""
    if value and len(value) >= MIN_SECRET_CHARS:
        with _lock:
            _registered.add(value)


def register_file(path: str) -> None:
    """Treat what the file at `path` holds as secrets, as it reads whenever a message is
    scrubbed (a workspace's dotenv file, hidden from the sandbox: if a candidate reads it anyway,
    say a copy renamed over it while the candidate runs, no message carries it)."""
    with _lock:
        _files.add(path)


def file_values(path: str) -> set[str]:
    """Each line's value in a secret file (after `=` in a dotenv line, else the line), read
    again only when the file changed (another inode, size or time: a rename over it included).
    Nothing of a source file (`secrets.py`, `test_credentials.py`: hidden by their names, but
    code: a scrub must leave `re.compile(` alone)."""
    if path.endswith(SOURCE_SUFFIXES):
        return set()
    try:
        st = os.stat(path)
    except OSError:
        return set()
    key = (st.st_ino, st.st_size, st.st_mtime_ns)
    cached = _read.get(path)
    if cached is not None and cached[0] == key:
        return cached[1]
    try:
        with open(path, "rb") as f:
            text = f.read(SECRET_FILE_BYTES).decode("utf-8", "replace")
    except OSError:
        return set()
    values = _values(text)
    _read[path] = (key, values)
    return values


def _values(text: str) -> set[str]:
    """The values of a secret file's lines (`file_values`)."""
    values = set()
    for line in text.splitlines():
        value = (line.split("=", 1)[1] if "=" in line else line).strip().strip("'\"")
        if len(value) >= SECRET_VALUE_CHARS:
            values.add(value)
    return values


def configured() -> list[str]:
    """Every configured secret value, longest first (so a key containing another goes whole)."""
    values = {v for k, v in os.environ.items() if is_secret_name(k) and len(v) >= MIN_SECRET_CHARS}
    with _lock:
        values |= _registered
        files = list(_files)
    for path in files:
        values |= file_values(path)
    return sorted(values, key=len, reverse=True)


def encodings(value: str) -> list[str]:
    """`value` as text smuggled out of a sandbox may spell it: itself, hex (either case) and
    base64 (standard and URL-safe, at each of the three byte alignments it can start at; the
    characters that depend on its neighbours left out)."""
    import base64
    import binascii

    raw = value.encode()
    out = [value, binascii.hexlify(raw).decode(), binascii.hexlify(raw).decode().upper()]
    for shift in range(3):
        for codec in (base64.b64encode, base64.urlsafe_b64encode):
            full = codec(b"\0" * shift + raw).decode().rstrip("=")
            core = full[
                (shift * 4 + 2) // 3 : len(full) - 2
            ]  # drop characters shared with neighbours
            if len(core) >= MIN_SECRET_CHARS:
                out.append(core)
    return out


def scrub(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """`text` without terminal control sequences, with every configured secret (in any encoding
    of `encodings`) and key-shaped token replaced, then truncated."""
    if not text:
        return text
    text = CONTROL.sub("", text)
    for value in configured():
        for form in encodings(value):
            if form in text:
                text = text.replace(form, REDACTED)
    text = KEY_PATTERN.sub(REDACTED, text)
    if len(text) > limit:
        text = text[:limit] + f"… ({len(text) - limit} more characters)"
    return text


def scrub_struct(value, limit: int = MESSAGE_LIMIT):
    """Scrub every string inside a msgspec message, in place (lists and nested structs too).
    A struct may keep longer text in some fields (`text_limits`, a class attribute: source code
    a worker sends back), scrubbed all the same."""
    if isinstance(value, str):
        return scrub(value, limit)
    if isinstance(value, msgspec.Struct):
        limits = getattr(type(value), "text_limits", {})
        for field in value.__struct_fields__:
            item = getattr(value, field)
            cleaned = scrub_struct(item, limits.get(field, MESSAGE_LIMIT))
            if cleaned is not item:
                try:
                    setattr(value, field, cleaned)
                except (AttributeError, TypeError):  # a frozen struct holds no text from user code
                    pass
        return value
    if isinstance(value, list):
        for i, item in enumerate(value):
            cleaned = scrub_struct(item)
            if cleaned is not item:
                value[i] = cleaned
        return value
    if isinstance(value, dict):
        return {scrub_struct(k): scrub_struct(v) for k, v in value.items()}
    return value


# JSON-RPC methods and options that carry a key: pygls logs whole messages at debug level, on
# receipt, before any handler could register the key as a secret.
SECRET_CARRIERS = ("kernelbrain/setApiKey", "kb/apiKey", "llmApiKey")


class ScrubFilter(logging.Filter):
    """Scrubs every configured secret from a log record, and drops the text of any record about
    a message that carries a key."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if any(carrier in text for carrier in SECRET_CARRIERS):
            record.msg, record.args = "[a message carrying a secret: not logged]", None
            return True
        clean = scrub(text, limit=max(len(text), MESSAGE_LIMIT))
        if clean != text:
            record.msg, record.args = clean, None
        return True


def scrub_logs() -> None:
    """Scrub secrets from everything this process logs: on the root logger's handlers (where
    every logger's records end up), once each."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, ScrubFilter) for f in handler.filters):
            handler.addFilter(ScrubFilter())
