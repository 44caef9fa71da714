"""What the server knows about every analysed file: its kernel index and static findings.

One `FileState` per URI, whether the text came from an open editor buffer or from disk. Code
lenses, code actions and hover are answered from here, in memory, without re-parsing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from kernelbrain.engine.api.analysis import (
    FileIndex,
    Finding,
    check_module,
    parse_module,
    source_hash,
)


@dataclass(frozen=True)
class FileState:
    uri: str
    path: str
    version: int | None  # the editor's version when open; None when read from disk
    index: FileIndex
    findings: list[Finding]
    open: bool

    @property
    def has_kernels(self) -> bool:
        return bool(self.index.kernels)


class WorkspaceIndex:
    """Analysed files by URI: the single source of truth for every editor feature."""

    def __init__(self) -> None:
        self._files: dict[str, FileState] = {}

    def analyse(
        self, uri: str, path: str, source: str, version: int | None, open_: bool
    ) -> FileState:
        old = self._files.get(uri)
        if old is not None and old.index.source_hash == source_hash(source):
            state = FileState(uri, path, version, old.index, old.findings, open_)
        else:
            module = parse_module(source, path)
            state = FileState(uri, path, version, module.index, check_module(module), open_)
        self._files[uri] = state
        return state

    def get(self, uri: str) -> FileState | None:
        return self._files.get(uri)

    def drop(self, uri: str) -> FileState | None:
        return self._files.pop(uri, None)

    def __iter__(self) -> Iterator[FileState]:
        return iter(list(self._files.values()))

    def __len__(self) -> int:
        return len(self._files)
