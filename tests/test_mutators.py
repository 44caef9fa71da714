"""Every mutator: its output is a verified variant on a bundled example, and its preconditions
refuse where the rewrite would be wrong."""

from __future__ import annotations

import ast
import copy
import textwrap
import types

import pytest

from kernelbrain.engine.evaluate.pool import WorkerPool
from kernelbrain.engine.evaluate.verify import verify
from kernelbrain.engine.mutate import MutationContext, load_mutators
from kernelbrain.engine.mutate.edits import Edits
from kernelbrain.engine.task import find_task
from kernelbrain.engine.task.spec import Task

from .conftest import EXAMPLES

MUTATORS = load_mutators()

# mutator -> the example it must produce a verified variant on ("example after mutator": on the
# first proposal of another mutator, for a rewrite that applies to what that one makes)
SHOWCASE = {
    "config": "gelu",
    "launcher-cleanup": "matmul",
    "single-pass": "rmsnorm",
    "online-softmax": "cross_entropy",
    "grouped-order": "matmul",
    "hints": "softmax",
    "autotune": "gelu",
    "autotune-space": "gelu after autotune",
    "int64-offsets": "softmax",
    "coarsen-atomics": "col_sum",
    "own-columns": "col_sum",
    "loop-stages": "cross_entropy",
    "host-sync": "cross_entropy",
    "overlap-checks": "cross_entropy after host-sync",
    "exp2": "cross_entropy after online-softmax",
    "unmasked-interior": "softmax after hints",
    "coarsen-programs": "softmax",
}


def example(op: str) -> tuple[Task, str]:
    task = find_task(EXAMPLES / "ops" / f"{op}.py", f"{op}_kernel")
    return task, open(task.file).read()


def propose(name: str, task: Task, source: str):
    return list(MUTATORS[name].propose(MutationContext(task, source)))


def test_every_mutator_has_a_showcase():
    assert set(SHOWCASE) == set(MUTATORS)


@pytest.fixture(scope="module")
def pool():
    with WorkerPool() as p:
        yield p


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SHOWCASE))
def test_mutator_output_is_a_verified_variant(pool, name):
    op, _, first = SHOWCASE[name].partition(" after ")
    task, source = example(op)
    if first:
        source = propose(first, task, source)[-1].source
    proposals = propose(name, task, source)
    assert proposals, f"{name} proposed nothing on {SHOWCASE[name]}"
    p = proposals[0]
    assert p.source != source and p.origin == name and len(p.description) > 20
    report = verify(pool, task, p.source, "cpu")
    assert report.accepted, f"{name}: {report.stage}/{report.reason}: {report.message}"


def test_config_ties_grid_literals_and_leaves_input_sized_tiles(tmp_path):
    task, source = example("gelu")
    p = next(m for m in propose("config", task, source) if m.knobs.get("BLOCK") == 1024)
    assert "triton.cdiv(n, 1024)" in p.source and "BLOCK=1024" in p.source
    single = propose("single-pass", *example("softmax"))[0]
    task_s, _ = example("softmax")
    for m in propose("config", task_s, single.source):
        assert "BLOCK_SIZE" not in m.knobs  # the row-sized tile is not a free knob
        assert "row_block if one_pass" in m.source


def test_grid_literals_two_constexprs_share_change_only_together():
    """Run N (H200 col_sum): re-tiling a coarsened kernel whose `BLOCK_M` and `ITERS` were both 16
    rewrote the grid's `cdiv(cdiv(n_rows, 16), 16)` as if both literals were BLOCK_M's; a quarter
    of the programs ran. Every retiling, twice over, must keep the grid's literals on their own
    constexprs."""
    import re

    task, source = example("col_sum")
    checked = 0
    for coarse in propose("coarsen-atomics", task, source)[:3]:
        for once in propose("config", task, coarse.source)[:12]:
            for twice in [once] + propose("config", task, once.source)[:12]:
                grid = re.search(r"cdiv\(triton\.cdiv\(n_rows, (\d+)\), (\d+)\)", twice.source)
                knobs = dict(re.findall(r"(BLOCK_M|ITERS)=(\d+)", twice.source))
                assert grid and grid.groups() == (knobs["BLOCK_M"], knobs["ITERS"]), (grid, knobs)
                checked += 1
    assert checked > 300


def test_config_walks_from_the_current_configuration_and_stages_only_dot_loops():
    """Proposals start next to the current launch (one knob doubled or halved), so a parent's
    neighbours are proposed before far-off favourites; the launch's `num_stages` is proposed only
    where it changes the code, a loop feeding `tl.dot` (a streaming loop's depth is its own knob,
    `loop_stages`, once `loop-stages` pipelined it)."""
    import math

    task, source = example("col_sum")
    coarse = next(m for m in propose("coarsen-atomics", task, source) if m.knobs.get("ITERS") == 16)
    unrolled = propose("config", task, coarse.source)  # a `tl.static_range` loop only: no stages
    assert unrolled and all("num_stages" not in m.knobs for m in unrolled)
    current = {"BLOCK_M": 32, "BLOCK_N": 64, "num_warps": 4}
    steps = [sum(abs(math.log2(m.knobs[k] / v)) for k, v in current.items()) for m in unrolled]
    assert max(steps[:12]) <= 3 < max(steps[12:])  # the first twelve stay within a few doublings
    assert {"BLOCK_M": 32, "BLOCK_N": 128, "num_warps": 4} in [m.knobs for m in unrolled[:12]]

    task, source = example("cross_entropy")  # a runtime `range` loop without a dot: no stages
    looped = propose("config", task, source)
    assert looped and all("num_stages" not in m.knobs for m in looped)
    assert {"BLOCK_SIZE": 2048, "num_warps": 4} == looped[0].knobs
    task, source = example("matmul")  # a dot loop: stages too
    assert any("num_stages" in m.knobs for m in propose("config", task, source))


