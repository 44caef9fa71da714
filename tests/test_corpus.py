"""The corpus (`tests/corpus/`): kernels written the way real projects write them. On the CPU,
every original passes its own harness or is refused with the interpreter's reason and the
line; `optimize` holds its budget from process start to exit and exits 0 or 2 with one JSON
object, two 60 s searches at once included; the
launch-level mutators reach every launcher shape; no rewrite drops a zero-fill that a path of
the kernel leaves in place."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from kernelbrain.engine.evaluate.verify import verify
from kernelbrain.engine.index import parse_module
from kernelbrain.engine.mutate import MutationContext, load_mutators
from kernelbrain.engine.rules import check_module
from kernelbrain.engine.task import find_task

CORPUS = Path(__file__).parent / "corpus"
TASKS = [
    (t["file"], t["kernel"])
    for t in tomllib.loads((CORPUS / "kernelbrain.toml").read_text())["tasks"]
]
# Launchers that only run on a GPU (ahead-of-time compilation, device queries): the CPU says so.
GPU_ONLY = {"softmax_kernel": "softmax_warmup.py:34 (`kernel._init_handles()`)"}
# Each corpus kernel gets a short search (its budget held from process start to exit, a few
# candidates past the original); the acceptance's 60 s, a budget that binds, is held by two
# searches at once (`test_two_searches_at_once_...`).
BUDGET_S, SLACK, CANDIDATES = 40, 1.05, 4


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    ws = tmp_path_factory.mktemp("corpus") / "ws"
    shutil.copytree(CORPUS, ws, ignore=shutil.ignore_patterns("__pycache__", ".kernelbrain"))
    return ws


def ids(task):
    return task[1]


def test_the_corpus_covers_what_real_projects_write():
    text = {f: (CORPUS / f).read_text() for f in {f for f, _ in TASKS}}
    shapes = {
        "autograd.Function": "torch.autograd.Function",
        "helper module": "from corpus_utils import",
        "heuristics": "@triton.heuristics",
        "autotune pruning": "prune_configs_by",
        "warmup launch": ".warmup(",
        "libdevice": "libdevice",
        "bf16": "bfloat16",
        "ignore index": "ignore_index",
        "gradient-writing forward": "HAS_GRAD",
        "**kwargs launch": "**LAUNCH",
        "static method entry": "@staticmethod",
        "results written into arguments, by a reference that writes its copies": "output.copy_(",
        "a state updated in place": "tl.store(state_ptr",
        "a launch under a device guard": "with torch.cuda.device(",
        "a kernel made by assignment": "= triton.jit(_",
        "a package-relative import": "from ._shapes import",
        "a custom operator launching through wrap_triton": "torch.library.wrap_triton(",
    }
    for shape, mark in shapes.items():
        assert any(mark in t for t in text.values()), shape
    assert len(TASKS) >= 12
    assert sum(1 for f in text if text[f].count("@triton.jit") > 1) >= 2  # multi-kernel files


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS, ids=ids)
def test_the_original_passes_its_harness_on_the_cpu(corpus, pool, task):
    file, kernel = task
    t = find_task(corpus / file, kernel)
    report = verify(pool, t, (corpus / file).read_text(), "cpu")
    if kernel in GPU_ONLY:
        assert not report.accepted and report.reason == "interpreter-gap"
        assert GPU_ONLY[kernel] in report.message and "--device cuda" in report.message
    else:
        assert report.accepted, report.message


@pytest.fixture(scope="module")
def optimized(corpus) -> dict:
    """`optimize` of every corpus kernel, two at a time as two editors' searches run side by side
    (each is held to its own budget, shared cores or not): (process, wall seconds) per task."""
    from concurrent.futures import ThreadPoolExecutor

    def one(task):
        file, kernel = task
        start = time.monotonic()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "kernelbrain.engine.cli.main",
                "optimize",
                f"{file}::{kernel}",
                "--device",
                "cpu",
                "--budget",
                f"{BUDGET_S}s",
                "--max-candidates",
                str(CANDIDATES),
                "--json",
            ],
            capture_output=True,
            text=True,
            cwd=corpus,
            timeout=BUDGET_S * 4,
        )
        return proc, time.monotonic() - start

    with ThreadPoolExecutor(max_workers=2) as ex:
        return dict(zip(TASKS, ex.map(one, TASKS)))


@pytest.mark.slow
# The first test's setup runs every search (two at a time), so its time limit is theirs.
@pytest.mark.timeout(int(BUDGET_S * SLACK * len(TASKS) / 2) + 120)
@pytest.mark.parametrize("task", TASKS, ids=ids)
def test_optimize_holds_its_budget(optimized, task):
    file, kernel = task
    proc, wall = optimized[task]
    assert wall <= BUDGET_S * SLACK + 3, f"{kernel}: {wall:.1f}s on a {BUDGET_S}s budget"
    assert proc.returncode in (0, 2), proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    if proc.returncode == 2:
        message = out["error"]["message"]
        assert message and out["error"]["exit"] == 2
        # on a busy machine the original's own check may not fit the budget: the budget still
        # holds, and the user is told what budget would do (the one other reason: GPU-only code)
        too_short = re.search(r"needs more than this \d+ s budget.*--budget \d+s", message)
        assert kernel in GPU_ONLY or too_short, message
    else:
        assert out["kernel"] == kernel and out["baseline"], out


LAUNCH_SHAPES = {
    "autograd alias, helper-computed settings": ("autograd_scale.py", "scale_rows_kernel"),
    "settings from another module": ("layer_norm.py", "layer_norm_fwd_kernel"),
    "static method alias": ("rms_norm_static.py", "rms_norm_kernel"),
    "heuristics, grid lambda": ("heuristics_axpy.py", "axpy_kernel"),
    "**kwargs launch": ("gelu_bf16.py", "gelu_tanh_kernel"),
    "2-D grid over 3-D strides": ("softmax_3d.py", "softmax_3d_kernel"),
    "second kernel of a file": ("geglu.py", "geglu_bwd_kernel"),
    "gradient-writing forward": ("cross_entropy_grad.py", "ce_fwd_grad_kernel"),
    "autotune, configs from a loop, pruned": ("matmul_pruned.py", "matmul_kernel"),
    "warmup, then the compiled kernel launched": ("softmax_warmup.py", "softmax_kernel"),
    "under torch.cuda.device, options in an opaque **dict": ("l2_norm.py", "l2norm_fwd_kernel"),
    "kernel made by assignment, in a package": ("rotary/rope.py", "_rope_fwd"),
    "custom operator, launched through wrap_triton": ("kl_div.py", "kl_div_kernel"),
}
LAUNCH_MUTATORS = ("config", "autotune", "autotune-space")


@pytest.mark.parametrize("shape", LAUNCH_SHAPES)
def test_launch_mutators_reach_every_launcher_shape(corpus, shape):
    file, kernel = LAUNCH_SHAPES[shape]
    task = find_task(corpus / file, kernel)
    source = (corpus / file).read_text()
    ctx = MutationContext(task, source)
    launches = ctx.entry_launches()
    assert launches, f"{shape}: no launch found from `{task.entry}`"
    assert all(lv.grid is not None for lv in launches), shape
    made = [
        p
        for name in LAUNCH_MUTATORS
        for p in load_mutators()[name].propose(ctx)
        if p.source != source
    ]
    assert made, f"{shape}: no launch-level candidate"


def test_a_zero_fill_an_early_return_leaves_in_place_is_kept(corpus):
    """Ignored rows return before storing: their loss must read 0, so neither KB106 nor
    launcher-cleanup may turn the `torch.zeros` into `torch.empty`."""
    file, kernel = "cross_entropy_ignore.py", "cross_entropy_fwd_kernel"
    task = find_task(corpus / file, kernel)
    source = (corpus / file).read_text()
    assert "torch.zeros(n_rows" in source
    ctx = MutationContext(task, source)
    assert not [f for f in check_module(ctx.module, select=["KB106"]) if f.kernel == kernel]
    assert not list(load_mutators()["launcher-cleanup"].propose(ctx))
    # The same kernel without its early return writes every row: the fill is redundant again.
    full = source.replace("    if target == ignore_index:\n        return\n", "")
    full_ctx = MutationContext(task, full)
    assert [f for f in check_module(full_ctx.module, select=["KB106"]) if f.kernel == kernel]
    assert list(load_mutators()["launcher-cleanup"].propose(full_ctx))


def test_a_warmup_launch_is_one_launch_with_the_compiled_kernels_grid(corpus):
    """`k = kernel.warmup(args, BLOCK_SIZE=..., grid=(1,))` then `k[(programs, 1, 1)](...)`: the
    index records one launch, its options from the warmup and its grid from the compiled launch,
    so configuration candidates retune what the warmup compiles."""
    task = find_task(corpus / "softmax_warmup.py", "softmax_kernel")
    source = (corpus / "softmax_warmup.py").read_text()
    ctx = MutationContext(task, source)
    (lv,) = ctx.entry_launches()
    assert lv.warmup and lv.site.grid == "(programs, 1, 1)"
    assert set(lv.options) == {"num_warps"}  # `grid=` is the warmup's, not a launch option
    assert {"BLOCK_SIZE", "num_stages"} <= set(lv.args)  # constexprs of this kernel
    tuned = [p for p in load_mutators()["config"].propose(ctx) if "num_warps=" in p.description]
    assert tuned and all("softmax_kernel.warmup(" in p.source for p in tuned)
    assert any("num_warps=4, grid=(1,)" in p.source for p in tuned)


@pytest.mark.slow
def test_launch_options_in_an_opaque_dict_are_merged_into_it(corpus, pool):
    """`**config` built by a helper: a configuration candidate overrides the dict's entry
    (`**{**config, "num_warps": 2}`) instead of passing `num_warps=` a second time, and passes
    the harness on the CPU, where the launch's `with torch.cuda.device(...)` does nothing."""
    task = find_task(corpus / "l2_norm.py", "l2norm_fwd_kernel")
    source = (corpus / "l2_norm.py").read_text()
    made = list(load_mutators()["config"].propose(MutationContext(task, source)))
    assert made and all("**{**config, " in p.source for p in made)
    assert all(p.source.count("num_warps") == source.count("num_warps") + 1 for p in made)
    report = verify(pool, task, made[0].source, "cpu", timing=False)
    assert report.accepted, report.message


