"""Turn a raw GPU search record (what `bench/gpu_search.py` writes under $OUT) into the small
result file that BENCHMARKS.md's tables are generated from: `bench/results/search-RUN-OP.json`.

    python bench/record_result.py RECORD.json --run BG --date 2026-12-02 --env env.txt \
        --command "bench/gpu_run.sh search (KB_SEARCH_ARGS=--ops softmax --budget 300)"

Raw records (sources of every candidate, trajectories) stay out of git.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


CASE_FIELDS = (
    "label",
    "baseline_us",
    "best_us",
    "alone_us",
    "original_alone_us",
    "frac_copy",
    "frac_cublas",
    "eager_us",
    "compile_us",
    "vs_compile",
    "max_autotune_us",
    "vs_max_autotune",
)


def summarize(
    record: dict, run: str, date: str, env: list[str], command: str, kind: str = "search"
) -> dict:
    spent = record.get("spent", {})
    return {
        "kind": kind,
        "run": run,
        "date": date,
        "op": record["op"],
        "gpu": env[0] if env else None,
        "versions": env[1] if len(env) > 1 else None,
        "command": command,
        "best_origin": record.get("best_origin"),
        "best_speedup": record.get("best_speedup"),
        "time_to_best_s": record.get("time_to_best_s"),
        "wall_s": spent.get("wall_s"),
        "budget_s": record.get("budget_s"),
        "stopped": record.get("stopped"),
        "candidates": spent.get("candidates"),
        "spearman_verified": record.get("spearman"),
        "spearman_quick": record.get("quick_spearman"),
        "cases": [
            {k: c.get(k) for k in CASE_FIELDS if k in c or kind == "search"}
            for c in record.get("cases", [])
        ],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("record", type=Path)
    ap.add_argument("--run", required=True)
    ap.add_argument("--date", required=True)
    ap.add_argument(
        "--env", type=Path, help="the env.txt of the device call (GPU line, versions line)"
    )
    ap.add_argument("--command", default="")
    ap.add_argument("--budget-s", type=float)
    ap.add_argument(
        "--kind",
        default="search",
        choices=("search", "corpus"),
        help="corpus: kernels of tests/corpus (bench/gpu_search.py --corpus)",
    )
    args = ap.parse_args()
    env = args.env.read_text().splitlines() if args.env else []
    for record in json.loads(args.record.read_text()):
        if "ladder_vs_full" in record:
            lf = record["ladder_vs_full"]
            out = {
                "kind": "ladder",
                "run": args.run,
                "date": args.date,
                "op": lf["op"],
                "gpu": env[0] if env else None,
                "versions": env[1] if len(env) > 1 else None,
                "command": args.command,
                **{
                    k: lf.get(k)
                    for k in (
                        "ladder_gpu_s",
                        "full_gpu_s",
                        "ladder_gpu_s_to_best",
                        "full_gpu_s_to_best",
                        "ladder_best",
                        "full_best",
                        "same_best",
                    )
                },
            }
            path = RESULTS / f"ladder-{args.run}-{lf['op']}.json"
            path.write_text(json.dumps(out, indent=1) + "\n")
            print(path)
            continue
        if "op" not in record or "cases" not in record:
            continue  # a search that raised keeps its traceback in the raw record only
        record.setdefault("budget_s", args.budget_s)
        out = summarize(record, args.run, args.date, env, args.command, args.kind)
        path = RESULTS / f"{args.kind}-{args.run}-{record['op']}.json"
        path.write_text(json.dumps(out, indent=1) + "\n")
        print(path)


if __name__ == "__main__":
    main()