def test_config_tells_equal_tiles_apart_by_grid_axis_and_repeats_a_step_that_paid():
    """H200 col_sum (run AK): one program per column strip climbed from 32 x 64 to 64 x 64 tiles
    and stopped. With BLOCK_M == BLOCK_N the grid's `cdiv(n_cols, 64)` could have been either's,
    so the two could only change together; it is BLOCK_N's, the tile that scales
    `tl.program_id(0)`. And a step that paid is proposed again first (64 -> 128 rows)."""
    task, source = example("col_sum")
    own = propose("own-columns", task, source)[0]
    d3 = {
        "loop_stages": 3
    }  # the strip's loop, pipelined at Triton's default depth by `own-columns`
    square = next(
        m
        for m in propose("config", task, own.source)
        if m.knobs == {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4} | d3
    )
    after = propose("config", task, square.source)
    tall = next(m for m in after if m.knobs == {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4} | d3)
    assert (
        "grid = (triton.cdiv(n_cols, 64), 1)" in tall.source
        and "BLOCK_M=128, BLOCK_N=64" in tall.source
    )
    narrow = next(
        m for m in after if m.knobs == {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4} | d3
    )
    assert "grid = (triton.cdiv(n_cols, 32), 1)" in narrow.source
    assert after[0].knobs != tall.knobs  # no step to repeat: nearest by the prior first
    repeated = list(
        MUTATORS["config"].propose(MutationContext(task, square.source, previous=own.source))
    )
    assert repeated[0].knobs == tall.knobs
    # twice the step: 256 rows, at 8 warps where 4 would hold 128 elements a thread (out of the space)
    assert repeated[1].knobs == {"BLOCK_M": 256, "BLOCK_N": 64, "num_warps": 8} | d3
    assert {repr(m.knobs) for m in repeated[2:]} <= {
        repr(m.knobs) for m in after
    }  # then the walk as before
    # an autotune list walks the same way: the launch's own configuration, then the repeated steps
    tuned = list(
        MUTATORS["autotune"].propose(MutationContext(task, square.source, previous=own.source))
    )[0]
    configs = tuned.source[tuned.source.index("configs=[") : tuned.source.index("key=")]
    assert (
        configs.index('"BLOCK_M": 64, "BLOCK_N": 64, "LOOP_STAGES": 3}, num_warps=4')
        < configs.index('"BLOCK_M": 128, "BLOCK_N": 64, "LOOP_STAGES": 3}, num_warps=4')
        < configs.index('"BLOCK_M": 256, "BLOCK_N": 64, "LOOP_STAGES": 3}, num_warps=8')
    )
    task, source = example(
        "matmul"
    )  # a dot loop: stages move by the same count again (3 -> 4 -> 5)
    base = {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "num_warps": 4}
    deeper = next(m for m in propose("config", task, source) if m.knobs == base | {"num_stages": 4})
    again = list(MUTATORS["config"].propose(MutationContext(task, deeper.source, previous=source)))
    assert again[0].knobs == base | {"num_stages": 5} and "num_stages=5" in again[0].source


LAUNCHER_CONSTANT = """import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


def add(x):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 1024
    grid = (triton.cdiv(n, BLOCK),)
    add_kernel[grid](x, out, n, BLOCK=BLOCK)
    return out


def add_ref(x):
    return x + 1


def add_inputs(device="cuda"):
    return [(torch.randn(1 << 20, device=device),)]


def add_small_inputs(device="cpu"):
    return [(torch.randn(3000, device=device),)]
"""


def test_a_tile_passed_as_a_launcher_constant_retiles_its_grid(tmp_path, pool):
    """`BLOCK = 1024; grid = (cdiv(n, BLOCK),); ...BLOCK=BLOCK`: the grid follows the new tile
    (it kept 1024 before, so BLOCK=512 left half of the output unwritten), and the autotuned
    grid reads the tile from META."""
    (tmp_path / "add.py").write_text(LAUNCHER_CONSTANT)
    (tmp_path / "kernelbrain.toml").write_text(
        '[[tasks]]\nfile = "add.py"\nkernel = "add_kernel"\nentry = "add"\n'
        'reference = "add_ref"\ninputs = "add_inputs"\n'
        'small_inputs = "add_small_inputs"\n'
    )
    task = find_task(tmp_path / "add.py", "add_kernel")
    small = next(
        m for m in propose("config", task, LAUNCHER_CONSTANT) if m.knobs.get("BLOCK") == 512
    )
    assert "grid = (triton.cdiv(n, 512),)" in small.source and "BLOCK=512" in small.source
    report = verify(pool, task, small.source, "cpu")
    assert report.accepted, report.message
    tuned = propose("autotune", task, LAUNCHER_CONSTANT)[0]
    assert 'grid = lambda META: (triton.cdiv(n, META["BLOCK"]),)' in tuned.source


def test_launcher_cleanup_keeps_zeros_that_atomics_need():
    assert propose("launcher-cleanup", *example("col_sum")) == []
    p = propose("launcher-cleanup", *example("gelu"))[0]
    assert "torch.empty_like(x)" in p.source and "zeros_like" not in p.source


def test_single_pass_refuses_single_loop_and_loop_free_kernels():
    assert propose("single-pass", *example("gelu")) == []
    assert propose("single-pass", *example("col_sum")) == []
    p = propose("single-pass", *example("softmax"))[0]
    assert "ONE_PASS: tl.constexpr=False" in p.source and "<= 32768" in p.source
    tree = ast.parse(p.source)
    kernel = next(
        n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "softmax_kernel"
    )
    one_pass = kernel.body[0].body
    loads = [
        n
        for n in ast.walk(ast.Module(body=one_pass, type_ignores=[]))
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "tl.load"
    ]
    assert len(loads) == 1  # the row is read once


