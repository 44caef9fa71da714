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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TILING = re.compile(r"(\d+)x(\d+) w(\d+) s(\d+)$")

KERNEL = '''@triton.jit
def col_sum_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_row, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_m = 0
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows[:, None] * stride_row + cols[None, :], mask=mask, other=0.0)
    acc = x.to(tl.float32)
    for pid_m in {loop}:
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        x = tl.load(x_ptr + rows[:, None] * stride_row + cols[None, :], mask=mask, other=0.0)
        acc += x.to(tl.float32)
    partial = tl.sum(acc, axis=0)
    tl.store(out_ptr + cols, partial, mask=cols < n_cols)


def col_sum(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.empty(n_cols, dtype=torch.float32, device=x.device)
    grid = (triton.cdiv(n_cols, {bn}), 1)
    col_sum_kernel[grid](x, out, n_rows, n_cols, x.stride(0), BLOCK_M={bm}, BLOCK_N={bn}, num_warps={warps})
    return out


'''


def strip_source(bm: int, bn: int, warps: int, stages: int) -> str:
    """The col_sum example with its kernel and launcher replaced by one column strip per program."""
    example = (ROOT / "examples" / "ops" / "col_sum.py").read_text()
    first_draft = example[example.index("@triton.jit"):example.index("def col_sum_ref")]
    loop = (f"tl.range(1, tl.cdiv(n_rows, BLOCK_M), num_stages={stages})" if stages > 1
            else "range(1, tl.cdiv(n_rows, BLOCK_M))")
    return example.replace(first_draft, KERNEL.format(loop=loop, bm=bm, bn=bn, warps=warps))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("probe", type=Path, help="a bench/structure_probe.py record")
    ap.add_argument("--op", default="col_sum", help="the record's op whose rows to take")
    ap.add_argument("--names", default="^own columns", help="rows whose name matches this regex (and ends in a tiling)")
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
        variants.append({"id": name, "origin": f"own-columns {name}", "measured": speedup, "per_case": [speedup],
                         "source": strip_source(bm, bn, warps, stages)})
    args.out.write_text(json.dumps([{"op": "col_sum", "baseline_us": [base_ms * 1e3], "variants": variants}]))
    print(f"{len(variants)} tilings -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
