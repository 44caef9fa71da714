"""Re-estimate GPU-measured variants with the CPU cost model (issue "Budget-aware search":
Spearman rho >= 0.7 between estimate and measurement), and fit the model's device constants.

    python bench/cost_model_fit.py SEARCH_JSON... [--ops col_sum,rmsnorm] [--workers 2]
        [--grid "memory_latency_us=0.8,1.6;host_sync_us=15,30"] [--out fit.json]
    python bench/cost_model_fit.py SEARCH_JSON... --retest    # run-to-run rho of the measurements
    python bench/cost_model_fit.py LADDER_VS_FULL_JSON... --ladder-vs-full [--ops ...]
    python bench/cost_model_fit.py SEARCH_JSON... --quick    # every quick-timed candidate
    python bench/cost_model_fit.py SEARCH_JSON... --quick --origin own-columns --case 0
        # one structure's candidates, ranked on one case (what a dispatch bucket is chosen by)

SEARCH_JSON is what `bench/gpu_search.py` wrote on the GPU machine: every verified variant with
its source and measured speedup. Each source is dry-run and AOT-compiled here (no GPU needed) once;
the model is then evaluated for the default `DeviceModel`, or for every point of `--grid`, ranked
by the mean rho over the examples. Also prints the model's absolute estimate of each first draft
next to its measured time. Fit on one run, check on another: the second run's variants were not
seen by the fit.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import pickle
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelbrain.engine.api.budget import Budget  # noqa: E402
from kernelbrain.engine.api.stats import geomean, spearman  # noqa: E402
from kernelbrain.engine.evaluate.pool import WorkerPool  # noqa: E402
from kernelbrain.engine.search.cost_model import CostModel, DeviceModel  # noqa: E402
from kernelbrain.engine.search.driver import Search  # noqa: E402
from kernelbrain.engine.search.node import Node  # noqa: E402
from kernelbrain.engine.store import Store  # noqa: E402
from kernelbrain.engine.task import find_task  # noqa: E402


def cpu_search(op: str, pool: WorkerPool, **kw) -> Search:
    """A search of one example on the CPU, over a private copy of the examples (its own store)."""
    ws = Path(tempfile.mkdtemp(prefix="kb-fit-")) / "ws"
    shutil.copytree(
        ROOT / "examples", ws, ignore=shutil.ignore_patterns(".kernelbrain", "__pycache__")
    )
    return Search(
        find_task(ws / "ops" / f"{op}.py", f"{op}_kernel"),
        device="cpu",
        store=Store(ws),
        pool=pool,
        **kw,
    )


def estimate(node: Node, dev: DeviceModel) -> list[float] | None:
    """A prepared variant's per-case estimate on `dev`, through the search's public estimator."""
    return CostModel(dev).estimate(node.spec, node.facts, node.source)


class Example:
    """One example's measured variants, dry-run and compiled once, estimable for any DeviceModel."""

    def __init__(self, op: str, entry: dict, pool: WorkerPool, workers: int, cache: dict):
        self.op = op
        self.baseline_us = entry.get("baseline_us") or []
        self.search = cpu_search(op, pool, budget=Budget(wall_s=3600), compile_workers=workers)
        self.variants = [v for v in entry["variants"] if v.get("source") and v.get("measured")]

        def prepare(i: int, source: str):
            key = (op, source)
            if key not in cache:  # dry runs and compiles do not depend on the model: reuse them
                cache[key] = self.search.prepare_variant(source, f"compile:{i % workers}")
            return cache[key]

        self.base = prepare(0, self.search.original)
        with ThreadPoolExecutor(workers) as ex:
            self.nodes = list(
                ex.map(lambda iv: prepare(iv[0], iv[1]["source"]), enumerate(self.variants))
            )

    def rows(self, dev: DeviceModel) -> list[dict]:
        base = estimate(self.base, dev)
        out = []
        for v, node in zip(self.variants, self.nodes):
            est = estimate(node, dev)
            if not est or not base or len(est) != len(base):
                continue
            per_case = [b / e if e > 0 else 0.0 for b, e in zip(base, est)]
            out.append(
                {
                    "id": v["id"],
                    "origin": v["origin"],
                    "measured": v["measured"],
                    "estimated": geomean(per_case) if all(per_case) else 0.0,
                    "per_case_measured": v["per_case"],
                    "per_case_est": per_case,
                }
            )
        return out

    def rho(self, dev: DeviceModel, case: int | None = None) -> float | None:
        """Over the geomeans, or over one case's speedups (`case`)."""
        rows = [r for r in self.rows(dev) if case is None or len(r["per_case_measured"]) > case]
        est = [r["estimated"] if case is None else r["per_case_est"][case] for r in rows]
        meas = [r["measured"] if case is None else r["per_case_measured"][case] for r in rows]
        return spearman(est, meas) if len(rows) >= 3 else None