def test_single_pass_keeps_rows_up_to_max_row_without_spills(pool):
    """The widest row the single pass takes (the softmax example's 1024x32768 case) compiles for
    sm_90 without spills: the bound MAX_ROW is what registers hold, not a guess."""
    from kernelbrain.engine import protocol as m
    from kernelbrain.engine.mutate.single_pass import MAX_ROW

    task, source = example("softmax")
    p = propose("single-pass", task, source)[0]
    spec = pool.call("compile:0", m.Specialize(task, p.source, seed=0), 300.0)
    widest = [
        r
        for c in spec.cases
        for r in c.launches
        if any(a.name == "ONE_PASS" and a.value for a in r.args)
        and next(a.value for a in r.args if a.name == "BLOCK_SIZE") == MAX_ROW
    ]
    assert widest, "no case reaches MAX_ROW"
    (facts,) = pool.call("compile:0", m.Compile(p.source, task.file, widest[:1]), 600.0).facts
    assert facts.ok and facts.n_spills == 0 and facts.n_regs <= 255, facts


def test_online_softmax_refuses_other_reductions():
    assert propose("online-softmax", *example("rmsnorm")) == []
    task, source = example("softmax")
    uses_max_between = source.replace(
        "    d = tl.zeros([BLOCK_SIZE], tl.float32)\n",
        "    d = tl.zeros([BLOCK_SIZE], tl.float32) + row_max * 0\n",
    )
    assert propose("online-softmax", task, uses_max_between) == []
    p = propose("online-softmax", task, source)[0]
    assert (
        p.source.count("for start in range(0, n_cols, BLOCK_SIZE)") == 2
    )  # three passes became two


@pytest.mark.slow
def test_online_softmax_block_wise_form_is_verified_and_needs_a_whole_row_maximum(pool):
    task, source = example("cross_entropy")
    lane, block = propose("online-softmax", task, source)
    assert "tl.exp(m - m_new)" in lane.source  # two exponentials per element
    loop = block.source.split("for start in range(0, n_cols, BLOCK_SIZE):")[1].split("lse =")[0]
    assert (
        loop.count("tl.exp(") == 2
        and "tl.max(x, axis=0)" in loop
        and "tl.maximum(m, x)" not in loop
    )
    assert "m = tl.full" not in block.source  # the lane-wise maximum is gone, not left dead
    # the sum is only reduced whole after the loop: one scalar too, each block adding its own sum
    assert "s = 0.0" in block.source and "tl.sum(tl.exp(x - row_max_safe), axis=0)" in loop
    assert "lse = row_max + tl.log(s)" in block.source
    report = verify(pool, task, block.source, "cpu")
    assert report.accepted, f"{report.stage}/{report.reason}: {report.message}"
    # the sum read lane by lane after the loop: it stays a block-wide accumulator
    reads_s_lanes = source.replace(
        "    tl.store(loss_ptr + row, lse - x_t)",
        "    tl.store(loss_ptr + row, lse - x_t + tl.max(s, axis=0) * 0)",
    )
    vector = propose("online-softmax", task, reads_s_lanes)[1]
    assert (
        "s = tl.zeros([BLOCK_SIZE], tl.float32)" in vector.source
        and "tl.log(tl.sum(s, axis=0))" in vector.source
    )
    assert "+ tl.exp(x - row_max_safe)" in vector.source
    # a float64 sum would become a float32 scalar: it stays as it is
    f64 = source.replace(
        "s = tl.zeros([BLOCK_SIZE], tl.float32)", "s = tl.zeros([BLOCK_SIZE], tl.float64)"
    )
    assert (
        "s = tl.zeros([BLOCK_SIZE], tl.float64)" in propose("online-softmax", task, f64)[1].source
    )
    # the lane maximum read again after the loops: only the lane-wise form keeps it right
    reads_m_later = source.replace(
        "    tl.store(loss_ptr + row, lse - x_t)",
        "    tl.store(loss_ptr + row, lse - x_t + tl.sum(m, axis=0) * 0)",
    )
    assert [p.source for p in propose("online-softmax", task, reads_m_later)][1:] == []
    # a maximum reduced along one axis of a 2-D tile is not one scalar per program
    per_axis = source.replace("row_max = tl.max(m, axis=0)", "row_max = tl.max(m, axis=1)")
    assert len(propose("online-softmax", task, per_axis)) == 1


def test_grouped_order_only_for_ungrouped_matmul():
    assert propose("grouped-order", *example("softmax")) == []
    task, source = example("matmul")
    p = propose("grouped-order", task, source)[0]
    assert "GROUP_M" in p.source and "triton.cdiv(M, 64) * triton.cdiv(N, 64)," in p.source
    assert propose("grouped-order", task, p.source) == []  # already grouped


SUITE = EXAMPLES.parent / "bench" / "suite"


def suite_matmul() -> tuple[Task, str]:
    task = find_task(SUITE / "matmul_bf16.py", "matmul_bf16_kernel")
    return task, open(task.file).read()


