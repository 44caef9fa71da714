"""Launchers as real projects write them: the entry an alias of an autograd.Function's `apply`,
the launch in a helper its forward calls. The task resolves (with the entry omitted too), `init`
scaffolds it, launch-level mutators rewrite the launch where it is, and a rewrite verifies."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from kernelbrain.engine.evaluate.pool import WorkerPool
from kernelbrain.engine.evaluate.verify import verify
from kernelbrain.engine.index import reach
from kernelbrain.engine.mutate import MutationContext, load_mutators
from kernelbrain.engine.task import find_task
from kernelbrain.engine.task.scaffold import plan

CORPUS = Path(__file__).parent / "corpus"
CONFIG = """[[tasks]]
file = "autograd_scale.py"
kernel = "scale_rows_kernel"
{entry}reference = "scale_rows_ref"
inputs = "scale_rows_inputs"
small_inputs = "scale_rows_small_inputs"
"""


def workspace(tmp_path: Path, entry: str | None = "scale_rows") -> Path:
    shutil.copy(CORPUS / "autograd_scale.py", tmp_path / "autograd_scale.py")
    line = f'entry = "{entry}"\n' if entry else ""
    (tmp_path / "kernelbrain.toml").write_text(CONFIG.format(entry=line))
    return tmp_path / "autograd_scale.py"


def test_an_alias_of_apply_reaches_the_launch_in_its_helper():
    tree = ast.parse((CORPUS / "autograd_scale.py").read_text())
    assert reach.resolve(tree, "scale_rows")[0] == "ScaleRows.forward"
    assert reach.signature_of(tree, "scale_rows") == (["x", "alpha"], 2)  # ctx is bound
    assert {"ScaleRows.forward", "_scale_rows", "launch_settings"} <= reach.reachable(
        tree, "scale_rows"
    )
    assert reach.reachable(tree, "no_such_name") == set()


@pytest.mark.parametrize("entry", ["scale_rows", None])
def test_the_task_resolves_with_the_entry_given_or_omitted(tmp_path, entry):
    task = find_task(workspace(tmp_path, entry), "scale_rows_kernel")
    assert task.entry == "scale_rows"


def test_init_scaffolds_the_alias_without_ctx(tmp_path):
    shutil.copy(CORPUS / "autograd_scale.py", tmp_path / "autograd_scale.py")
    planned = plan(tmp_path / "autograd_scale.py", "scale_rows_kernel")
    assert planned.entry == "scale_rows"
    assert "def scale_rows_reference(x, alpha):" in planned.harness_text


def test_launch_mutators_rewrite_the_launch_where_it_is_written(tmp_path):
    task = find_task(workspace(tmp_path), "scale_rows_kernel")
    source = Path(task.file).read_text()
    ctx = MutationContext(task, source)
    [launch] = ctx.entry_launches()
    assert launch.site.launcher == "_scale_rows"
    assert ctx.entry_function().name == "forward"
    proposals = list(load_mutators()["config"].propose(ctx))
    assert proposals, "the configuration mutator found no launch to tune"
    changed = [p for p in proposals if "num_warps=" in p.source and p.source != source]
    assert changed
    with WorkerPool() as pool:
        report = verify(pool, task, changed[0].source, "cpu")
    assert report.accepted, report.message


def test_a_warmup_launcher_is_dry_run_with_stand_ins_for_the_gpu():
    """A launcher that compiles ahead with `kernel.warmup(...)`, reads the compiled kernel's
    registers and the device's properties and sizes a persistent grid from them (Triton's
    persistent softmax, `tests/corpus/softmax_warmup.py`) is dry-run without a GPU: each case
    records its launch with the warmup's warps and stages and a grid from the stand-in device
    (132 SMs, no register use reported: 8 programs an SM), so it gets bytes, estimates and
    ahead-of-time compiles like any kernel. The stand-ins are gone once the dry run ends."""
    import torch

    from kernelbrain.engine import protocol as m
    from kernelbrain.engine.api import facts
    from kernelbrain.engine.search.cost_model import case_bytes_and_flops
    from kernelbrain.engine.worker.specialize import _record

    task = find_task(CORPUS / "softmax_warmup.py", "softmax_kernel")
    with WorkerPool() as pool:
        spec = pool.call("compile:0", m.Specialize(task, None, seed=0), 300.0)
    assert isinstance(spec, facts.SpecializeResult) and spec.error is None, spec
    launches = [c.launches for c in spec.cases]
    assert [len(ls) for ls in launches] == [1, 1]
    first = launches[0][0]
    assert (first.kernel, first.grid, first.num_warps, first.num_stages) == (
        "softmax_kernel", (1056, 1, 1), 8, 4)  # fmt: skip
    values = {a.name: a.value for a in first.args if a.kind == "constexpr"}
    assert values == {"BLOCK_SIZE": 4096, "num_stages": 4}
    assert case_bytes_and_flops(spec.cases, Path(task.file).read_text())[0] == [
        2 * 8192 * 4096 * 4,
        2 * 32768 * 1000 * 4,
    ]

    properties = torch.cuda.get_device_properties
    from triton.runtime.jit import JITFunction

    warmup = JITFunction.warmup
    with pytest.raises(ZeroDivisionError):
        _record(lambda: 1 / 0, "raises", ())
    assert torch.cuda.get_device_properties is properties and JITFunction.warmup is warmup
