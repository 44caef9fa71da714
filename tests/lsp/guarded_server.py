"""Run `kernelbrain serve` with torch and triton made unimportable, recording any attempt.

Used by the end-to-end tests: if the language server ever imported either, the feature that
did would fail and the attempt would be written to the record file named by argv[1].
"""

import importlib.abc
import os
import sys

RECORD = sys.argv[1]
FORBIDDEN = ("torch", "triton")


class _Forbid(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in FORBIDDEN:
            with open(RECORD, "a", encoding="utf-8") as f:
                f.write(name + "\n")
            raise ImportError(f"the language server must not import {name}")
        return None


sys.meta_path.insert(0, _Forbid())

if os.environ.get("KB_SERVER_STDERR"):  # the server's log, for tests that read it
    log = open(os.environ["KB_SERVER_STDERR"], "a", encoding="utf-8")
    os.dup2(log.fileno(), 2)

from kernelbrain.server.app import serve  # noqa: E402

serve()