@pytest.mark.slow
def test_grouped_order_groups_a_1d_grid_split_by_division(pool):
    """Public matmuls often walk a 1-D grid row by row (`pid_m = pid // n_tiles_n`, `pid_n = pid %
    n_tiles_n`): the grouped walk replaces the two divisions, the grid stays, and the variant is
    verified. A divisor that is not the column tiles' count is no row-major walk: left alone."""
    task, source = suite_matmul()
    p = propose("grouped-order", task, source)[0]
    assert "n_tiles_n" not in p.source and "group_size_m" in p.source  # its divisor went too
    assert "grid = (triton.cdiv(M, 32) * triton.cdiv(N, 32),)" in p.source
    assert "GROUP_M=8)" in p.source and "# fmt: skip  # fmt: skip" not in p.source
    assert propose("grouped-order", task, p.source) == []  # already grouped
    report = verify(pool, task, p.source, "cpu")
    assert report.accepted, f"{report.stage}/{report.reason}: {report.message}"
    other = source.replace("n_tiles_n = tl.cdiv(N, BLOCK_N)", "n_tiles_n = tl.cdiv(M, BLOCK_M)")
    assert propose("grouped-order", task, other) == []


def test_config_tells_a_1d_grids_equal_tiles_apart_by_the_sizes_they_mask():
    """The suite's naive bf16 matmul passes 32 for all three tiles and sizes its 1-D grid
    `cdiv(M, 32) * cdiv(N, 32)`: one program id scales both BLOCK_M and BLOCK_N, so the grid axis
    cannot tell them apart. The kernel masks `rm < M` with BLOCK_M's offsets and `rn < N` with
    BLOCK_N's, so each literal has one owner and the tiles move on their own (to Triton's
    128 x 256 x 64 Hopper tile, which all-equal tiles never reach)."""
    task, source = suite_matmul()
    knobs = [m.knobs for m in propose("config", task, source)]
    assert any(k["BLOCK_M"] != k["BLOCK_N"] for k in knobs)
    big = next(
        m
        for m in propose("config", task, source)
        if (m.knobs["BLOCK_M"], m.knobs["BLOCK_N"], m.knobs["BLOCK_K"]) == (128, 256, 64)
    )
    assert "grid = (triton.cdiv(M, 128) * triton.cdiv(N, 256),)" in big.source
    assert "BLOCK_M=128, BLOCK_N=256, BLOCK_K=64" in big.source


def test_hints_only_where_offsets_are_block_aligned():
    src = textwrap.dedent("""
        import torch, triton
        import triton.language as tl

        @triton.jit
        def k(x_ptr, idx_ptr, n, BLOCK: tl.constexpr):
            start = tl.load(idx_ptr)
            offs = start + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 1.0, mask=offs < n)

        def run(x, idx):
            k[(1,)](x, idx, x.numel(), BLOCK=1024)
    """)
    task = Task("config", "/tmp/k.py", "k", "run", "/tmp/k.py", "run", "/tmp/k.py:run")
    assert propose("hints", task, src) == []  # a loaded start need not be a multiple of the block
    task_g, gelu = example("gelu")
    p = propose("hints", task_g, gelu)[0]
    assert "tl.multiple_of(pid * BLOCK + tl.arange(0, BLOCK), BLOCK)" in p.source
    assert propose("hints", task_g, p.source) == []


def test_unmasked_interior_drops_only_the_bounds_test_and_only_where_it_can_prove_it():
    task = Task("config", "/tmp/k.py", "k", "run", "/tmp/k.py", "run", "/tmp/k.py:run")

    def kernel(body: str) -> str:
        return textwrap.dedent("""
            import torch, triton
            import triton.language as tl

            @triton.jit
            def k(x_ptr, y_ptr, idx_ptr, n, BLOCK: tl.constexpr):
            BODY

            def run(x, y, idx):
                k[(triton.cdiv(x.numel(), 1024),)](x, y, idx, x.numel(), BLOCK=1024)
        """).replace("BODY", textwrap.indent(textwrap.dedent(body), "    "))

    plain = kernel("""
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        keep = offs < n
        x = tl.load(x_ptr + offs, mask=keep, other=0.0)
        tl.store(y_ptr + offs, x, mask=keep & (x > 0))
        tl.store(x_ptr + offs, x * 2, mask=keep)
    """)
    (p,) = propose("unmasked-interior", task, plain)
    tree = ast.parse(p.source)
    branch = next(n for n in ast.walk(tree) if isinstance(n, ast.If))
    assert ast.unparse(branch.test) == "tl.program_id(0) * BLOCK + BLOCK <= n"
    interior, tail = ast.unparse(branch.body), ast.unparse(branch.orelse)
    assert "tl.load(x_ptr + offs)" in interior and "other" not in interior
    assert "mask=keep & (x > 0)" in interior  # not the bounds test alone: kept
    assert "tl.store(x_ptr + offs, x * 2)" in interior
    assert tail.count("mask=keep") == 3  # the last block keeps every mask
    assert propose("unmasked-interior", task, p.source) == []  # nothing left to split
    inline = kernel("""
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        tl.store(y_ptr + offs, x, mask=offs < n)
    """)
    (q,) = propose("unmasked-interior", task, inline)
    branch = next(n for n in ast.walk(ast.parse(q.source)) if isinstance(n, ast.If))
    assert (
        "mask" not in ast.unparse(branch.body) and ast.unparse(branch.orelse).count("offs < n") == 2
    )

    refused = {
        "a start read from memory, a block": """
            start = tl.load(idx_ptr + tl.arange(0, BLOCK))
            offs = start + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, 1.0, mask=offs < n)
        """,
        "a bound that is a block": """
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            lim = tl.load(idx_ptr + tl.arange(0, BLOCK))
            tl.store(x_ptr + offs, 1.0, mask=offs < lim)
        """,
        "offsets assigned twice": """
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            offs = offs * 2
            tl.store(x_ptr + offs, 1.0, mask=offs < n)
        """,
        "a return after the mask": """
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            if n == 0:
                return
            tl.store(x_ptr + offs, 1.0, mask=offs < n)
        """,
        "no access passes the bounds test alone": """
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=(offs < n) & (offs > 3))
            tl.store(y_ptr + offs, x, mask=(offs < n) & (offs > 3))
        """,
    }
    for why, body in refused.items():
        assert propose("unmasked-interior", task, kernel(body)) == [], why


