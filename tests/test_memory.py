"""The experience memory: what a search learns is recalled by the next search of a similar
kernel (its winning chain replayed first, mutators that never paid there given fewer
proposals); a corrupt memory is moved aside; `--no-memory` neither reads nor writes it;
`kernelbrain memory clear` empties it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernelbrain.engine.api.request import OptimizeRequest
from kernelbrain.engine.search.allocation import MIN_QUOTA, PROPOSALS_PER_MUTATOR, Allocation
from kernelbrain.engine.service import optimize
from kernelbrain.engine.store.memory import Memory, Outcome

from .conftest import EXAMPLES

SOFTMAX = {"tl.exp", "tl.max", "tl.sum", "KB101", "dtype:bfloat16"}


def test_priors_weight_similar_kernels_and_quotas_follow_them(tmp_path):
    memory = Memory(tmp_path)
    memory.record(
        "softmax-like",
        SOFTMAX,
        {"single-pass": Outcome(4, 3, 1.2), "hints": Outcome(10, 0, 0.0, "smoke:mismatch")},
    )
    memory.record("softmax-like", {"tl.exp", "tl.sum"}, {"hints": Outcome(10, 0)})
    memory.record("matmul", {"tl.dot"}, {"hints": Outcome(50, 50, 5.0)})  # another family
    priors = memory.priors("softmax-like", SOFTMAX)
    sp = priors["single-pass"]
    assert (sp.tried, sp.paid) == (4, 3) and sp.gain == pytest.approx(0.4) and sp.rate == 0.75
    assert priors["hints"].paid == 0 and 10 < priors["hints"].tried < 20  # the second: 2/5 alike
    alloc = Allocation(priors)
    assert alloc.quota("single-pass") == PROPOSALS_PER_MUTATOR
    assert alloc.quota("hints") == MIN_QUOTA
    assert alloc.quota("config") == PROPOSALS_PER_MUTATOR  # no experience: full quota
    assert Allocation().quota("hints") == PROPOSALS_PER_MUTATOR
    memory.record_win("softmax-like", SOFTMAX, "single-pass+config", 1.5)
    memory.record_win("softmax-like", {"tl.exp"}, "online-softmax", 2.0)
    assert memory.winning_chains("softmax-like", SOFTMAX) == [
        "single-pass+config",
        "online-softmax",
    ]
    assert memory.clear() == 4 and memory.priors("softmax-like", SOFTMAX) == {}


def test_a_corrupt_memory_is_moved_aside(tmp_path):
    (tmp_path / "memory.db").write_bytes(b"not a database" * 100)
    memory = Memory(tmp_path)
    assert memory.notice and "moved aside" in memory.notice
    assert list(tmp_path.glob("memory.db.unusable-*"))
    memory.record("x", set(), {"config": Outcome(1, 1, 0.1)})
    assert memory.priors("x", set())["config"].paid == 1


def _search(ws: Path, memory: bool, **kw):
    return optimize(
        OptimizeRequest(
            str(ws / "ops" / "softmax.py"),
            "softmax_kernel",
            budget_s=kw.pop("budget_s", 120),
            device="cpu",
            memory=memory,
            **kw,
        )
    )


def _similar_workspace(src: Path, dest: Path) -> Path:
    """The bundled examples with the softmax at other shapes: the same kind of kernel."""
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns(".kernelbrain", "__pycache__"))
    path = dest / "ops" / "softmax.py"
    path.write_text(
        path.read_text().replace(
            "shapes = [(16384, 4096), (4096, 1024), (1024, 32768)]",
            "shapes = [(8192, 2048), (2048, 8192)]",
        )
    )
    return dest


def _reached(result, threshold: float):
    """The trajectory point where the search's best first reached `threshold`."""
    return next(
        p
        for p in result.trajectory
        if p.outcome == "verified" and p.speedup is not None and p.speedup >= threshold
    )


def _best(result) -> float:
    return next(v.speedup for v in result.variants if v.id == result.best)


