"""The interpreter compatibility layer on the CPU: kernels that Triton 3.6's interpreter gets
wrong (float scalars, libdevice, bf16) compute what PyTorch computes on the same inputs, in a
process that runs them as the CPU worker does; what the layer does not cover says so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from kernelbrain.engine.worker import interpreter_compat as compat

FIXTURES = Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import compat_kernels  # noqa: E402


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory) -> dict[str, torch.Tensor]:
    out = tmp_path_factory.mktemp("compat") / "out.pt"
    subprocess.run(
        [sys.executable, str(FIXTURES / "compat_kernels.py"), str(out)], check=True, timeout=300
    )
    return torch.load(out)


def test_float_scalars_are_fp32_scalars(interpreted):
    x = compat_kernels.inputs()["x"]
    torch.testing.assert_close(interpreted["float_scalar"], x * 0.375 + 0.375)


def test_libdevice_by_name_and_by_module(interpreted):
    x = compat_kernels.inputs()["x"]
    want = torch.tanh(x) + torch.erf(x) + torch.exp2(x * 0.5) + torch.rsqrt(x.abs() + 1.0)
    torch.testing.assert_close(interpreted["libdevice"], want, rtol=1e-6, atol=1e-6)


def test_bf16_computes_and_rounds_as_pytorch_does(interpreted):
    t = compat_kernels.inputs()
    a, b = t["a16"], t["b16"]
    assert torch.equal(interpreted["bf16"], torch.where(a > b, a * b - a, a + b))
    assert torch.equal(interpreted["bf16_reductions"], torch.stack([a.max(), b.min()]))
    assert torch.equal(interpreted["cast"], (t["x"] * 3.0).to(torch.bfloat16))
    torch.testing.assert_close(interpreted["bf16_dot"], t["ma"].float() @ t["mb"].float())


def test_a_reduction_with_its_own_combine_keeps_order_nans_and_ties(interpreted):
    """Combined pairwise over whole slices (Inductor's NaN-propagating max took 7.7 s a call one
    element at a time): the first and last elements, a NaN, the lower index of a tie."""
    x = compat_kernels.inputs()["rows"]
    nan_max, first, last, argmax = interpreted["own_combine"].view(4, 4)
    assert torch.isnan(nan_max[1]) and torch.equal(nan_max[[0, 2, 3]], x[[0, 2, 3]].amax(1))
    assert torch.equal(first, x[:, 0].nan_to_num(0.0)) or torch.equal(first, x[:, 0])
    assert torch.equal(last, x[:, -1])
    assert argmax[2] == 5 and argmax[3] == 0 and argmax[0] == x[0].argmax()


def test_round_to_nearest_even():
    values = np.array([1.0 + 2**-8, 1.0 + 3 * 2**-8, -2.5, np.nan, np.inf], dtype=np.float32)
    got = compat.bf16_to_f32(compat.f32_to_bf16(values))
    want = torch.from_numpy(values).to(torch.bfloat16).float().numpy()
    np.testing.assert_array_equal(got, want)


def test_libdevice_symbols_map_to_numpy_or_say_they_cannot():
    assert compat.libdevice_function("__nv_tanhf") is np.tanh
    assert compat.libdevice_function("__nv_fast_expf") is np.exp
    assert compat.libdevice_function("__nv_fdiv_rn") is np.divide
    assert compat.libdevice_function("__nv_erfinvf") is None

    class Handle:
        data = np.zeros(3, dtype=np.float32)

    import triton.language as tl

    with pytest.raises(compat.InterpreterGap, match="erfinv.*GPU run computes it"):
        compat._extern_elementwise(None, "", "", "__nv_erfinvf", [Handle()], tl.float32, True)


KERNEL_ERRORS = {
    "a name the kernel never defines": (
        "row_max = tl.max(m, axis=0)",
        "row_max = tl.max(m_undefined, axis=0)",
        "NameError: name 'm_undefined' is not defined",
    ),
    "a triton.language check the compiler makes too": (
        "cols = start + tl.arange(0, BLOCK_SIZE)",
        "cols = start + tl.arange(0, 3)",
        "ValueError: arange's range must be a power of 2",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", KERNEL_ERRORS)
def test_a_kernels_own_error_is_the_kernels_with_its_line(pool, kind):
    """Not an interpreter limitation ("on a GPU it compiles and runs" would be false): the
    candidate's failure, naming the error and the line that raised it."""
    from kernelbrain.engine.evaluate.verify import verify
    from kernelbrain.engine.task import find_task

    from .conftest import EXAMPLES

    old, new, error = KERNEL_ERRORS[kind]
    path = EXAMPLES / "ops" / "softmax.py"
    source = path.read_text()
    assert old in source
    candidate = source.replace(old, new, 1)
    line = next(i for i, text in enumerate(candidate.splitlines(), 1) if new in text)
    report = verify(pool, find_task(path, "softmax_kernel"), candidate, "cpu", timing=False)
    assert not report.accepted and report.reason == "exception", report.message
    assert error in report.message and f"at line {line} (`{new.strip()}`)" in report.message
    assert "interpreter" not in report.message.split("\n")[0]


def test_device_guards_and_side_streams_do_nothing_without_a_gpu():
    """Launchers written for several GPUs (`with torch.cuda.device(i):`, `device_of(x)`) and a
    check overlapped on a side stream (`with torch.cuda.stream(None):`) run on the interpreter;
    torch's own `isinstance(d, torch.cuda.device)` still needs the guard to be a type."""
    code = (
        "import torch\n"
        "from kernelbrain.engine.worker.interpreter_compat import install_device_guards\n"
        "install_device_guards(); install_device_guards()\n"
        "x = torch.ones(3)\n"
        "with torch.cuda.device(x.device.index), torch.cuda.device_of(x):\n"
        "    with torch.cuda.stream(None):\n"
        "        y = x + 1\n"
        "assert isinstance(torch.cuda.device_of(x), torch.cuda.device)\n"
        "print(float(y.sum()))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "6.0"
