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
