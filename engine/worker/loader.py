"""Importing user and candidate modules inside a worker."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from typing import Callable


class ModuleLoader:
    """Loads user and candidate modules in private namespaces.

    Candidates are written to a private folder first: Triton reads a kernel's source with
    `inspect`, which needs a file. Modules are cached by content hash.
    """

    def __init__(
        self, on_disk_only: bool = False, before_candidate: Callable[[], None] | None = None
    ) -> None:
        given = os.environ.get("KERNELBRAIN_WORKDIR")
        self.folder = Path(given) if given else Path(tempfile.mkdtemp(prefix="kb-worker-"))
        self._cache: dict[str, object] = {}
        self.on_disk_only = on_disk_only  # the judge: only files as they are on disk
        # Runs right before a source that is not the file on disk (a candidate) is imported: the
        # runner's tamper watch records the process as the original left it.
        self.before_candidate = before_candidate
        self.roots: set[Path] = set()  # the workspace's import roots, as the tasks named them
        # Where installed code and candidates live: never the workspace's, even inside it.
        self._installed = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, self.folder)}
        self._is_workspace: dict[str, bool] = {}  # by module file, while the roots stay the same

    def load(self, source: str, filename: str, roots: list[str]):
        if self.on_disk_only:
            path = Path(filename)
            if not path.is_file() or path.read_text(encoding="utf-8") != source:
                raise ImportError(
                    f"the judge imports files as they are on disk only, not a variant of {filename}"
                )
        key = hashlib.sha256((filename + "\0" + source).encode()).hexdigest()[:16]
        if key in self._cache:
            return self._cache[key]
        package, package_root = package_of(Path(filename))
        for root in [*roots, str(package_root or "")]:
            if root and Path(root).resolve() not in self.roots:
                self.roots.add(Path(root).resolve())
                self._is_workspace.clear()
            if root and root not in sys.path:
                sys.path.insert(0, root)
        # A module of a package loads as part of it, so its relative imports resolve.
        name = f"{package + '.' if package else ''}kb_{Path(filename).stem}_{key}"
        path = Path(filename)
        if not path.is_file() or path.read_text(encoding="utf-8") != source:
            path = self.folder / f"{name}.py"
            path.write_text(source, encoding="utf-8")
            if self.before_candidate is not None:
                self.before_candidate()
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        self._cache[key] = module
        return module

    def is_workspace(self, module: object) -> bool:
        """Whether `module` is the workspace's (the original, its reference, their helpers): a
        file under one of the task's import roots, not a candidate written to the private folder.
        Asked of every module at every check of the tamper watch: answers are kept per file."""
        file = vars(module).get("__file__")  # not getattr: a lazy module's __getattr__ imports
        if not isinstance(file, str):
            return False
        known = self._is_workspace.get(file)
        if known is None:
            path = Path(file).resolve()
            # a virtual environment inside the workspace is not the workspace's code
            known = not any(path.is_relative_to(p) for p in self._installed) and any(
                path.is_relative_to(root) for root in self.roots
            )
            self._is_workspace[file] = known
        return known


def package_of(path: Path) -> tuple[str | None, Path | None]:
    """The dotted package a module file belongs to (folders up with an `__init__.py`) and the
    folder its top package sits in; (None, None) for a module outside any package."""
    parts: list[str] = []
    folder = path.resolve().parent
    while (folder / "__init__.py").is_file() and folder.name.isidentifier():
        parts.append(folder.name)
        folder = folder.parent
    return (".".join(reversed(parts)), folder) if parts else (None, None)