def first_generation(op: str, pool: WorkerPool) -> dict[str, tuple[str, str]]:
    """id -> (origin, source) of the candidates a search proposes first from the original (seed 0).
    A ladder-vs-full record keeps only ids and speedups; at full fidelity its 12 candidates are
    the first 12 of these that pass the gate, so their sources can be proposed again here."""
    search = cpu_search(op, pool, budget=Budget(wall_s=60))
    root = Node("original", search.original, "original", "the original kernel", None)
    return {n.id: (n.origin, n.source) for n in search.propose([root])}


def ladder_vs_full_entries(run: Path, pool: WorkerPool) -> list[dict]:
    """The full-fidelity side of a run's ladder-vs-full records as search entries (every candidate
    measured precisely and through the final A/B's rivals), their sources proposed again."""
    entries = []
    for rec in (r["ladder_vs_full"] for r in json.loads(run.read_text()) if "ladder_vs_full" in r):
        proposed = first_generation(rec["op"], pool)
        variants = [
            {
                "id": vid,
                "origin": proposed[vid][0],
                "measured": sp,
                "per_case": [],
                "source": proposed[vid][1],
            }
            for vid, sp in rec["full_variants"].items()
            if vid in proposed
        ]
        entries.append({"op": rec["op"], "variants": variants})
        print(
            f"{run.name}: {rec['op']}: {len(variants)} of {len(rec['full_variants'])} full-fidelity variants "
            f"proposed again",
            flush=True,
        )
    return entries


def quick_entry(entry: dict) -> dict:
    """A search entry whose variants are every candidate it quick-timed on the GPU (a few
    repetitions each, speedups against the original's reference timing): more of them, and more
    varied, than the verified few."""
    variants = [
        {
            "id": q["id"],
            "origin": q["origin"],
            "measured": q["quick"],
            "per_case": q.get("per_case", []),
            "source": q["source"],
        }
        for q in entry.get("quick_candidates", [])
        if q.get("source")
    ]
    return entry | {"variants": variants}


def parse_grid(text: str) -> list[dict]:
    axes = [
        (k.strip(), [float(x) for x in v.split(",")])
        for k, v in (part.split("=") for part in text.split(";") if part.strip())
    ]
    return [
        dict(zip([a for a, _ in axes], combo))
        for combo in itertools.product(*[vs for _, vs in axes])
    ]


