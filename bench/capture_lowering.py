"""Capture torch.compile's output code for the bundled examples, as the judge does, into fixture
files: on a GPU, the benchmark cases in both modes (what a GPU search transplants); the CPU tests
then transplant and judge these files without a GPU (`tests/mutate/test_lowering.py`).

    python bench/capture_lowering.py --out tests/fixtures/lowering [--device cuda] [--ops softmax,...]

Runs the examples' own references in this process (no sandbox): bundled code only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import msgspec
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT.parent))

from kernelbrain.engine.task import find_task  # noqa: E402
from kernelbrain.engine.worker.lowering import MODES, lower_cases  # noqa: E402

OPS = ["softmax", "rmsnorm", "gelu", "cross_entropy", "col_sum", "matmul"]


def function(spec: str):
    """`path:name` of a task, loaded from its file."""
    path, name = spec.rsplit(":", 1)
    namespace: dict = {"__name__": Path(path).stem}
    exec(compile(Path(path).read_text(), path, "exec"), namespace)
    return namespace[name]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--ops", default=",".join(OPS))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    gpu = args.device != "cpu"
    for op in args.ops.split(","):
        task = find_task(ROOT / "examples" / "ops" / f"{op}.py", f"{op}_kernel")
        make = function(task.inputs if gpu else task.small_inputs)
        reference = function(f"{task.reference_module}:{task.reference}")
        torch.manual_seed(0)
        cases = make(device=args.device)
        started = time.monotonic()
        result = lower_cases(reference, cases, MODES if gpu else MODES[:1])
        seconds = time.monotonic() - started
        target = args.out / f"{op}-{'gpu' if gpu else 'cpu'}.json"
        target.write_bytes(msgspec.json.format(msgspec.json.encode(result), indent=1))
        print(
            f"{op}: {len(result.cases)} case(s) in {seconds:.1f} s, declined {result.declined}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