@pytest.mark.slow
def test_a_second_search_of_a_similar_kernel_starts_from_what_paid(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELBRAIN_MEMORY_DIR", str(tmp_path / "memory"))
    first_ws = tmp_path / "a"
    shutil.copytree(
        EXAMPLES, first_ws, ignore=shutil.ignore_patterns(".kernelbrain", "__pycache__")
    )
    first = _search(first_ws, True, max_candidates=12, seed=0)
    assert first.best is not None
    memory = Memory(tmp_path / "memory")
    assert memory.summary()
    (chain, *_) = memory.winning_chains("softmax-like", SOFTMAX)
    assert chain in {v.origin for v in first.variants} and "dispatch" not in chain
    # The same kind of kernel at other shapes, in two other workspaces, with and without memory:
    # two searches side by side (each compares by candidates compiled, not by seconds).
    with ThreadPoolExecutor(max_workers=2) as ex:
        second, alone = ex.map(
            lambda ws_memory: _search(
                _similar_workspace(EXAMPLES, tmp_path / ws_memory[0]),
                ws_memory[1],
                max_candidates=12,
                seed=0,
            ),
            [("b", True), ("c", False)],
        )
    # The winning chain (each prefix of it) is replayed before the first generation: the first
    # candidates verified, compiled alone.
    steps = chain.split("+")
    prefixes = {"+".join(steps[:i]) for i in range(1, len(steps) + 1)}
    verified = [p for p in second.trajectory if p.outcome == "verified"]
    assert verified[0].origin in prefixes, second.trajectory[:5]
    assert verified[0].compiled <= len(prefixes), second.trajectory[:5]
    assert any("softmax-like kernel: experience of similar kernels" in n for n in second.notes)
    # It reaches the first search's best estimate (or the memory-less search's own, if lower)
    # with at least 30% less work: candidates compiled before it, the search's time on any
    # machine however loaded (bench/memory_effect.py reports the seconds).
    threshold = 0.99 * min(_best(first), _best(alone))
    with_memory, without = _reached(second, threshold), _reached(alone, threshold)
    assert with_memory.compiled <= 0.7 * without.compiled, (with_memory, without)


@pytest.mark.slow
def test_no_memory_reads_and_writes_nothing_and_clear_empties_it(tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLES, ws, ignore=shutil.ignore_patterns(".kernelbrain", "__pycache__"))
    env = os.environ | {
        "KERNELBRAIN_MEMORY_DIR": str(tmp_path / "memory"),
        "KERNELBRAIN_MEMORY": "on",
    }

    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "kernelbrain.engine.cli.main", *args],
            cwd=ws,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    run = ["optimize", "ops/gelu.py::gelu_kernel", "--device", "cpu", "--max-candidates", "3"]
    assert cli(*run, "--no-memory", "--json").returncode == 0
    assert not (tmp_path / "memory" / "memory.db").exists()
    assert cli(*run, "--json").returncode == 0
    shown = cli("memory", "show")
    assert shown.returncode == 0 and "elementwise" in shown.stdout, shown.stdout
    cleared = cli("memory", "clear")
    assert cleared.returncode == 0 and "cleared" in cleared.stdout
    assert ": 0 experiences" in cli("memory", "show").stdout


def test_kernel_features_name_the_family_and_the_dtypes():
    from kernelbrain.engine.mutate import MutationContext
    from kernelbrain.engine.search.features import kernel_features
    from kernelbrain.engine.task import find_task

    found = {}
    for op in ("softmax", "matmul", "gelu", "rmsnorm"):
        task = find_task(EXAMPLES / "ops" / f"{op}.py", f"{op}_kernel")
        found[op] = kernel_features(
            MutationContext(task, Path(task.file).read_text()), ["bfloat16[8x8]"]
        )
    assert {op: f for op, (f, _) in found.items()} == {
        "softmax": "softmax-like",
        "matmul": "matmul",
        "gelu": "elementwise",
        "rmsnorm": "normalization",
    }
    traits = found["softmax"][1]
    assert "dtype:bfloat16" in traits and "dtype:float16" not in traits and "KB101" in traits
