"""BENCHMARKS.md's tables are what `bench/render_benchmarks.py` makes of bench/results/*.json,
and every result file says where it came from."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_benchmarks_tables_are_generated_from_the_result_files():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "render_benchmarks.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr


def test_every_result_file_is_small_and_says_date_gpu_versions_and_command():
    files = sorted((ROOT / "bench" / "results").glob("*.json"))
    assert files
    for path in files:
        record = json.loads(path.read_text())
        assert path.stat().st_size < 20_000, path
        for key in ("kind", "run", "date", "gpu", "versions", "command", "op"):
            assert record.get(key), (path.name, key)
    assert len((ROOT / "BENCHMARKS.md").read_text().splitlines()) < 400


def test_the_suite_covers_its_three_folders_and_shards_split_it_without_overlap():
    sys.path.insert(0, str(ROOT / "bench"))
    from run_suite import case_row, kernels, shard, torch_function

    names = [name for name, _, _ in kernels()]
    folders = {folder for _, folder, _ in kernels()}
    assert folders == {"examples", "corpus", "suite"} and len(names) == len(set(names))
    assert {"attention_fwd_kernel", "rope_kernel", "matmul_bf16_kernel"} <= set(names)
    parts = [shard(names, f"{i}/4") for i in range(4)]
    assert sorted(n for p in parts for n in p) == sorted(names)
    # the better torch.compile mode is the reference; a matmul's ceiling is cuBLAS
    row = case_row(
        {"label": "x", "alone_us": 10.0, "original_alone_us": 30.0, "eager_us": 20.0,
         "compile_us": 12.0, "max_autotune_us": 8.0, "frac_cublas": 0.9},
        {"copy_gbps": 4000.0, "bf16_tflops": 700.0},
    )  # fmt: skip
    assert (row["x_draft"], row["x_eager"], row["x_compile"]) == (3.0, 2.0, 0.8)
    assert (row["ceiling"], row["of_ceiling"]) == ("cuBLAS", 0.9)
    # cuBLAS counts as PyTorch's best; a reference in wider precision gives no torch ratios
    fp32 = case_row({"label": "x", "alone_us": 10.0, "compile_us": 30.0, "frac_cublas": 0.5}, {},
                    like_for_like=False)  # fmt: skip
    assert fp32["x_compile"] == 0.5 and fp32["x_eager"] is None and fp32["compile_us"] is None
    bare = case_row({"label": "x", "alone_us": 10.0, "compile_us": 30.0}, {}, like_for_like=False)
    assert bare["x_compile"] is None
    # a case that trails torch.compile within 15% of an empty launch is named launch-bound
    near = {"label": "x", "alone_us": 5.2, "compile_us": 4.5}
    assert case_row(near, {}, launch_floor_us=4.8)["why"] == "launch"
    assert case_row(near, {}, launch_floor_us=3.0)["why"] is None  # the kernel has room
    assert case_row({**near, "compile_us": 6.0}, {}, launch_floor_us=4.8)["why"] is None  # ahead
    assert case_row(near, {})["why"] is None  # no floor measured
    # a memory-bound case that trails at 90% of its roof or more has at most the rest to gain
    at_roof = {"label": "x", "alone_us": 10.0, "compile_us": 9.5, "gbps": 3900.0}
    assert case_row({**at_roof, "frac_copy": 0.93}, {})["why"] == "roof"
    assert case_row({**at_roof, "frac_copy": 0.85}, {})["why"] is None
    assert case_row({**at_roof, "frac_copy": 0.93, "compile_us": 11.0}, {})["why"] is None
    matmul = {**at_roof, "frac_cublas": 0.95}  # cuBLAS is no bandwidth roof
    assert case_row(matmul, {})["why"] is None
    # bandwidth is a fraction of copy; no bytes at all (no launch seen) is no fraction
    streamed = {"label": "x", "alone_us": 10.0, "gbps": 3000.0, "frac_copy": 0.7}
    assert case_row(streamed, {})["of_ceiling"] == 0.7
    assert case_row({**streamed, "gbps": 0.0, "frac_copy": 0.0}, {})["of_ceiling"] is None
    # a reduction is a fraction of the read stream where the run measured it
    read = case_row({**streamed, "roof": "read stream", "frac_roof": 0.6}, {})
    assert (read["ceiling"], read["of_ceiling"]) == ("read stream", 0.6)
    suite = {name: target for name, _, target in kernels()}
    assert torch_function(suite["attention_fwd_kernel"]) == "attention_torch"
    assert torch_function(suite["gelu_kernel"]) is None