def test_autotune_refuses_atomics_and_input_sized_tiles():
    assert propose("autotune", *example("col_sum")) == []
    task, source = example("softmax")
    single = propose("single-pass", task, source)[0]
    assert propose("autotune", task, single.source) == []
    task_g, gelu = example("gelu")
    p = propose("autotune", task_g, gelu)[0]
    assert (
        "@triton.autotune(" in p.source
        and 'lambda META: (triton.cdiv(n, META["BLOCK"]),)' in p.source
    )
    assert "BLOCK=64" not in p.source.split("def gelu(")[1]


def test_exp2_rewrites_only_provably_fp32_exponentials():
    src = textwrap.dedent("""
        import torch, triton
        import triton.language as tl

        @triton.jit
        def k(x_ptr, h_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
            raw = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            h = tl.load(h_ptr + offs, mask=offs < n, other=0.0).to(tl.float16)
            m = float("-inf")
            s = 0.0
            for start in range(0, n, BLOCK):
                m_new = tl.maximum(m, tl.max(x, axis=0))
                s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
                m = m_new
            d = x.to(tl.float64)
            tl.store(out_ptr + offs, s + tl.exp(raw) + tl.exp(h) + tl.exp(d) + tl.math.exp(-x))

        def run(x, h, out):
            k[(1,)](x, h, out, x.numel(), BLOCK=1024)
    """)
    task = Task("config", "/tmp/k.py", "k", "run", "/tmp/k.py", "run", "/tmp/k.py:run")
    p = propose("exp2", task, src)[0]
    # the loop-carried fp32 values and the upcast tile are rewritten, the subtraction kept first
    assert (
        "s = s * tl.exp2((m - m_new) * 1.4426950408889634) + tl.sum(tl.exp2((x - m_new) * 1.4426950408889634)"
        in p.source
    )
    assert "tl.math.exp2(-x * 1.4426950408889634)" in p.source
    # an unconverted load (its pointer's type), fp16 (scaled in fp16) and fp64 stay tl.exp
    assert "tl.exp(raw) + tl.exp(h) + tl.exp(d)" in p.source and "3 left as tl.exp" in p.description
    assert (
        propose("exp2", task, p.source.replace("tl.exp(raw) + tl.exp(h) + tl.exp(d) + ", "")) == []
    )
    assert propose("exp2", *example("rmsnorm")) == []  # no exponentials


def test_a_rewritten_statement_keeps_its_comments():
    src = textwrap.dedent("""
        import triton
        import triton.language as tl

        @triton.jit
        def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
            # the numerator, shifted for stability
            e = tl.exp(x - tl.max(x, axis=0))  # never overflows
            tl.store(out_ptr + offs, e / tl.sum(e, axis=0), mask=offs < n)

        def run(x, out):
            k[(1,)](x, out, x.numel(), BLOCK=1024)
    """)
    task = Task("config", "/tmp/k.py", "k", "run", "/tmp/k.py", "run", "/tmp/k.py:run")
    p = propose("exp2", task, src)[0]
    assert (
        "    # the numerator, shifted for stability\n"
        "    e = tl.exp2((x - tl.max(x, axis=0)) * 1.4426950408889634)  # never overflows\n"
    ) in p.source
    assert "# tanh(inner)" in propose("exp2", *example("gelu"))[0].source
    # a rewrite that copies a statement into a new branch and keeps it unchanged in the old one:
    # the comments stay with the unchanged original, not copied above the changed copy too
    tree = ast.parse(src)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "k")
    new = ast.parse(src).body[2]
    original = new.body[2]
    changed = ast.parse("e = tl.exp(x)").body[0]
    ast.copy_location(changed, original)
    new.body[2] = ast.If(test=ast.Name("FAST", ast.Load()), body=[changed], orelse=[original])
    out = Edits(src).replace_function(fn, ast.fix_missing_locations(new)).apply()
    assert "    if FAST:\n        e = tl.exp(x)\n    else:\n        # the numerator" in out
    assert out.count("# never overflows") == 1 and out.count("# the numerator") == 1


def test_int64_offsets_only_where_kb104_applies():
    task, source = example("softmax")
    p = propose("int64-offsets", task, source)[0]
    assert "row = tl.program_id(0).to(tl.int64)" in p.source
    assert propose("int64-offsets", task, p.source) == []
    assert propose("int64-offsets", *example("gelu")) == []


BLOCK_SUM = textwrap.dedent("""
    import torch, triton
    import triton.language as tl

    @triton.jit
    def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
        partial = tl.sum(x.to(tl.float32), axis=0)
        tl.atomic_add(out_ptr, partial)

    def run(x):
        out = torch.zeros(1, dtype=torch.float32, device=x.device)
        k[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
        return out
""")


