"""GPU figures for the search, for BENCHMARKS.md.

    python bench/gpu_search.py --out DIR [--budget 60] [--ops gelu,softmax,...] [--ladder-vs-full softmax]
    python bench/gpu_search.py --out DIR --corpus [KERNEL,...] --budget 120 \
        --compile-modes default,max-autotune-no-cudagraphs

For each example (or each kernel of the corpus in tests/corpus, by its harness): `optimize` on the
GPU with the offline mutators; the best variant's per-case time, achieved bandwidth (or TFLOP/s)
against the measured ceilings, time-to-best, the original and the best timed alone, and
torch.compile of the reference on the same cases in each mode asked for (cuBLAS for the
matmul), all timed by one method (`timing.measure`); the Spearman
rank correlation between the CPU cost model's estimates and the measured speedups of the
variants. With --ladder-vs-full, the same candidates are searched once with the ladder and once
at full fidelity, and the GPU time of both is compared.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelbrain.engine.api.budget import Budget  # noqa: E402
from kernelbrain.engine.api.stats import spearman  # noqa: E402
from kernelbrain.engine.evaluate.ceilings import CeilingCache  # noqa: E402
from kernelbrain.engine.evaluate.pool import WorkerPool  # noqa: E402
from kernelbrain.engine.profile.roofs import bandwidth_roof  # noqa: E402
from kernelbrain.engine.search.driver import Search  # noqa: E402
from kernelbrain.engine.service import device_model  # noqa: E402
from kernelbrain.engine.store import Store  # noqa: E402
from kernelbrain.engine.task import find_task  # noqa: E402

OPS = ["gelu", "softmax", "rmsnorm", "col_sum", "cross_entropy", "matmul"]
CORPUS = ROOT / "tests" / "corpus"


def workspace(source: Path = ROOT / "examples") -> Path:
    ws = Path(tempfile.mkdtemp(prefix="kb-gpu-")) / "ws"
    shutil.copytree(source, ws, ignore=shutil.ignore_patterns(".kernelbrain", "__pycache__"))
    return ws


def _load(path: Path, name: str, root: str | None):
    import importlib.util

    if root and root not in sys.path:
        sys.path.insert(0, root)  # the harness's folder: helpers the kernel imports live there
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _module_and_cases(path: Path, task):
    """The task's module (or a variant of it) loaded from `path`, and the task's benchmark cases
    (from its inputs function, wherever that lives), drawn with the seed the search's harness
    uses."""
    import torch

    mod = _load(path, f"{path.stem}_{abs(hash(str(path)))}", task.root)
    where, _, name = task.inputs.rpartition(":")
    inputs_mod = (
        mod
        if not where or Path(where) == Path(task.file)
        else _load(Path(where), "inputs", task.root)
    )
    torch.manual_seed(0)
    return mod, getattr(inputs_mod, name)("cuda")


def torch_baselines(task, modes: list[str], rep_ms: float = 200.0) -> dict:
    """PyTorch eager and torch.compile (each mode in `modes`) of the reference, and cuBLAS for a
    matmul, on the same cases. A harness whose reference computes in a wider precision than the
    kernel (fp32 for a bf16 attention) may define `<entry>_torch`, the same computation as
    PyTorch would run it in the kernel's precision: that is timed instead (`baseline_fn`)."""
    import torch

    mod, cases = _module_and_cases(Path(task.file), task)
    ref_mod = (
        mod
        if Path(task.reference_module) == Path(task.file)
        else _load(Path(task.reference_module), "reference", task.root)
    )
    name = f"{task.entry}_torch" if hasattr(ref_mod, f"{task.entry}_torch") else task.reference
    ref = getattr(ref_mod, name)
    out = {
        "baseline_fn": name,
        "eager_us": [median_us(lambda: ref(*args), rep_ms) for args in cases],
    }
    for mode in modes:
        torch._dynamo.reset()
        compiled = torch.compile(ref) if mode == "default" else torch.compile(ref, mode=mode)
        key = "compile_us" if mode == "default" else f"compile_{mode}_us"
        out[key] = [median_us(lambda: compiled(*args), rep_ms) for args in cases]
    if "matmul" in task.kernel:
        out["cublas_us"] = [median_us(lambda: a @ b, rep_ms) for a, b, *_ in cases]
    del cases
    torch.cuda.empty_cache()
    return out


