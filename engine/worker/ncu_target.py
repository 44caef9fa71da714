"""What Nsight Compute runs: one benchmark case of a task, twice (the second launch is profiled,
so JIT compilation stays out). `python -m ... TASK_JSON CASE [CANDIDATE.py]`."""

from __future__ import annotations

import sys


def main() -> None:
    import msgspec
    import torch

    from .. import protocol as m
    from ..task.spec import Task
    from .harness import Harness
    from .loader import ModuleLoader

    task = msgspec.json.decode(open(sys.argv[1], "rb").read(), type=Task)
    case = int(sys.argv[2])
    candidate = open(sys.argv[3]).read() if len(sys.argv) > 3 else None
    h = Harness(m.RunHarness(task, candidate), "cuda", ModuleLoader(), lambda *_: None)
    h.load()
    args = h.inputs.full("timing")[case]
    with torch.no_grad():
        for _ in range(2):
            h.entry(*args)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