def test_coarsen_atomics_only_where_programs_meet_in_the_same_output():
    task = Task("config", "/tmp/k.py", "k", "run", "/tmp/k.py", "run", "/tmp/k.py:run")
    p = propose("coarsen-atomics", task, BLOCK_SUM)  # a total sum: every program adds into out_ptr
    assert [m.knobs["ITERS"] for m in p] == [4, 8, 16]
    assert (
        "for it in tl.static_range(ITERS):" in p[0].source
        and "triton.cdiv(triton.cdiv(x.numel(), 256), 4)" in p[0].source
    )
    # each program owns its own output element: nothing to combine
    assert (
        propose(
            "coarsen-atomics",
            task,
            BLOCK_SUM.replace("atomic_add(out_ptr,", "atomic_add(out_ptr + pid,"),
        )
        == []
    )
    # masked-off elements are not zero: the blocks past the end would add -inf
    assert (
        propose("coarsen-atomics", task, BLOCK_SUM.replace("other=0.0", "other=float('-inf')"))
        == []
    )
    assert propose("coarsen-atomics", task, BLOCK_SUM.replace(", other=0.0", "")) == []
    assert propose("coarsen-atomics", task, BLOCK_SUM.replace("atomic_add", "atomic_max")) == []
    assert propose("coarsen-atomics", *example("softmax")) == []  # no atomics
    task_c, col_sum = example("col_sum")
    coarse = propose("coarsen-atomics", task_c, col_sum)[0]
    assert (
        "grid = (triton.cdiv(n_cols, 64), triton.cdiv(triton.cdiv(n_rows, 32), 4))" in coarse.source
    )
    assert (
        propose("coarsen-atomics", task_c, coarse.source) == []
    )  # already coarsened: it sums an accumulator


@pytest.mark.slow
def test_config_and_autotune_tune_a_pipelined_loops_depth_with_the_tiles(pool):
    """Once a streaming loop is pipelined, its depth is a knob of the configuration: proposals
    move it alone, the tiles alone, and both, in turns (run AG: the depth that pays depends on the
    tile); every loop gets the new depth; autotune makes it a constexpr each configuration sets,
    and that variant passes the harness."""
    task, source = example("cross_entropy")
    piped = propose("loop-stages", task, source)[0].source  # 3 deep
    loops = piped.count("num_stages=3)")
    walk = propose("config", task, piped)
    assert {m.knobs["loop_stages"] for m in walk} >= {2, 4, 5, 6}
    for m in walk:
        assert m.source.count(f"num_stages={m.knobs['loop_stages']})") == loops
    first = walk[:6]
    assert any(m.knobs["loop_stages"] == 3 for m in first) and any(
        m.knobs["loop_stages"] != 3 for m in first
    )

    task_c, col_sum = example("col_sum")
    strips = propose("own-columns", task_c, col_sum)[0].source
    tuned = propose("autotune", task_c, strips)[0].source
    assert "LOOP_STAGES: tl.constexpr = 3):" in tuned and "num_stages=LOOP_STAGES)" in tuned
    configs = tuned[tuned.index("configs=[") : tuned.index("key=")]
    assert (
        '"BLOCK_M": 32, "BLOCK_N": 64, "LOOP_STAGES": 3}, num_warps=4' in configs
    )  # the launch's own first
    assert len({c.split('"LOOP_STAGES": ')[1][0] for c in configs.split("triton.Config(")[1:]}) > 1
    report = verify(pool, task_c, tuned, "cpu")
    assert report.accepted, f"{report.stage}/{report.reason}: {report.message}"


def test_loop_stages_pipelines_streaming_loops_and_leaves_dot_loops_to_the_launch():
    """Triton 3.6 pipelines a loop without `tl.dot` only through `tl.range(..., num_stages=S)`:
    every such loop of the kernel gets the same depth, Triton's default first; a dot loop, an
    unrolled loop and a loop that loads nothing are left alone."""
    task, source = example("cross_entropy")
    proposals = propose("loop-stages", task, source)
    loops = source.count("in range(")
    assert loops and proposals[0].source.count("num_stages=3)") == loops
    assert sorted(int(p.source.split("num_stages=")[1][0]) for p in proposals) == [2, 3, 4, 5, 6]
    assert (
        propose("loop-stages", task, proposals[0].source) == []
    )  # pipelined: `config` retunes the depth
    assert (
        propose("loop-stages", *example("matmul")) == []
    )  # a dot loop: the launch's stages pipeline it
    assert propose("loop-stages", *example("col_sum")) == []  # no loop
    task_c, col_sum = example("col_sum")
    assert (
        propose("loop-stages", task_c, propose("coarsen-atomics", task_c, col_sum)[0].source) == []
    )  # unrolled
    task_k = Task("config", "/tmp/k.py", "k", "run", "/tmp/k.py", "run", "/tmp/k.py:run")
    no_load = BLOCK_SUM.replace(
        "    partial = tl.sum(x.to(tl.float32), axis=0)\n",
        "    partial = tl.sum(x.to(tl.float32), axis=0)\n    for i in range(n):\n        partial += i\n",
    )
    assert "for i in range(n):" in no_load and propose("loop-stages", task_k, no_load) == []


