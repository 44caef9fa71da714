"""A structure probe's column-strip timings as a search record `bench/cost_model_fit.py` can rank.

Why: the probe times many tilings of one structure on one shape (run AG: 135 column-strip
tilings of col_sum on 16384x4096), more and more varied than any search quick-times, which makes
it the sharpest out-of-sample check of a cost-model term. Each tiling named `... BMxBN wW sS` is
written as the source `own-columns` makes (the first row block peeled, the loop pipelined S deep;
run AS measured that form within 1-2% of the probe's own at every tiling), with the launch's
tiles and warps, and its speedup over the probe's first draft on the first case.

    python bench/probe_entries.py bench/runs/2026-11-30/AG-probe-col_sum-own-columns-deeper.json \\
        --names "^own columns" --out /tmp/ag.json
    python bench/cost_model_fit.py /tmp/ag.json --case 0 --copy-gbps 4281
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelbrain.engine.mutate import MutationContext, load_mutators  # noqa: E402
from kernelbrain.engine.mutate.config_space import apply_knobs, launch_knobs  # noqa: E402
from kernelbrain.engine.task import find_task  # noqa: E402

TILING = re.compile(r"(\d+)x(\d+) w(\d+) s(\d+)$")


def strip_source(bm: int, bn: int, warps: int, stages: int) -> str:
    """The col_sum example as the search writes one column strip per program: `own-columns`, then
    `launcher-cleanup`, then `config` with this tiling, warps and loop depth (the engine's own
    rewrites, so the source is what a search would time)."""
    task = find_task(ROOT / "examples" / "ops" / "col_sum.py", "col_sum_kernel")
    mutators = load_mutators()
    source = Path(task.file).read_text()
    for name in ("own-columns", "launcher-cleanup"):
        source = next(iter(mutators[name].propose(MutationContext(task, source)))).source
    ctx = MutationContext(task, source)
    (lv,) = ctx.entry_launches()
    knobs = {"BLOCK_M": bm, "BLOCK_N": bn, "num_warps": warps, "loop_stages": stages}
    written = apply_knobs(ctx, lv, launch_knobs(ctx, lv), knobs)
    assert written is not None, knobs
    return written


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("probe", type=Path, help="a bench/structure_probe.py record")
    ap.add_argument("--op", default="col_sum", help="the record's op whose rows to take")
    ap.add_argument(
        "--names",
        default="^own columns",
        help="rows whose name matches this regex (and ends in a tiling)",
    )
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    rows = {r["name"]: r for r in json.loads(args.probe.read_text())["ops"][args.op]}
    base_ms = rows["first-draft"]["ms"][0]
    variants = []
    for name, row in rows.items():
        tiling = TILING.search(name)
        if not (re.search(args.names, name) and tiling and row["ok"] and row["ms"]):
            continue
        bm, bn, warps, stages = map(int, tiling.groups())
        speedup = base_ms / row["ms"][0]
        variants.append(
            {
                "id": name,
                "origin": f"own-columns {name}",
                "measured": speedup,
                "per_case": [speedup],
                "source": strip_source(bm, bn, warps, stages),
            }
        )
    args.out.write_text(
        json.dumps([{"op": "col_sum", "baseline_us": [base_ms * 1e3], "variants": variants}])
    )
    print(f"{len(variants)} tilings -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