def test_init_and_check_follow_a_kernel_made_by_assignment_in_a_package(tmp_path):
    """`_rope_fwd = triton.jit(_rope_fwd)` in a package module with relative imports: `check`
    sees the kernel, and `init` scaffolds a harness for its launcher."""
    from kernelbrain.engine.task.scaffold import plan

    pkg = tmp_path / "rotary"
    shutil.copytree(CORPUS / "rotary", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    module = parse_module((pkg / "rope.py").read_text())
    assert [k.name for k in module.index.kernels] == ["_rope_fwd"]
    assert plan(pkg / "rope.py", "_rope_fwd").entry == "apply_rope"


@pytest.mark.slow
def test_two_searches_at_once_each_end_within_their_budget(corpus):
    """Two `optimize --budget 60s` side by side on this machine (they share its cores): each
    ends within 66 s of its own process time, start-up and the original's check included."""
    kernels = [
        ("l2_norm.py", "l2norm_fwd_kernel"),
        ("merge_attn_states.py", "merge_attn_states_kernel"),
    ]
    procs = [
        (time.monotonic(), subprocess.Popen(
            [sys.executable, "-m", "kernelbrain.engine.cli.main", "optimize", f"{f}::{k}",
             "--device", "cpu", "--budget", "60s", "--json"],
            cwd=corpus, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for f, k in kernels
    ]  # fmt: skip
    for (start, proc), (_, kernel) in zip(procs, kernels):
        out, err = proc.communicate(timeout=240)
        wall = time.monotonic() - start
        assert proc.returncode == 0, err[-2000:]
        assert json.loads(out)["kernel"] == kernel
        assert wall <= 66, f"{kernel}: {wall:.1f} s on a 60 s budget"


@pytest.mark.slow
def test_inputs_the_original_fails_are_reported_not_skipped_silently(corpus, pool):
    """The RoPE indexes `cos` as if contiguous, so the edge stage's inputs with rows apart in
    memory and column-major ones fail it; the reference takes them. The original still passes, and its notes say how many inputs it
    fails and the first; the sizes the reference refuses are counted apart."""
    from kernelbrain.engine.evaluate.verify import run_harness

    result = run_harness(pool, find_task(corpus / "rotary" / "rope.py", "_rope_fwd"), None, "cpu")
    assert result.accepted, result.message
    fails = [n for n in result.notes if n.startswith("the original fails")]
    assert fails and "edge stage" in fails[0] and "left out" in fails[0], result.notes
    assert any(n.startswith("the reference refuses") for n in result.notes), result.notes
    assert sum(s.skipped for s in result.stages) >= 2


def test_a_custom_operator_launching_through_wrap_triton_is_followed(corpus, pool, tmp_path):
    """`@torch.library.triton_op(...)` around `torch.library.wrap_triton(kernel)[grid](...)`:
    `init` finds the operator as the launcher, and a shape dispatch between two kernel variants
    launches each bucket's own kernel through wrap_triton while registering the operator once
    (a copied decorator would register its name twice and fail the import)."""
    from kernelbrain.engine.search import shape_dispatch
    from kernelbrain.engine.task.scaffold import plan

    shutil.copy(CORPUS / "kl_div.py", tmp_path)  # no harness there yet
    assert plan(tmp_path / "kl_div.py", "kl_div_kernel").entry == "kl_div_rows"
    task = find_task(corpus / "kl_div.py", "kl_div_kernel")
    source = (corpus / "kl_div.py").read_text()
    (site,) = [s for k in parse_module(source).index.kernels for s in k.launch_sites]
    assert site.launcher == "kl_div_rows" and site.grid == "(rows,)"
    other = source.replace("tl.exp(logq)", "tl.exp2(logq * 1.4426950408889634)")
    merged = shape_dispatch.build([source, other], task.kernel, task.entry, "{0}.shape[-1]", (100,))
    assert merged.count("@torch.library.triton_op(") == 1
    assert "torch.library.wrap_triton(kl_div_kernel_bucket1)[(rows,)](" in merged
    report = verify(pool, task, merged, "cpu", timing=False)
    assert report.accepted, report.message