def test_own_columns_loops_over_the_grid_axis_it_can_count():
    task = Task("config", "/tmp/k.py", "k", "run", "/tmp/k.py", "run", "/tmp/k.py:run")
    (p,) = propose("own-columns", task, BLOCK_SUM)
    assert (
        "for pid in tl.range(1, tl.cdiv(n, BLOCK), num_stages=3):" in p.source
        and "k[(1,)](x, out" in p.source
    )
    assert "tl.store(out_ptr, partial)" in p.source and "atomic_add" not in p.source
    # the grid's block count must be the kernel's own: the same bound and the block's constexpr
    assert (
        propose(
            "own-columns",
            task,
            BLOCK_SUM.replace("triton.cdiv(x.numel(), 256)", "triton.cdiv(x.numel(), 128)"),
        )
        == []
    )
    assert (
        propose(
            "own-columns",
            task,
            BLOCK_SUM.replace("triton.cdiv(x.numel(), 256)", "triton.cdiv(x.numel() + 1, 256)"),
        )
        == []
    )
    assert (
        propose(
            "own-columns",
            task,
            BLOCK_SUM.replace("triton.cdiv(x.numel(), 256)", "x.numel() // 256"),
        )
        == []
    )
    # what a split reduction needs (as for coarsen-atomics), and a plain atomic
    assert (
        propose(
            "own-columns",
            task,
            BLOCK_SUM.replace("atomic_add(out_ptr,", "atomic_add(out_ptr + pid,"),
        )
        == []
    )
    assert propose("own-columns", task, BLOCK_SUM.replace("other=0.0", "other=float('-inf')")) == []
    assert (
        propose(
            "own-columns",
            task,
            BLOCK_SUM.replace(
                "atomic_add(out_ptr, partial)", "atomic_add(out_ptr, partial, sem='relaxed')"
            ),
        )
        == []
    )
    task_c, col_sum = example("col_sum")
    (own,) = propose("own-columns", task_c, col_sum)
    assert "grid = (triton.cdiv(n_cols, 64), 1)" in own.source
    assert "for pid_m in tl.range(1, tl.cdiv(n_rows, BLOCK_M), num_stages=3):" in own.source
    assert propose("own-columns", task_c, own.source) == []  # no atomic left
    assert (
        propose("own-columns", task_c, propose("coarsen-atomics", task_c, col_sum)[0].source) == []
    )
    cleaned = propose("launcher-cleanup", task_c, own.source)
    assert (
        cleaned and "out = torch.empty(n_cols" in cleaned[0].source
    )  # the kernel now writes every element


@pytest.mark.slow
def test_host_sync_variants_verify_and_still_catch_a_bad_target(pool):
    """Both rewrites of cross_entropy's `.item()` bounds check verify, and on an out-of-range
    target the merged check still raises the ValueError; the asserted one stops the call too (on
    the CPU at once; on a GPU at the next synchronisation)."""
    import importlib.util

    import torch

    task, source = example("cross_entropy")
    merged, asserted = propose("host-sync", task, source)
    assert "if ((target.max() >= n_cols) | (target.min() < 0)).item():" in merged.source
    assert "torch._assert_async(~((target.max() >= n_cols) | (target.min() < 0))" in asserted.source
    assert (
        "device-side assertion" in asserted.description and "same exception" in merged.description
    )
    for variant, error in ((merged, ValueError), (asserted, RuntimeError)):
        assert verify(pool, task, variant.source, "cpu").accepted
        spec = importlib.util.spec_from_loader("ce_variant", loader=None)
        mod = importlib.util.module_from_spec(spec)
        exec(compile(variant.source, task.file, "exec"), mod.__dict__)
        with pytest.raises(error, match="target index out of range"):
            mod.cross_entropy(torch.randn(2, 8), torch.tensor([3, 8]))


def test_host_sync_refuses_checks_it_cannot_move_to_the_device():
    task, source = example("cross_entropy")
    check = '    if target.max().item() >= n_cols or target.min().item() < 0:\n        raise ValueError("target index out of range")\n'
    assert check in source
    # the body does more than raise: leave it
    assert (
        propose(
            "host-sync",
            task,
            source.replace(
                check, check.replace("        raise", "        print(1)\n        raise")
            ),
        )
        == []
    )
    # no .item(): nothing to move
    assert (
        propose(
            "host-sync",
            task,
            source.replace(check, '    if n_cols > 10**9:\n        raise ValueError("big")\n'),
        )
        == []
    )
    # a sync buried in arithmetic, or a comparison without a sync, cannot become a device expression
    assert (
        propose(
            "host-sync",
            task,
            source.replace("target.max().item() >= n_cols", "target.max().item() + 1 > n_cols"),
        )
        == []
    )
    assert propose("host-sync", task, source.replace("target.min().item() < 0", "n_cols < 0")) == []
    # one sync: only the asserted form (nothing to merge)
    one = propose("host-sync", task, source.replace(" or target.min().item() < 0", ""))
    assert [("_assert_async" in m.source) for m in one] == [True]


def test_edits_keywords_and_trailing_commas():
    src = "f(\n    a,\n    b=1,\n)\ng(x)\n"
    tree = ast.parse(src)
    f, g = (s.value for s in tree.body)
    out = (
        Edits(src)
        .add_keyword(f, "c", "2")
        .add_keyword(f, "d", "3")
        .add_keyword(g, "y", "4")
        .apply()
    )
    assert ast.dump(ast.parse(out)) == ast.dump(ast.parse("f(a, b=1, c=2, d=3)\ng(x, y=4)\n"))
    out = Edits(src).remove_keyword(f, "b").apply()
    assert ast.dump(ast.parse(out)) == ast.dump(ast.parse("f(a)\ng(x)\n"))