def median_us(fn, rep_ms: float = 200.0) -> float:
    from kernelbrain.engine.worker.timing import measure

    (t,), _ = measure([fn], rep_ms, captures=1)
    return sorted(t[0])[len(t[0]) // 2] * 1000


def time_alone(task, source: str, rep_ms: float = 200.0) -> list[float]:
    """The best variant timed on its own, per case, as `torch_baselines` times torch.compile and
    cuBLAS and as the ceilings are timed (`timing.measure` of one function: CUDA graphs under
    0.1 ms). The search's own figure for it comes from its final A/B, which runs eagerly whenever
    the original syncs with the host (cross_entropy's `.item()` checks), and an eager timing
    carries launch and stream work a graph replay does not: H200, cross_entropy's best kernel
    with its side-stream check, 74.0-74.2 us eagerly beside the first draft against 73.1-73.5 us
    alone (bench/structure_probe.py --timer ab / engine, run AC). So the roofline position and
    the ratio to torch.compile are taken from this timing; the A/B's stays in `best_us`."""
    import torch

    # Beside the original, so that what it imports from its own folder is found.
    path = Path(task.file).with_name(f"_kb_alone_{abs(hash(source))}.py")
    path.write_text(source)
    mod, cases = _module_and_cases(path, task)
    fn = getattr(mod, task.entry)
    out = [median_us(lambda: fn(*args), rep_ms) for args in cases]
    del cases
    torch.cuda.empty_cache()
    return out


def summarize(
    op: str,
    result,
    ceilings,
    torch_times: dict,
    quick: list[dict],
    alone_us: list[float],
    original_alone_us: list[float] | None = None,
) -> dict:
    best = next((v for v in result.variants if v.id == result.best), None)
    row = {
        "op": op,
        "best": result.best,
        "time_to_best_s": result.time_to_best_s,
        "stopped": result.stopped,
        "spent": msgspec.to_builtins(result.budget.spent),
        "candidates": msgspec.to_builtins(result.candidates),
        "baseline_us": [b.time_us for b in result.baseline],
        "torch": torch_times,
        "cases": [],
        "budget_s": result.budget.limits.wall_s,
        "rung_seconds": result.rung_seconds,
        "stage_seconds": result.stage_seconds,
        "notes": result.notes,
        "trajectory": [[round(p.t, 1), p.origin, p.outcome, p.speedup] for p in result.trajectory],
    }
    for i, base in enumerate(result.baseline):
        us = best.per_case[i].value_us if best and i < len(best.per_case) else base.time_us
        nbytes = result.case_bytes[i] if i < len(result.case_bytes) else 0
        flops = result.case_flops[i] if i < len(result.case_flops) else None
        alone = alone_us[i] if i < len(alone_us) else us
        written = result.case_written_bytes[i] if i < len(result.case_written_bytes) else None
        roof = bandwidth_roof(nbytes, written, ceilings.copy_gbps, ceilings.read_gbps)
        case = {
            "label": base.label,
            "baseline_us": base.time_us,
            "best_us": us,
            "alone_us": alone,
            "gbps": nbytes / alone / 1e3,
            "frac_copy": nbytes / alone / 1e3 / ceilings.copy_gbps,
            "ab_frac_copy": nbytes / us / 1e3 / ceilings.copy_gbps,
            "written_bytes": written,
            "roof": roof.name,
            "frac_roof": nbytes / alone / 1e3 / roof.gbps,
            "compile_us": torch_times["compile_us"][i],
            "vs_compile": torch_times["compile_us"][i] / alone,
            "eager_us": torch_times["eager_us"][i],
        }
        mat = torch_times.get("compile_max-autotune-no-cudagraphs_us")
        if mat:
            case["max_autotune_us"] = mat[i]
            case["vs_max_autotune"] = mat[i] / alone
        if original_alone_us:
            case["original_alone_us"] = original_alone_us[i]
            case["vs_original_alone"] = original_alone_us[i] / alone
        if flops:
            case["tflops"] = flops / alone / 1e6
            case["frac_cublas"] = (
                torch_times["cublas_us"][i] / alone if "cublas_us" in torch_times else None
            )
            case["ab_frac_cublas"] = (
                torch_times["cublas_us"][i] / us if "cublas_us" in torch_times else None
            )
        row["cases"].append(case)
    pairs = [
        (v.estimated_speedup, v.speedup)
        for v in result.variants
        if v.measured and v.estimated_speedup
    ]
    row["variants"] = [
        {
            "id": v.id,
            "origin": v.origin,
            "measured": v.speedup,
            "estimated": v.estimated_speedup,
            "per_case": [c.speedup for c in v.per_case],
            # the source, so the cost model can be re-estimated against these measurements offline
            "source": v.source,
        }
        for v in result.variants
    ]
    row["spearman"] = (
        spearman([p[0] for p in pairs], [p[1] for p in pairs]) if len(pairs) >= 3 else None
    )
    row["n_rank_pairs"] = len(pairs)
    row["quick_candidates"] = quick
    row["quick_spearman"] = (
        spearman([q["estimated"] for q in quick], [q["quick"] for q in quick])
        if len(quick) >= 3
        else None
    )
    # whether the search lowered the reference (torch.compile's time on its cases), and how
    # many verified variants started from the compiler's kernels
    row["lowering"] = any(b.compile_us for b in result.baseline)
    row["lowered_variants"] = sum(1 for v in result.variants if "lowering" in v.origin)
    if best:
        row["best_origin"], row["best_speedup"], row["best_diff"] = (
            best.origin,
            best.speedup,
            best.diff,
        )
    return row


UNVERIFIED = ("ranked-out", "below-lead")  # pruned or kept as stepping stones: not rejections


def search(target, budget_s: float, pool, dev, **kw):
    """`target`: an example's name, or (workspace source, file, kernel) of another task."""
    source, file, kernel = (
        target
        if isinstance(target, tuple)
        else (ROOT / "examples", f"ops/{target}.py", f"{target}_kernel")
    )
    ws = workspace(source)
    task = find_task(ws / file, kernel)
    s = Search(
        task,
        device="cuda:0",
        budget=Budget(wall_s=budget_s, max_candidates=kw.pop("max_candidates")),
        store=Store(ws),
        pool=pool,
        device_model=dev,
        ceilings=kw.pop("ceilings"),
        **kw,
    )
    result = s.run()
    # Why candidates were rejected, from the store: run N's six failed col_sum re-tilings had to be
    # reconstructed on the development machine, since its record kept only their outcome.
    result.notes.extend(
        f"rejected {cid} at {rung}: {o['reason']}: {(o['message'] or '')[:400]}"
        for cid, rungs in s.store.outcomes(s.key, s.device).items()
        for rung, o in rungs.items()
        if not o["passed"] and o["reason"] not in UNVERIFIED
    )
    # Every candidate timed on the GPU at the quick rung, next to its estimate: a wider and larger
    # sample of the cost model than the few verified survivors (run S's rmsnorm: seven variants
    # within 1.07-1.19x, where rank order is noise).
    # Per case too: a quick rung's geomean hid which case a softmax re-tiling lost on (run Z).
    quick = [
        {
            "id": n.id,
            "origin": n.origin,
            "estimated": est,
            "quick": n.quick,
            "per_case": [c.speedup for c in n.quick_timing.cases],
            "source": n.source,
        }
        for n in s.population.nodes.values()
        if n.parent is not None
        and n.quick is not None
        and (est := s.population.estimated_speedup(n))
    ]
    return result, quick, task


COMMON_RUNGS = (
    "baseline",
    "baseline-timing",
    "final",
)  # paid alike by the ladder and full fidelity


def candidates_gpu_s(result) -> float:
    """GPU seconds spent on the candidates themselves: the whole search's, less the rungs both
    modes pay alike (the original's verification and timing, the final A/B)."""
    return result.budget.spent.gpu_s - sum(result.rung_seconds.get(r, 0.0) for r in COMMON_RUNGS)


def targets(args) -> list[tuple[str, object]]:
    """(name, search target) for each example of --ops, or each corpus task of --corpus."""
    if args.corpus is None:
        return [(op, op) for op in args.ops.split(",") if op]
    import tomllib

    tasks = tomllib.loads((CORPUS / "kernelbrain.toml").read_text())["tasks"]
    wanted = None if args.corpus == "all" else set(args.corpus.split(","))
    return [
        (t["kernel"], (CORPUS, t["file"], t["kernel"]))
        for t in tasks
        if wanted is None or t["kernel"] in wanted
    ]


def measure(op: str, target, args, pool, ce, dev) -> dict:
    """One kernel: its search on the GPU, then the torch baselines and the best and the original
    timed alone, summarised (an error becomes the row's `error`); printed as it goes."""
    t0 = time.time()
    try:
        result, quick, task = search(
            target,
            args.budget,
            pool,
            dev,
            ceilings=ce,
            max_candidates=args.max_candidates,
            compile_workers=args.compile_workers,
        )
        modes = ["default"] + [m for m in args.compile_modes.split(",") if m != "default"]
        torch_times = torch_baselines(task, modes)
        best = next((v for v in result.variants if v.id == result.best), None)
        try:
            alone = time_alone(task, best.source) if best else []
            original_alone = time_alone(task, result.original)
        except Exception:  # the search's record matters more than this extra figure
            alone, original_alone = [], []
            result.notes.append("timing the best alone failed: " + traceback.format_exc()[-1500:])
        row = summarize(op, result, ce, torch_times, quick, alone, original_alone)
    except Exception:
        row = {"op": op, "error": traceback.format_exc()[-3000:]}
        print(row["error"], flush=True)
    row["measure_s"] = round(time.time() - t0, 1)  # search, baselines and timings
    if "cases" in row:
        print(
            f"== {op}: best {row.get('best_speedup', 1):.3f}x ({row.get('best_origin', '-')}) "
            f"time-to-best {row['time_to_best_s']}s, gpu {row['spent']['gpu_s']:.0f}s, "
            f"stopped {row['stopped']}, spearman {row['spearman']} (n={row['n_rank_pairs']}), quick-rung "
            f"spearman {row['quick_spearman']} (n={len(row['quick_candidates'])}) "
            f"[{time.time() - t0:.0f}s]",
            flush=True,
        )
        for c in row["cases"]:
            extra = (
                f" {c['tflops']:.0f} TFLOP/s, {c['frac_cublas']:.2f}x cuBLAS"
                if c.get("tflops") and c.get("frac_cublas")
                else ""
            )
            print(
                f"   {c['label']:42s} {c['baseline_us']:9.1f} -> {c['best_us']:9.1f} us (A/B), "
                f"{c['alone_us']:.1f} us alone: {c['gbps']:6.0f} GB/s = {c['frac_roof']:.1%} of {c['roof']} "
                f"(A/B {c['ab_frac_copy']:.1%}); torch.compile {c['compile_us']:.1f} us "
                f"({c['vs_compile']:.2f}x), max-autotune {c.get('max_autotune_us', 0):.1f} us "
                f"({c.get('vs_max_autotune', 0):.2f}x), original alone "
                f"{c.get('original_alone_us', 0):.1f} us{extra}",
                flush=True,
            )
    return row


def fresh_cache_pool(tag: str) -> WorkerPool:
    """Workers started from here on compile into a new, empty Triton cache."""
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"kb-triton-{tag}-")
    return WorkerPool()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument(
        "--corpus",
        nargs="?",
        const="all",
        default=None,
        help="search tests/corpus instead of the examples: every task, or these kernels",
    )
    ap.add_argument(
        "--compile-modes",
        default="default",
        help="torch.compile modes to time the reference in (comma-separated)",
    )
    ap.add_argument("--ladder-vs-full", default="")
    ap.add_argument("--full-candidates", type=int, default=16)
    ap.add_argument(
        "--max-candidates",
        type=int,
        default=None,
        help="cap on compiled candidates; none by default, as `kernelbrain optimize` (the budget ends it)",
    )
    ap.add_argument(
        "--compile-workers", type=int, default=None, help="AOT compile workers per search"
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    with WorkerPool() as pool:
        ce = CeilingCache().get_or_measure(pool, "cuda:0")
        dev = device_model(ce)
        print(
            f"ceilings: copy {ce.copy_gbps:.0f} GB/s, read {ce.read_gbps:.0f} GB/s, "
            f"bf16 {ce.bf16_tflops:.0f} TFLOP/s",
            flush=True,
        )
        for op, target in targets(args):
            rows.append(measure(op, target, args, pool, ce, dev))
            (args.out / "search.json").write_text(json.dumps(rows, indent=1))
        for op in [o for o in args.ladder_vs_full.split(",") if o]:
            # Each mode gets fresh workers over an empty Triton cache: otherwise the second search
            # would load the first one's cubins for every candidate they share.
            with fresh_cache_pool("ladder") as p:
                ladder, _, _ = search(
                    op,
                    600,
                    p,
                    dev,
                    ceilings=ce,
                    max_candidates=args.full_candidates,
                    compile_workers=args.compile_workers,
                )
            with fresh_cache_pool("full") as p:
                full, _, _ = search(
                    op,
                    600,
                    p,
                    dev,
                    ceilings=ce,
                    max_candidates=args.full_candidates,
                    exhaustive=True,
                    compile_workers=args.compile_workers,
                )
            rec = {
                "op": op,
                "ladder_gpu_s": ladder.budget.spent.gpu_s,
                "full_gpu_s": full.budget.spent.gpu_s,
                # what both modes pay alike (the original's harness and timing, the final A/B) left out
                "ladder_candidates_gpu_s": candidates_gpu_s(ladder),
                "full_candidates_gpu_s": candidates_gpu_s(full),
                "ladder_gpu_s_to_best": ladder.gpu_s_to_best,
                "full_gpu_s_to_best": full.gpu_s_to_best,
                "ladder_rung_seconds": ladder.rung_seconds,
                "full_rung_seconds": full.rung_seconds,
                "ladder_stage_seconds": ladder.stage_seconds,
                "full_stage_seconds": full.stage_seconds,
                "ladder_best": ladder.best,
                "full_best": full.best,
                "ladder_best_speedup": next(
                    (v.speedup for v in ladder.variants if v.id == ladder.best), None
                ),
                "full_best_speedup": next(
                    (v.speedup for v in full.variants if v.id == full.best), None
                ),
                "ladder_best_origin": next(
                    (v.origin for v in ladder.variants if v.id == ladder.best), None
                ),
                "full_best_origin": next(
                    (v.origin for v in full.variants if v.id == full.best), None
                ),
                # per mode, every verified variant: is the other mode's best among them, and where?
                "ladder_variants": {v.id: round(v.speedup, 4) for v in ladder.variants},
                "full_variants": {v.id: round(v.speedup, 4) for v in full.variants},
                "ladder_counts": msgspec.to_builtins(ladder.candidates),
                "full_counts": msgspec.to_builtins(full.candidates),
                # where the ladder left each candidate (full fidelity's best among them): rung and score
                "ladder_outcomes": {p.candidate: [p.outcome, p.speedup] for p in ladder.trajectory},
            }
            rows.append({"ladder_vs_full": rec})
            (args.out / "search.json").write_text(json.dumps(rows, indent=1))
            print(
                f"== ladder vs full on {op}: GPU {rec['ladder_gpu_s']:.0f}s vs {rec['full_gpu_s']:.0f}s "
                f"({1 - rec['ladder_gpu_s'] / max(rec['full_gpu_s'], 1e-9):.0%} less; candidates only "
                f"{rec['ladder_candidates_gpu_s']:.0f}s vs {rec['full_candidates_gpu_s']:.0f}s, "
                f"{1 - rec['ladder_candidates_gpu_s'] / max(rec['full_candidates_gpu_s'], 1e-9):.0%} less), until the best "
                f"{rec['ladder_gpu_s_to_best']}s vs {rec['full_gpu_s_to_best']}s; best {rec['ladder_best']} "
                f"{rec['ladder_best_speedup']} vs {rec['full_best']} {rec['full_best_speedup']}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