def retest(runs: list[Path], wanted: set[str]) -> None:
    """Rho between two runs' measurements of the variants both measured: how reproducible the
    measured order is, the most any model's rho can be trusted to mean. Needs no compiling."""
    measured: dict[tuple[str, str], dict[str, float]] = {}
    for run in runs:
        for e in json.loads(run.read_text()):
            if e.get("op") and e.get("variants") and (not wanted or e["op"] in wanted):
                measured[(run.stem, e["op"])] = {
                    v["id"]: v["measured"] for v in e["variants"] if v.get("measured")
                }
    for (ra, op), (rb, op_b) in itertools.combinations(measured, 2):
        common = sorted(set(measured[(ra, op)]) & set(measured[(rb, op_b)])) if op == op_b else []
        if len(common) >= 3:
            rho = spearman(
                [measured[(ra, op)][i] for i in common], [measured[(rb, op)][i] for i in common]
            )
            print(
                f"retest {op}: {ra} vs {rb}, {len(common)} variants measured in both: rho {rho:.2f}"
            )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--ops", default="")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--copy-gbps", type=float, default=4244.0, help="the run's measured copy ceiling"
    )
    ap.add_argument(
        "--bf16-tflops", type=float, default=678.0, help="the run's measured cuBLAS rate"
    )
    ap.add_argument("--grid", default="")
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--cache", type=Path, help="pickle of prepared variants, reused across runs of this script"
    )
    ap.add_argument(
        "--retest", action="store_true", help="only compare the runs' measurements with each other"
    )
    ap.add_argument(
        "--ladder-vs-full",
        action="store_true",
        help="the runs are ladder-vs-full records: use their full-fidelity variants",
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="use every candidate the search quick-timed (runs from 2026-11-30 W on keep their "
        "sources) instead of the verified variants",
    )
    ap.add_argument(
        "--origin", default="", help="only variants whose origin (rewrite chain) contains this"
    )
    ap.add_argument(
        "--case",
        type=int,
        help="rank on this case's speedups (0: the first) instead of the geomean",
    )
    args = ap.parse_args()
    cache = pickle.loads(args.cache.read_bytes()) if args.cache and args.cache.exists() else {}
    wanted = {o for o in args.ops.split(",") if o}
    if args.retest:
        retest(args.runs, wanted)
        return 0
    dev = DeviceModel(bandwidth_gbps=args.copy_gbps, bf16_tflops=args.bf16_tflops)
    with WorkerPool() as pool:
        entries = [
            e
            for run in args.runs
            for e in (
                ladder_vs_full_entries(run, pool)
                if args.ladder_vs_full
                else json.loads(run.read_text())
            )
        ]
        if args.quick:
            entries = [quick_entry(e) for e in entries]
        entries = [
            e
            | {"variants": [v for v in e.get("variants", []) if args.origin in v.get("origin", "")]}
            for e in entries
        ]
        examples = [
            Example(e["op"], e, pool, args.workers, cache)
            for e in entries
            if e.get("op") and e.get("variants") and (not wanted or e["op"] in wanted)
        ]
        if (
            args.cache
        ):  # before any estimate: the compiles are the slow part, and survive a model error
            args.cache.write_bytes(pickle.dumps(cache))
        report = []
        for ex in examples:
            rows = ex.rows(dev)
            rho = ex.rho(dev, args.case)
            report.append({"op": ex.op, "rho": rho, "n": len(rows), "rows": rows})
            base = estimate(ex.base, dev) or []
            print(
                f"== {ex.op}: rho {rho if rho is None else round(rho, 2)} (n={len(rows)}); first draft estimated / "
                f"measured us: "
                + ", ".join(f"{e:.0f}/{m:.0f}" for e, m in zip(base, ex.baseline_us)),
                flush=True,
            )
            for r in sorted(rows, key=lambda x: -x["measured"]):
                print(
                    f"   {r['origin'][:40]:40s} measured {r['measured']:.3f} estimated {r['estimated']:.3f}  "
                    + " ".join(
                        f"{m:.2f}/{e:.2f}"
                        for m, e in zip(r["per_case_measured"], r["per_case_est"])
                    )
                )
        if args.grid:
            scored = []
            for point in parse_grid(args.grid):
                d = dataclasses.replace(dev, **point)
                rhos = [ex.rho(d, args.case) for ex in examples]
                rhos = [r for r in rhos if r is not None]
                scored.append((sum(rhos) / len(rhos), min(rhos), point, rhos))
            scored.sort(key=lambda x: (-x[0], -x[1]))
            for mean, worst, point, rhos in scored[:10]:
                print(
                    f"grid {point}: mean rho {mean:.2f}, worst {worst:.2f}: "
                    + " ".join(f"{r:.2f}" for r in rhos)
                )
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