def test_overlap_checks_fork_and_join_around_the_launch_and_refuse_racing_writes():
    """The checks move into a side-stream block opened before them and joined right after the
    launch (so the call returns ordered after them); a check on a tensor the launcher or the
    kernel writes afterwards would race with that write, and is left alone."""
    task, source = example("cross_entropy")
    asserted = propose("host-sync", task, source)[-1].source
    (p,) = propose("overlap-checks", task, asserted)
    body = p.source.split("def cross_entropy(")[1]
    fork, check = body.index("check_stream.wait_stream("), body.index("torch._assert_async(")
    launch, join = body.index("cross_entropy_kernel[("), body.index(".wait_stream(check_stream)")
    assert (
        fork
        < body.index("with torch.cuda.stream(check_stream):")
        < check
        < launch
        < join
        < body.index("return loss")
    )
    assert (
        "check_stream = torch.cuda.Stream(device=target.device, priority=-1) if target.is_cuda else None"
        in body
    )
    ast.parse(p.source)
    clamped = asserted.replace(
        "    loss = torch.empty(", "    target.clamp_(0, n_cols - 1)\n    loss = torch.empty("
    )
    assert propose("overlap-checks", task, clamped) == []
    assert propose("overlap-checks", task, source) == []  # no device-side check to move
    # a check that reads the kernel's output (written while the check would run) is not moved
    reads_output = asserted.replace(
        "    loss = torch.empty(n_rows, dtype=torch.float32, device=logits.device)\n", ""
    )
    reads_output = reads_output.replace(
        "    torch._assert_async(",
        "    loss = torch.empty(n_rows, dtype=torch.float32, "
        "device=logits.device)\n    torch._assert_async(loss.isfinite().all())\n"
        "    torch._assert_async(",
        1,
    )
    assert "loss.isfinite" in reads_output and propose("overlap-checks", task, reads_output) == []
    # the stream follows a tensor argument's device, never a scalar one's
    scalar_first = asserted.replace(
        "def cross_entropy(logits: torch.Tensor, target: torch.Tensor)",
        "def cross_entropy(logits: torch.Tensor, target: torch.Tensor, limit: int = 0)",
    )
    scalar_first = scalar_first.replace("(target.min() < 0)", "(target.min() < limit)")
    only_scalar = scalar_first.replace(
        "(target.max() >= n_cols) | (target.min() < limit)", "limit < 0"
    )
    assert "device=target.device" in propose("overlap-checks", task, scalar_first)[0].source
    assert propose("overlap-checks", task, only_scalar) == []


def test_coarsen_programs_folds_consecutive_programs_and_only_exact_divisors():
    task = Task("config", "/tmp/k.py", "k", "run", "/tmp/k.py", "run", "/tmp/k.py:run")

    def module(body: str, grid: str = "(x.shape[0],)", decorator: str = "@triton.jit") -> str:
        return (
            textwrap.dedent("""
            import torch, triton
            import triton.language as tl

            DECORATOR
            def k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            BODY

            def run(x, y):
                k[GRID](x, y, x.shape[1], BLOCK=64)
        """)
            .replace("BODY", textwrap.indent(textwrap.dedent(body), "    "))
            .replace("GRID", grid)
            .replace("DECORATOR", decorator)
        )

    row = """
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n + cols, mask=cols < n)
        tl.store(y_ptr + row * n + cols, x * 2, mask=cols < n)
    """
    proposals = propose("coarsen-programs", task, module(row))
    assert [p.knobs for p in proposals] == [{"ITEMS": n} for n in (2, 4, 8, 16)]
    p = proposals[1]
    tree = ast.parse(p.source)
    kernel = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "k")
    assert ast.unparse(kernel.args).endswith("ITEMS: tl.constexpr=1")
    first, loop = kernel.body
    assert ast.unparse(first) == "pid_first = tl.program_id(0)"
    assert ast.unparse(loop.iter) == "tl.static_range(ITEMS)"
    assert ast.unparse(loop.body[0]) == "pid_item = pid_first * ITEMS + item"
    assert ast.unparse(loop.body[1]) == "row = pid_item"
    launcher = ast.unparse(
        next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "run")
    )
    assert "items = max(min(x.shape[0] & -x.shape[0], 4), 1)" in launcher
    assert "k[x.shape[0] // items,](x, y, x.shape[1], BLOCK=64, ITEMS=items)" in launcher
    # The launcher's choice, run as written, covers exactly the programs the draft launched.
    choice = next(
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "items"
    )
    for count in (1, 6, 12, 15, 64, 4096, 3000 * 40):
        x = types.SimpleNamespace(shape=(count, 7))
        items = eval(compile(ast.Expression(choice), "launcher", "eval"), {"x": x})
        assert count % items == 0 and items in (1, 2, 4) and (count % 4 or items == 4)
    assert propose("coarsen-programs", task, p.source) == []  # already coarsened: no nesting
    widened = propose("int64-offsets", task, p.source)
    assert widened and "pid_first = tl.program_id(0).to(tl.int64)" in widened[0].source
    assert propose("coarsen-programs", task, widened[0].source) == []  # nor once widened
    # A parameter added after one with a default goes after that default (a search once nested
    # this rewrite and wrote `ITEMS: tl.constexpr, ITEMS_2: tl.constexpr=1=1`).
    fn = next(n for n in ast.parse(p.source).body if isinstance(n, ast.FunctionDef))
    grown = copy.deepcopy(fn)
    grown.args.args.append(ast.arg("EXTRA", ast.parse("tl.constexpr").body[0].value))
    grown.args.defaults.append(ast.Constant(2))
    header = Edits(p.source).replace_function(fn, ast.fix_missing_locations(grown)).apply()
    assert "BLOCK: tl.constexpr, ITEMS: tl.constexpr=1, EXTRA: tl.constexpr=2):" in header
    ast.parse(header)

    refused = {
        "a grid-stride loop": module("""
            for row in tl.range(tl.program_id(0), n, tl.num_programs(0)):
                tl.store(y_ptr + row, 1.0)
        """),
        "an early return": module("""
            row = tl.program_id(0)
            if row >= n:
                return
            tl.store(y_ptr + row, 1.0)
        """),
        "an axis that is not a literal": module("""
            row = tl.program_id(BLOCK // 64 - 1)
            tl.store(y_ptr + row, 1.0)
        """),
        "only axis 1 read": module(
            """
            col = tl.program_id(1)
            tl.store(y_ptr + col, 1.0)
        """,
            grid="(1, x.shape[1])",
        ),
        "a grid computed by a function": module(row, grid="lambda meta: (x.shape[0],)"),
        "an autotuned kernel": module(
            row,
            decorator=(
                "@triton.autotune(configs=[triton.Config({}, num_warps=4)], key=['n'])\n@triton.jit"
            ),
        ),
    }
    for what, source in refused.items():
        assert propose("coarsen-programs", task, source) == [], what
