"""What the workspace's store holds for the editor: a file's kernels' latest finished searches,
their KB3xx findings, and their share of the latest profile.

The store is the engine's: the language server asks the agent for these records instead of
opening the database itself, so one process owns the schema and a corrupt database is handled in
one place (`Store` moves it aside with a notice).
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from ..api.results import SearchResult
from ..profile.measured import compiler_findings, measured_findings, places_from_result
from ..store import Store
from ..task.discover import harness_config
from ..task.layout import results_database, store_root
from . import protocol as p


def measured(result: SearchResult | None) -> list[p.MeasuredFinding]:
    """The KB3xx findings of a measured search (none for estimates): the roofline's, and where
    torch.compile of the reference beats the kernel (KB304)."""
    if result is None or not result.measured:
        return []
    found = measured_findings(places_from_result(result)) + compiler_findings(result)
    return [p.MeasuredFinding(*f) for f in found]


def _latest_result(store: Store, path: str, kernel: str) -> SearchResult | None:
    record = store.latest_result(path, kernel)
    if record is None or not record["result"]:
        return None
    try:
        return msgspec.convert(record["result"], SearchResult)
    except msgspec.ValidationError:
        return None


def stored_records(request: p.StoredRequest) -> p.StoredResults:
    """One record per kernel asked for; a kernel the store knows nothing of gets an empty one."""
    path = Path(request.file)
    records = {k: p.KernelRecord(k) for k in request.kernels}
    for kernel, record in records.items():
        config = harness_config(str(path), kernel)
        if config is None or not results_database(config.parent).exists():
            continue
        store = Store(config.parent)
        try:
            record.result = _latest_result(store, str(path.resolve()), kernel)
        finally:
            store.close()
        record.measured = measured(record.result)
    root = store_root(path)
    if results_database(root).exists():
        store = Store(root)
        try:
            for kernel, record in records.items():
                row = store.kernel_profile(os.path.realpath(path), kernel)
                if row is not None:
                    record.profile_share = float(row["share"])
                    record.profile_script = str(row["script"])
        finally:
            store.close()
    return p.StoredResults(list(records.values()))
