"""Seals on what the store keeps as evidence: a row this machine wrote carries an HMAC of its
fields under a key that never leaves this machine's user, so a row written anywhere else (a
store shipped in a cloned repository, a row edited by hand or by a candidate) is not believed.

What a seal covers is a row's whole meaning (a candidate's source, an outcome's verdict and
details, a search's result); a row whose seal does not match is read as absent, and what it
claimed is verified again when a search gets there.

The key is `machine.key` in `KERNELBRAIN_STATE_DIR`, else `$XDG_DATA_HOME/kernelbrain`, else
`~/.local/share/kernelbrain`, created on first use (mode 0600). Where it cannot be written, a
key for this process alone is used: nothing stored is believed across runs then.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path

from ..api.secrets import state_dir

KEY_FILE = "machine.key"
KEY_BYTES = 32


def key_dir() -> Path:
    return Path(state_dir())


@functools.lru_cache(maxsize=4)
def _key_at(folder: str) -> bytes:
    path = Path(folder) / KEY_FILE
    try:
        data = path.read_bytes()
        if len(data) >= KEY_BYTES and not path.is_symlink():
            return data
    except OSError:
        pass
    key = secrets.token_bytes(KEY_BYTES)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key)
    except FileExistsError:  # another process made it first: theirs is the machine's
        return _key_at.__wrapped__(folder)
    except OSError:
        pass  # unwritable: this process's own key
    return key


def machine_key() -> bytes:
    return _key_at(str(key_dir()))


def seal(*fields) -> str:
    """The seal of a row with these fields (any JSON-able values, in a fixed order)."""
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    return hmac.new(machine_key(), text.encode(), hashlib.sha256).hexdigest()


def sealed(mark: str | None, *fields) -> bool:
    """Whether `mark` is this machine's seal of these fields."""
    return bool(mark) and hmac.compare_digest(str(mark), seal(*fields))
