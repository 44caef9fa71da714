"""How close Triton 3.6 comes to cuBLAS on a bf16 matmul on this GPU, by kernel structure.

Why: the suite's bf16 matmul search ends at 0.70-0.74x cuBLAS on the H200 from its naive draft,
against the issue's 0.95x. Before the search grows a new kind of rewrite, this measures what each
structure reaches with Triton's own best-known Hopper configurations, hand-written as Triton's
tutorials write them:
- `pointer`: pointer loads, programs in groups of GROUP_M row-blocks (tutorial 03);
- `tma`: the same with device-side tensor descriptors (`tl.make_tensor_descriptor`);
- `tma_persistent`: one program per SM walking the tiles (tutorial 09).
Every variant is checked against `torch.matmul` before it is timed; times are
`triton.testing.do_bench` medians, cuBLAS (`a @ b`) timed the same way in the same process.

Usage: python3 bench/matmul_probe.py --out probe.json --run RUN  (the file is a bench/results record)
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4000, 11008, 4096)]  # M, N, K
CONFIGS = [  # BLOCK_M, BLOCK_N, BLOCK_K, warps, stages
    (128, 256, 64, 8, 3),
    (128, 256, 64, 8, 4),
    (256, 128, 64, 8, 3),
    (128, 128, 64, 8, 4),
    (128, 128, 64, 4, 4),
    (128, 128, 128, 8, 3),
    (64, 256, 64, 4, 4),
]
GROUP_M = 8


@triton.jit
def _tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP: tl.constexpr):
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP * num_n
    first_m = (pid // in_group) * GROUP
    size_m = min(num_m - first_m, GROUP)
    return first_m + (pid % in_group) % size_m, (pid % in_group) // size_m


@triton.jit
def pointer_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   GROUP: tl.constexpr):  # fmt: skip
    pid_m, pid_n = _tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP)
    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * sam + rk[None, :] * sak
    b_ptrs = b_ptr + rk[:, None] * sbk + rn[None, :] * sbn
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=rk[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * sak
        b_ptrs += BLOCK_K * sbk
    cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + cm[:, None] * scm + cn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(cm[:, None] < M) & (cn[None, :] < N))  # fmt: skip


@triton.jit
def tma_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
               GROUP: tl.constexpr):  # fmt: skip
    a_d = tl.make_tensor_descriptor(a_ptr, [M, K], [sam, sak], [BLOCK_M, BLOCK_K])
    b_d = tl.make_tensor_descriptor(b_ptr, [K, N], [sbk, sbn], [BLOCK_K, BLOCK_N])
    c_d = tl.make_tensor_descriptor(c_ptr, [M, N], [scm, scn], [BLOCK_M, BLOCK_N])
    pid_m, pid_n = _tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_d.load([pid_m * BLOCK_M, k * BLOCK_K])
        b = b_d.load([k * BLOCK_K, pid_n * BLOCK_N])
        acc = tl.dot(a, b, acc)
    c_d.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_ptr.dtype.element_ty))


@triton.jit
def tma_persistent_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          GROUP: tl.constexpr, NUM_SMS: tl.constexpr):  # fmt: skip
    a_d = tl.make_tensor_descriptor(a_ptr, [M, K], [sam, sak], [BLOCK_M, BLOCK_K])
    b_d = tl.make_tensor_descriptor(b_ptr, [K, N], [sbk, sbn], [BLOCK_K, BLOCK_N])
    c_d = tl.make_tensor_descriptor(c_ptr, [M, N], [scm, scn], [BLOCK_M, BLOCK_N])
    tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    k_tiles = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(tl.program_id(0), tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = _tile(tile, M, N, BLOCK_M, BLOCK_N, GROUP)
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k in range(0, k_tiles):
            a = a_d.load([pid_m * BLOCK_M, k * BLOCK_K])
            b = b_d.load([k * BLOCK_K, pid_n * BLOCK_N])
            acc = tl.dot(a, b, acc)
        c_d.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_ptr.dtype.element_ty))


def launch(kind: str, a, b, c, cfg) -> None:
    bm, bn, bk, w, s = cfg
    M, K = a.shape
    N = b.shape[1]
    args = (a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride())
    meta = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP=GROUP_M, num_warps=w, num_stages=s)
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    if kind == "pointer":
        pointer_kernel[(tiles,)](*args, **meta)
    elif kind == "tma":
        tma_kernel[(tiles,)](*args, **meta)
    else:
        sms = torch.cuda.get_device_properties(a.device).multi_processor_count
        tma_persistent_kernel[(min(sms, tiles),)](*args, **meta, NUM_SMS=sms)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--run", default="MP")
    args = ap.parse_args()
    triton.set_allocator(
        lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda")
    )
    rows = []
    for M, N, K in SHAPES:
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        ref = a @ b
        cublas_ms = triton.testing.do_bench(lambda: a @ b)
        flops = 2 * M * N * K
        row = {"shape": [M, N, K], "cublas_us": round(cublas_ms * 1e3, 1),
               "cublas_tflops": round(flops / cublas_ms / 1e9, 1), "variants": []}  # fmt: skip
        for kind in ("pointer", "tma", "tma_persistent"):
            for cfg in CONFIGS:
                c = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
                entry = {"kind": kind, "config": list(cfg)}
                try:
                    t = time.monotonic()
                    launch(kind, a, b, c, cfg)
                    torch.cuda.synchronize()
                    entry["first_call_s"] = round(time.monotonic() - t, 2)
                    err = ((c.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
                    entry["rel_err"] = err
                    if err > 1e-2:
                        entry["error"] = "wrong result"
                    else:
                        ms = triton.testing.do_bench(lambda: launch(kind, a, b, c, cfg))
                        entry["us"] = round(ms * 1e3, 1)
                        entry["of_cublas"] = round(cublas_ms / ms, 3)
                except Exception as e:  # a config this GPU or compiler refuses
                    entry["error"] = f"{type(e).__name__}: {str(e)[:200]}"
                row["variants"].append(entry)
                print(M, N, K, kind, cfg, entry.get("of_cublas", entry.get("error")), flush=True)
        rows.append(summarize(row))
    args.out.write_text(json.dumps(record(rows, args.run), indent=1))


def summarize(row: dict) -> dict:
    """One shape's row as committed: cuBLAS, each structure's best configuration, and every
    variant's fraction of cuBLAS (None: refused by the compiler or wrong)."""
    best: dict[str, dict] = {}
    for v in row["variants"]:
        if v.get("of_cublas", 0) > best.get(v["kind"], {}).get("of_cublas", 0):
            best[v["kind"]] = {k: v[k] for k in ("config", "us", "of_cublas")}
    return {
        "shape": row["shape"],
        "cublas_us": row["cublas_us"],
        "best": best,
        "variants": [[v["kind"], v["config"], v.get("of_cublas")] for v in row["variants"]],
    }


def record(rows: list[dict], run: str) -> dict:
    import datetime
    import subprocess
    import sys

    gpu = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return {
        "kind": "matmul-probe",
        "run": run,
        "date": datetime.date.today().isoformat(),
        "gpu": gpu,
        "versions": f"python {sys.version.split()[0]} torch {torch.__version__} "
        f"triton {triton.__version__}",
        "command": "python3 bench/matmul_probe.py --out $OUT/matmul_probe.json --run " + run,
        "op": "bf16 matmul by kernel structure",
        "rows": rows,
    }


if __name__ == "__main__":
    main()
