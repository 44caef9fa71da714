"""The `autotune` mutator."""

from __future__ import annotations

import pytest

from kernelbrain.engine.evaluate.verify import verify

from .helpers import example, propose


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
