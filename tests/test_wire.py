"""Values between the judge and a candidate's runner: what crosses the pipe arrives identical
(layout, dtype, bits), large messages survive many partial reads, and a runner's answer names
unchanged arguments and repeated outputs instead of resending them, markers the judge turns
back into the values and refuses when they point nowhere."""

from __future__ import annotations

import os
import threading

import pytest
import torch

from kernelbrain.engine import protocol as m
from kernelbrain.engine.task.spec import Task
from kernelbrain.engine.worker import values as wire
from kernelbrain.engine.worker.compare import identical
from kernelbrain.engine.worker.runs import RemoteRunner, Run, compact_runs

TASK = Task("config", "k.py", "k", "f", "ref.py", "g", "h")


def _values():
    base = torch.randn(6, 10)
    return (
        base,
        base[:, ::3],  # strided
        base.t(),  # column-major
        torch.randn(5, dtype=torch.float64).to(torch.bfloat16),
        torch.empty(0, 4),
        torch.arange(7, dtype=torch.int32),
        torch.tensor([True, False]),
        [torch.randn(3, requires_grad=True), 2.5, None, "x"],
        17,
    )


def _through_pipe(message):
    r, w = os.pipe()
    m.widen_pipe(w)
    writer = threading.Thread(target=m.write_message, args=(w, message))
    writer.start()
    try:
        return m.read_request(r)
    finally:
        writer.join()
        os.close(r)
        os.close(w)


def test_values_cross_a_real_pipe_identical_in_layout_and_bits():
    values = _values()
    got = _through_pipe(m.RunCandidate(TASK, "src", [wire.encode(values)]))
    back = wire.decode(got.cases[0])
    assert identical(back, values)
    assert back[1].stride() == (10, 3) and back[2].stride() == (1, 10)
    back[0].add_(1)  # the decoded tensor owns writable memory, not the message's buffer
    assert not identical(wire.decode(got.cases[0]), back)


def test_a_large_message_survives_many_partial_reads():
    big = torch.randn(8 << 20)  # 32 MiB: hundreds of pipe-sized reads
    got = _through_pipe(m.RunCandidate(TASK, "src", [wire.encode(big)]))
    assert torch.equal(wire.decode(got.cases[0]), big)


def test_a_byte_count_that_does_not_fit_the_shape_is_refused():
    value = wire.encode(torch.randn(4))
    value.data = memoryview(bytes(value.data)[:-1])
    with pytest.raises(wire.WireError, match="15 bytes for 4 elements"):
        wire.decode(value)


def _run(output, args_after, config=""):
    return Run(config, output, args_after, [], 1, [])


def test_the_runner_names_unchanged_arguments_and_repeated_outputs_and_the_judge_restores_them():
    x, y = torch.randn(64), torch.randn(64)
    out = x + y
    scribbled = y.clone()
    scribbled[3] = 0.0
    runs = [
        _run(out.clone(), (x.clone(), y.clone()), "a"),
        _run(out.clone(), (x.clone(), y.clone()), "a"),  # a repeat with the same bits
        _run(out + 1e-6, (x.clone(), scribbled), "b"),  # other bits, and one argument changed
        _run(out.t().clone(), (x.clone(), y.clone()), "b"),  # a view of another layout: whole
    ]
    compact = compact_runs((x, y), runs)
    assert [type(r.output) for r in compact] == [
        m.TensorValue,
        m.SameOutput,
        m.TensorValue,
        m.SameOutput,  # a 1-D transpose keeps its layout: identical to run 0
    ]
    assert compact[1].output.run == 0
    assert all(isinstance(a, m.Unchanged) for r in compact[:2] for a in r.args_after)
    assert isinstance(compact[2].args_after[0], m.Unchanged)
    assert isinstance(compact[2].args_after[1], m.TensorValue)

    judge = RemoteRunner(None, "cpu", None)
    restored = judge._expand((x, y), compact)
    for before, after in zip(runs, restored):
        assert identical(after.output, before.output)
        assert identical(after.args_after, tuple(before.args_after))
        assert after.config == before.config
    assert restored[0].args_after[0] is x  # the judge's own argument, not a copy


def test_a_strided_output_is_not_named_the_same_as_a_contiguous_one():
    a = torch.randn(4, 6)
    runs = [_run(a.clone(), ()), _run(a.t().contiguous().t(), ())]
    compact = compact_runs((), runs)
    assert isinstance(compact[1].output, m.TensorValue)  # same bits, other strides


@pytest.mark.parametrize(
    "mangle, message",
    [
        (lambda r: setattr(r[0], "output", m.SameOutput(0)), "not one before it"),
        (lambda r: setattr(r[1], "output", m.SameOutput(5)), "not one before it"),
        (lambda r: r[0].args_after.pop(), "1 arguments for a case of 2"),
    ],
)
def test_markers_that_point_nowhere_are_refused(mangle, message):
    x, y = torch.randn(8), torch.randn(8)
    compact = compact_runs((x, y), [_run(x + y, (x, y)), _run(x + y, (x, y))])
    mangle(compact)
    with pytest.raises(wire.WireError, match=message):
        RemoteRunner(None, "cpu", None)._expand((x, y), compact)
