"""Custom requests for clients: a variant's preview, and the status of every search job."""

from __future__ import annotations

import difflib
import os

from kernelbrain.engine import agent_protocol as p
from kernelbrain.engine.api.diff import unified_diff

from ..engine_bridge import EngineUnavailable

VARIANT_REQUEST = "kernelbrain/variant"
JOBS_REQUEST = "kernelbrain/jobs"


def _get(params, name: str):
    if params is None:
        return None
    return params.get(name) if isinstance(params, dict) else getattr(params, name, None)


def register(server) -> None:
    @server.feature(VARIANT_REQUEST)
    def variant(ls, params) -> dict:
        """{uri, kernel, id} -> the variant's full new text, its diff against the document now, and
        its explanation (for a preview before applying)."""
        uri, kernel, vid = _get(params, "uri"), _get(params, "kernel"), _get(params, "id")
        path, current, offer = ls.find_offer(uri, kernel, vid)
        if not path or current is None:
            return {"found": False, "reason": "no such document"}
        if offer is None:
            return {"found": False, "reason": f"no variant {vid} for {kernel}"}
        v = offer.variant
        new_text = offer.rebased.text
        rel = os.path.basename(path)
        diff = (
            ""
            if new_text is None
            else "".join(
                difflib.unified_diff(
                    current.splitlines(keepends=True),
                    new_text.splitlines(keepends=True),
                    f"a/{rel}",
                    f"b/{rel}",
                )
            )
        )
        return {
            "found": True,
            "id": v.id,
            "kernel": kernel,
            "title": v.description,
            "origin": v.origin,
            "speedup": v.speedup,
            "measured": v.measured,
            "llm": v.llm,
            "verified": v.verified,
            "perCase": [
                {
                    "label": c.label,
                    "baselineUs": c.baseline_us,
                    "valueUs": c.value_us,
                    "speedup": c.speedup,
                    "verdict": c.verdict,
                }
                for c in v.per_case
            ],
            "explanation": v.explanation,
            "newText": new_text,
            "diff": diff,
            "searchDiff": v.diff
            or unified_diff(ls.results.get(path, kernel).original, v.source, path),
            "stale": offer.stale,
            "reason": offer.rebased.reason,
        }

    @server.feature(JOBS_REQUEST)
    async def jobs(ls, params=None) -> dict:
        """Every search job this session started: queued, running, finished, cancelled or failed."""
        infos = {j.info.id: j.info for j in ls.jobs.values()}
        if ls.jobs:
            try:
                listing = await ls.engine.request(p.JOB_LIST, p.JobList([]), p.JobList)
                for info in listing.jobs if listing else []:
                    if info.id in infos:
                        infos[info.id] = info
                        ls.jobs[info.id].info = info
            except EngineUnavailable:
                pass
        import msgspec

        return {
            "jobs": [msgspec.to_builtins(i) | {"uri": ls.jobs[i.id].uri} for i in infos.values()]
        }
