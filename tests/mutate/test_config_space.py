"""The `config-space` mutator."""

from __future__ import annotations

from kernelbrain.engine.evaluate.verify import verify
from kernelbrain.engine.mutate import MutationContext
from kernelbrain.engine.task import find_task

from .helpers import LAUNCHER_CONSTANT, MUTATORS, example, propose, suite_matmul


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


def test_what_torch_compile_chose_is_proposed_first_where_it_maps_onto_the_launch():
    """Inductor's configuration for the reference's kernel (from the lowering) comes before the
    walk: a pointwise `XBLOCK` onto the one tile, a template's `BLOCK_M/N/K` onto the dot's tiles
    by axis (`GROUP_M` is no tile), warps and, where stages matter, stages; a configuration that
    maps onto nothing new is not proposed."""
    task, source = example("gelu")  # BLOCK=64 at 1 warp
    pointwise = {"XBLOCK": 1024, "num_warps": 4, "num_stages": 1}
    first, *rest = MUTATORS["config"].propose(MutationContext(task, source, suggested=[pointwise]))
    assert first.knobs == {"BLOCK": 1024, "num_warps": 4}
    assert first.description.endswith("(torch.compile's choice for the reference)")
    assert "BLOCK=1024" in first.source and "triton.cdiv(n, 1024)" in first.source
    assert first.knobs not in [m.knobs for m in rest]
    assert not any("torch.compile" in m.description for m in rest)

    task, source = example("matmul")  # 64 x 64 x 32 tiles
    template = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8,
                "num_stages": 4}  # fmt: skip
    first = next(iter(MUTATORS["config"].propose(MutationContext(task, source,
                                                                 suggested=[template]))))  # fmt: skip
    assert first.knobs == {
        "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "num_warps": 8, "num_stages": 4
    }  # fmt: skip
    # the launch's own configuration, suggested, is nothing new: the walk as without it
    own = {"XBLOCK": 64, "num_warps": 1, "num_stages": 3}
    task, source = example("gelu")
    assert [m.knobs for m in MUTATORS["config"].propose(MutationContext(task, source,
            suggested=[own]))][:5] == [m.knobs for m in propose("config", task, source)][:5]  # fmt: skip
