"""Custom requests for clients: a variant's preview, and the status of every search job."""

from __future__ import annotations

import difflib
import os

import msgspec
from pygls.uris import to_fs_path

from kernelbrain.engine.api.diff import unified_diff

from ..shared import Session, job_json

VARIANT_REQUEST = "kernelbrain/variant"
JOBS_REQUEST = "kernelbrain/jobs"
RESULTS_REQUEST = "kernelbrain/results"
# Trajectory points a results view gets: a long search records thousands; a chart needs the
# shape, and the points where the best improved are always kept.
MAX_TRAJECTORY_POINTS = 400


def _get(params, name: str):
    if params is None:
        return None
    return params.get(name) if isinstance(params, dict) else getattr(params, name, None)


async def variant(ls: Session, params) -> dict:
    """{uri, kernel, id} -> the variant's full new text, its diff against the document now, and
    its explanation (for a preview before applying)."""
    uri, kernel, vid = _get(params, "uri"), _get(params, "kernel"), _get(params, "id")
    path, current, offer = await ls.results.find_offer(uri, kernel, vid)
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
        "searchDiff": v.diff or unified_diff(ls.results.get(path, kernel).original, v.source, path),
        "stale": offer.stale,
        "reason": offer.rebased.reason,
    }


async def results(ls: Session, params) -> dict:
    """{uri, kernel} -> the last search of that kernel, for a results view: the trajectory,
    candidate counts by rung and outcome, the baseline and every variant offered now (with
    its per-case figures, whether it is the one applied, and why it was withdrawn, if it was)."""
    uri, kernel = _get(params, "uri"), _get(params, "kernel")
    if not isinstance(uri, str) or not isinstance(kernel, str):
        raise ValueError("kernelbrain/results takes {uri: string, kernel: string}")
    path = to_fs_path(uri)
    await ls.results.ready(uri)
    result = ls.results.get(path, kernel) if path else None
    if result is None:
        return {"found": False, "reason": f"no search of `{kernel}` yet"}
    current = ls.current_text(uri) or ""
    offers = {o.variant.id: o for o in ls.results.offers(path, kernel, current)}
    applied = next((v for v in result.variants if v.source and v.source == current), None)
    return {
        "found": True,
        "kernel": result.kernel,
        "device": result.device,
        "measured": result.measured,
        "best": result.best,
        "stopped": result.stopped,
        "timeToBestS": result.time_to_best_s,
        "spent": msgspec.to_builtins(result.budget.spent),
        "limits": msgspec.to_builtins(result.budget.limits),
        "candidates": msgspec.to_builtins(result.candidates),
        "trajectory": [msgspec.to_builtins(t) for t in thin(result.trajectory)],
        "baseline": msgspec.to_builtins(result.baseline),
        "notes": result.notes,
        "variants": [
            {
                "id": v.id,
                "title": v.description,
                "origin": v.origin,
                "speedup": v.speedup,
                "measured": v.measured,
                "llm": v.llm,
                "offered": v.id in offers,
                "stale": offers[v.id].stale if v.id in offers else None,
                "applied": v is applied,
                "withdrawn": withdrawn(v, offers.get(v.id), applied),
                "explanation": v.explanation,
                "perCase": msgspec.to_builtins(v.per_case),
            }
            for v in result.variants
        ],
    }


def withdrawn(variant, offer, applied) -> str | None:
    """Why a variant is no longer offered, in one line (None while it is, or once applied)."""
    if variant is applied or offer is None or not offer.stale:
        return None
    if applied is not None:
        return (
            f"made from the kernel before `{applied.description}` was applied; "
            "run Optimize again to search from it"
        )
    return f"{offer.rebased.reason}; run Optimize again"


def jobs(ls: Session, params=None) -> dict:
    """Every search job this session started: queued, running, finished, cancelled or failed,
    from memory (the agent pushes every change; clients follow `kernelbrain/jobChanged`)."""
    return {"jobs": [job_json(j) for j in ls.jobs.jobs.values()]}


def register(server) -> None:
    server.feature(VARIANT_REQUEST)(variant)
    server.feature(RESULTS_REQUEST)(results)
    server.feature(JOBS_REQUEST)(jobs)


def thin(points: list, limit: int = MAX_TRAJECTORY_POINTS) -> list:
    """At most `limit` trajectory points (more only when the best improved more often than
    that), evenly spaced, keeping every point where the best improved: the chart's step line is
    drawn through them."""
    if len(points) <= limit:
        return list(points)
    keep = {i for i, t in enumerate(points) if i == 0 or t.best > points[i - 1].best}
    room = max(0, limit - len(keep))
    keep |= {round(k * (len(points) - 1) / max(1, room - 1)) for k in range(room)}
    return [points[i] for i in sorted(keep)]
