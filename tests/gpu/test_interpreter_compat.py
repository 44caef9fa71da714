"""The interpreter compatibility layer against compiled Triton on a GPU: each kernel of
`tests/fixtures/compat_kernels.py` gives the same result interpreted on the CPU (the layer
installed) as compiled on the GPU (bf16 casts and reductions bit for bit, bf16 arithmetic within
one rounding, fp32 to a few ulps)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

FIXTURES = Path(__file__).parent.parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
import compat_kernels  # noqa: E402


@pytest.mark.gpu
def test_interpreted_results_match_compiled_ones(tmp_path):
    out = tmp_path / "interpreted.pt"
    subprocess.run(
        [sys.executable, str(FIXTURES / "compat_kernels.py"), str(out)], check=True, timeout=300
    )
    interpreted = torch.load(out)
    compiled = compat_kernels.run_all("cuda")
    assert set(interpreted) == set(compiled)
    for name in ("bf16_reductions", "cast"):
        assert torch.equal(interpreted[name], compiled[name]), name
    # Compiled, the bf16 `a * b - a` is rounded once (an FMA); the interpreter rounds the product
    # first, as the kernel is written. The two differ by at most that rounding (half a bf16 ulp
    # of the product, 2**-8 of it) plus one ulp of the result: 116 of these 1000 elements differ,
    # 10 of them by more than 2**-7 of the result, where the subtraction cancels.
    t = compat_kernels.inputs()
    a, b = t["a16"].float(), t["b16"].float()
    got, want = interpreted["bf16"].float(), compiled["bf16"].cpu().float()
    bound = (a * b).abs() * 2**-8 + want.abs() * 2**-7
    assert ((got - want).abs() <= bound).all(), (got - want).abs().div(bound).max()
    # The GPU contracts `x * alpha + alpha` into one FMA: one rounding fewer.
    torch.testing.assert_close(
        interpreted["float_scalar"], compiled["float_scalar"], rtol=2e-7, atol=2e-7
    )
    # libdevice's fp32 functions and the tensor cores' accumulation order: a few ulps apart.
    torch.testing.assert_close(
        interpreted["libdevice"], compiled["libdevice"], rtol=4e-6, atol=4e-6
    )
    torch.testing.assert_close(interpreted["bf16_dot"], compiled["bf16_dot"], rtol=1e-5, atol=1e-5)
