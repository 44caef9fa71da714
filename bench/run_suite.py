"""The GPU benchmark suite: every first draft searched under one budget and timed against
PyTorch eager and torch.compile, all in one process per GPU by one method.

    python bench/run_suite.py run --out DIR [--budget 90] [--shard I/N] [--kernels K1,K2]
    python bench/run_suite.py record DIR... --run RUN --date DATE --env env.txt --command "..."

The suite is three folders of first drafts with their harnesses: the bundled examples
(`examples/`), the corpus of kernels written as public projects write them (`tests/corpus/`)
and the suite's own drafts (`bench/suite/`). `run` searches each kernel (its shard of them:
`--shard 2/4` takes every fourth from the third on, for one GPU of four) with the offline
mutators and writes `search.json` under DIR (bench/gpu_search.py's record: sources and
trajectories, not for git). On the device, a queue per GPU (bench/gpu_run.sh):

    KB_QUEUE_0='python3 bench/run_suite.py run --out $OUT --shard 0/4' ... queue:0 ... wait:540

`record` turns the shards' records into small `bench/results/suite-RUN-KERNEL.json` files (per
case: times, ratios, fraction of the ceiling; per kernel: time to best, candidates, wall time
against budget), draws the plots into `bench/plots/`, and regenerates BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

FOLDERS = {"examples": ROOT / "examples", "corpus": ROOT / "tests" / "corpus",
           "suite": ROOT / "bench" / "suite"}  # fmt: skip
COMPILE_MODES = "default,max-autotune-no-cudagraphs"
PLOTS = ROOT / "bench" / "plots"
# A case whose best runs within 15% of an empty Triton launch (`launch_floor.py`) is bound by the
# launch's fixed cost: the table names that as the reason where it trails torch.compile.
LAUNCH_BOUND = 1.15
# A memory-bound case whose best moves 90% of its roof's bytes (the bar for large cases)
# has at most a tenth left to gain: the table names that where it trails torch.compile.
NEAR_ROOF = 0.9


def kernels() -> list[tuple[str, str, tuple[Path, str, str]]]:
    """(name, folder, search target) of every kernel of the suite, in a fixed order."""
    out = []
    for folder, path in FOLDERS.items():
        for t in tomllib.loads((path / "kernelbrain.toml").read_text())["tasks"]:
            name = t["kernel"] if folder != "corpus" else f"{Path(t['file']).stem}:{t['kernel']}"
            out.append((name, folder, (path, t["file"], t["kernel"])))
    return out


def shard(items: list, spec: str | None) -> list:
    if not spec:
        return items
    i, n = (int(x) for x in spec.split("/"))
    if not 0 <= i < n:
        raise SystemExit(f"--shard {spec}: want I/N with 0 <= I < N")
    return items[i::n]


def run(args) -> int:
    import gpu_search
    from launch_floor import launch_floor_us

    from kernelbrain.engine.evaluate.ceilings import CeilingCache
    from kernelbrain.engine.evaluate.pool import WorkerPool
    from kernelbrain.engine.service import device_model

    chosen = kernels()
    if args.kernels:  # these, in this order (a short device session runs the first ones)
        by_name = {k[0]: k for k in chosen}
        unknown = [n for n in args.kernels.split(",") if n not in by_name]
        if unknown:
            raise SystemExit(f"not in the suite: {', '.join(unknown)} (see `run_suite.py list`)")
        chosen = [by_name[n] for n in args.kernels.split(",")]
    chosen = shard(chosen, args.shard)
    args.out.mkdir(parents=True, exist_ok=True)
    opts = argparse.Namespace(
        budget=args.budget,
        compile_modes=COMPILE_MODES,
        max_candidates=None,
        compile_workers=args.compile_workers,
    )
    rows = []
    with WorkerPool() as pool:
        ce = CeilingCache().get_or_measure(pool, "cuda:0")
        dev = device_model(ce)
        floor = launch_floor_us(gpu_search.median_us)
        print(
            f"ceilings: copy {ce.copy_gbps:.0f} GB/s, read {ce.read_gbps:.0f} GB/s, "
            f"bf16 {ce.bf16_tflops:.0f} TFLOP/s; "
            f"an empty Triton launch {floor:.1f} us"
        )
        for name, folder, target in chosen:
            row = gpu_search.measure(name, target, opts, pool, ce, dev)
            row["folder"] = folder
            row["ceilings"] = {
                "copy_gbps": ce.copy_gbps,
                "read_gbps": ce.read_gbps,
                "bf16_tflops": ce.bf16_tflops,
            }
            row["launch_floor_us"] = floor
            rows.append(row)
            (args.out / "search.json").write_text(json.dumps(rows, indent=1))
    return 0


CASE_FIELDS = ("label", "baseline_us", "alone_us", "original_alone_us", "eager_us",
               "compile_us", "max_autotune_us", "frac_copy", "frac_cublas", "tflops",
               "written_bytes")  # fmt: skip


def torch_function(target: tuple[Path, str, str]) -> str | None:
    """`<entry>_torch` when the kernel's harness module defines one (gpu_search.torch_baselines
    times it instead of a reference that computes in a wider precision)."""
    folder, file, kernel = target
    tasks = tomllib.loads((folder / "kernelbrain.toml").read_text())["tasks"]
    entry = next(t["entry"] for t in tasks if t["file"] == file and t["kernel"] == kernel)
    text = (folder / file).read_text()
    return f"{entry}_torch" if f"def {entry}_torch(" in text else None


def case_row(
    c: dict, ceilings: dict, like_for_like: bool = True, launch_floor_us: float | None = None
) -> dict:
    """One case's figures. `like_for_like` false: the torch figures timed a reference that
    computes in a wider precision than the kernel, so no ratio to them is given. `why`: the
    measured reason a case trails the better torch.compile mode, where there is one (the
    launch: `LAUNCH_BOUND`)."""
    out = {k: c.get(k) for k in CASE_FIELDS}
    if not like_for_like:
        for k in ("eager_us", "compile_us", "max_autotune_us"):
            out[k] = None
    best = c.get("alone_us")
    compiled = [out[k] for k in ("compile_us", "max_autotune_us") if out.get(k)]
    if c.get("frac_cublas") and best:  # a matmul: cuBLAS is the best way PyTorch has
        compiled.append(c["frac_cublas"] * best)
    out["best_compile_us"] = min(compiled) if compiled else None
    for key, ref in (("x_draft", "original_alone_us"), ("x_eager", "eager_us"),
                     ("x_compile", "best_compile_us")):  # fmt: skip
        base = out.get(ref) if ref != "best_compile_us" else out["best_compile_us"]
        out[key] = base / best if base and best else None
    if c.get("frac_cublas") is not None:
        out["ceiling"], out["of_ceiling"] = "cuBLAS", c["frac_cublas"]
    else:  # the roof the case is nearer: bandwidth, or the bf16 matmul rate for dot kernels
        compute = (
            (c.get("tflops") or 0.0) / ceilings["bf16_tflops"]
            if ceilings.get("bf16_tflops")
            else 0.0
        )
        # the bandwidth roof: a read stream for a reduction (records from before it was measured
        # carry neither the roof nor the written bytes, and stay against the copy)
        roof = c.get("roof") or "copy"
        memory = c.get("frac_roof") if "frac_roof" in c else c.get("frac_copy")
        if not c.get("gbps"):  # no bytes: the dry run saw no launch (a launcher it cannot run)
            memory = None
        if compute > (memory or 0.0):
            out["ceiling"], out["of_ceiling"] = "bf16 peak", compute
        else:
            out["ceiling"], out["of_ceiling"] = roof, memory
    out["launch_floor_us"] = launch_floor_us
    out["why"] = trailing_reason(out)
    return out


def trailing_reason(case: dict) -> str | None:
    """What the table tags a case that trails the better torch.compile mode with, where a
    measurement bounds the gap: `launch`, its best runs within LAUNCH_BOUND of an empty Triton
    launch (the launch's fixed cost sets its time); `roof`, its best moves at least NEAR_ROOF of
    its measured bandwidth roof (copy or read stream), so little is left to gain (how small the
    gap is, not why it exists). From a case row's own figures, so older rows get it too."""
    best, floor = case.get("alone_us"), case.get("launch_floor_us")
    if (case.get("x_compile") or 1.0) >= 1.0 or not best:
        return None
    if floor and best <= LAUNCH_BOUND * floor:
        return "launch"
    if (
        case.get("ceiling") in ("copy", "read stream")
        and (case.get("of_ceiling") or 0) >= NEAR_ROOF
    ):
        return "roof"
    return None


def like_for_like(row: dict, torch_fn: str | None) -> bool:
    """Whether the row's torch figures timed what PyTorch runs in the kernel's precision."""
    return torch_fn is None or row.get("torch", {}).get("baseline_fn") == torch_fn


def full_verification(r: dict) -> dict:
    """What one full verification (the five harness stages on the benchmark cases) cost the
    search on average, and how many it ran: the dearest rung, which decides how many
    generations a budget holds."""
    n = (r.get("candidates") or {}).get("per_stage", {}).get("full") or 0
    spent = (r.get("rung_seconds") or {}).get("full")
    return {"full_verified": n, "full_s_per_candidate": spent / n if n and spent else None}


def record(args) -> int:
    raw = []
    for folder in args.dirs:
        for path in sorted(Path(folder).rglob("search.json")):
            raw.extend(json.loads(path.read_text()))
    env = args.env.read_text().splitlines() if args.env else []
    order = {name: i for i, (name, _, _) in enumerate(kernels())}
    fair = {name: torch_function(target) for name, _, target in kernels()}
    rows = []
    for r in sorted(raw, key=lambda r: order.get(r.get("op"), len(order))):
        if "cases" not in r:
            rows.append({"op": r.get("op"), "folder": r.get("folder"),
                         "error": (r.get("error") or "")[-600:]})  # fmt: skip
            continue
        spent = r.get("spent", {})
        rows.append(
            {
                "op": r["op"],
                "folder": r.get("folder"),
                "best_origin": r.get("best_origin"),
                "lowering": r.get("lowering"),  # absent: a run from before the lowering
                "lowered_variants": r.get("lowered_variants"),
                "time_to_best_s": r.get("time_to_best_s"),
                "wall_s": spent.get("wall_s"),
                "budget_s": r.get("budget_s"),
                "candidates": spent.get("candidates"),
                "stopped": r.get("stopped"),
                "rung_seconds": r.get("rung_seconds"),  # where the wall time went
                **full_verification(r),
                "cases": [
                    case_row(
                        c,
                        r.get("ceilings", {}),
                        like_for_like(r, fair.get(r["op"])),
                        r.get("launch_floor_us"),
                    )
                    for c in r["cases"]
                ],
            }
        )
    head = {
        "kind": "suite",
        "run": args.run,
        "date": args.date,
        "gpu": env[0] if env else None,
        "versions": env[1] if len(env) > 1 else None,
        "command": args.command,
    }
    for row in rows:  # one small file per kernel, as every result file (tests/test_benchmarks_doc)
        path = ROOT / "bench" / "results" / f"suite-{args.run}-{row['op'].replace(':', '-')}.json"
        path.write_text(json.dumps({**head, **row}, indent=1) + "\n")
        print(path)
    from render_benchmarks import latest_suite

    plot(latest_suite()[0])  # the table's rows, not only this run's
    subprocess.run([sys.executable, str(ROOT / "bench" / "render_benchmarks.py")], check=True)
    return 0


def plot(kernels: list[dict]) -> None:
    """Two PNGs over the suite table's rows: per case, the best against the better torch.compile
    mode, and the fraction of its ceiling; both linked from BENCHMARKS.md."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, vs, frac = [], [], []
    for k in kernels:
        for c in k.get("cases", []):
            labels.append(f"{k['op'].split(':')[-1]} {c['label'][:28]}")
            vs.append(c.get("x_compile") or 0.0)
            frac.append(c.get("of_ceiling") or 0.0)
    PLOTS.mkdir(parents=True, exist_ok=True)
    for name, values, line, title in (
        ("vs-compile", vs, 1.0, "best variant / better torch.compile mode (>1: faster)"),
        ("ceiling", frac, 0.9, "fraction of the case's ceiling (copy, cuBLAS or bf16 peak)"),
    ):
        fig, ax = plt.subplots(figsize=(9, max(4, 0.22 * len(labels))))
        ax.barh(range(len(labels)), values, color=["#3a7" if v >= line else "#c63" for v in values])
        ax.axvline(line, color="black", linewidth=0.8)
        ax.set_yticks(range(len(labels)), labels, fontsize=6)
        ax.invert_yaxis()
        gpus = sorted({k.get("gpu") or "?" for k in kernels})
        runs = sorted({(k["date"], k["run"]) for k in kernels})
        ax.set_title(f"{title}\n{'; '.join(gpus)}; runs {', '.join(r for _, r in runs)} "
                     f"({runs[0][0]} to {runs[-1][0]})", fontsize=9)  # fmt: skip
        fig.tight_layout()
        fig.savefig(PLOTS / f"suite-{name}.png", dpi=110)
        plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--budget", type=float, default=90.0)
    r.add_argument("--shard")
    r.add_argument("--kernels")
    r.add_argument("--compile-workers", type=int)
    c = sub.add_parser("record")
    c.add_argument("dirs", nargs="+")
    c.add_argument("--run", required=True)
    c.add_argument("--date", required=True)
    c.add_argument("--env", type=Path)
    c.add_argument("--command", default="")
    sub.add_parser("list")
    args = ap.parse_args()
    if args.cmd == "list":
        for name, folder, _ in kernels():
            print(f"{folder:9s} {name}")
        return 0
    return run(args) if args.cmd == "run" else record(args)


if __name__ == "__main__":
    sys.exit(main())
