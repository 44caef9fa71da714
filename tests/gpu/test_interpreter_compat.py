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
    # Compiled, the bf16 `a * b - a` is rounded once (an FMA); the interpreter rounds after each
    # operation, as the kernel is written. On these inputs the two roundings differ by one bf16
    # ulp on 116 of 1000 elements: within one ulp, 2**-7 of the value.
    torch.testing.assert_close(interpreted["bf16"], compiled["bf16"], rtol=2**-7, atol=0.0)
    # The GPU contracts `x * alpha + alpha` into one FMA: one rounding fewer.
    torch.testing.assert_close(
        interpreted["float_scalar"], compiled["float_scalar"], rtol=2e-7, atol=2e-7
    )
    # libdevice's fp32 functions and the tensor cores' accumulation order: a few ulps apart.
    torch.testing.assert_close(
        interpreted["libdevice"], compiled["libdevice"], rtol=4e-6, atol=4e-6
    )
    torch.testing.assert_close(interpreted["bf16_dot"], compiled["bf16_dot"], rtol=1e-5, atol=1e-5)
