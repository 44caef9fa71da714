"""The original as the oracle. Of accuracy: an original that deviates from its reference within
10x the tolerance (another summation order), or for fp32 outputs within bf16's relative
tolerance (TF32 in `tl.dot`), stands, with a note saying how far and where, and candidates are
held to no worse than it; a grossly wrong original is refused with
how far off it is (`verify` and the search share the verdict: one harness). Of behaviour: what
the original does on a case (PyTorch ops, launches) is learned on that case before a candidate
is blamed for doing the same."""

from __future__ import annotations

import textwrap

from kernelbrain.engine.evaluate.verify import run_harness, verify
from kernelbrain.engine.task import find_task

from .test_harness_errors import KERNEL, workspace

KERNEL_LINE = "mask=offs < n) * 2"


def scaled(factor: str) -> str:
    """The scale kernel multiplying by `factor` where the reference multiplies by 2."""
    return KERNEL.replace("FACTOR", "2").replace(KERNEL_LINE, f"mask=offs < n) * {factor}")


def test_an_original_slightly_off_its_reference_stands_and_bounds_candidates(pool, tmp_path):
    # 3e-4 relative off an fp32 reference (rtol 1e-4): within 5x the tolerance
    ws = workspace(tmp_path, (KERNEL_LINE, "mask=offs < n) * 2.0006"))
    task = find_task(ws / "ops" / "scale.py", "scale_kernel")
    original = run_harness(pool, task, None, "cpu")
    assert original.accepted, original.message
    assert len(original.notes) == 1 and "up to 5x the tolerance" in original.notes[0]
    assert "no worse than the original" in original.notes[0]
    exact = verify(pool, task, scaled("2"), "cpu")
    assert exact.accepted, exact.message  # more accurate than the original: fine
    twice_as_far = verify(pool, task, scaled("2.0012"), "cpu")
    assert twice_as_far.accepted, twice_as_far.message
    assert any("no worse than the original" in c.message for c in twice_as_far.cases)
    ten_times_as_far = verify(pool, task, scaled("2.006"), "cpu")
    assert (ten_times_as_far.accepted, ten_times_as_far.reason) == (False, "mismatch")


def test_an_fp32_original_as_far_off_as_tf32_stands(pool, tmp_path):
    """2e-3 relative off an fp32 reference, as TF32 dots land: beyond 10x fp32's tolerance,
    within bf16's: the original stands and bounds the candidates."""
    ws = workspace(tmp_path, (KERNEL_LINE, "mask=offs < n) * 2.004"))
    task = find_task(ws / "ops" / "scale.py", "scale_kernel")
    original = run_harness(pool, task, None, "cpu")
    assert original.accepted, original.message
    assert "up to bf16's tolerance" in original.notes[0], original.notes
    assert verify(pool, task, scaled("2"), "cpu").accepted
    assert not verify(pool, task, scaled("2.02"), "cpu").accepted  # 10x further off


TF32_MATMUL = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl


    @triton.jit
    def _tf32(x):
        # what the tensor cores keep of an fp32 operand: a 10-bit mantissa (truncated)
        return (x.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)


    @triton.jit
    def mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK: tl.constexpr, BLOCK_K: tl.constexpr):
        rm = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        rn = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        rk = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
        for k in range(0, K, BLOCK_K):
            a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :],
                        mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
            b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :],
                        mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc += tl.dot(_tf32(a), _tf32(b))
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


    def mm(a, b):
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty((M, N), device=a.device, dtype=torch.float32)
        mm_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 32))](a, b, c, M, N, K, BLOCK=32, BLOCK_K=32)
        return c


    def mm_ref(a, b):
        return a @ b


    def mm_inputs(device="cuda"):
        return [(torch.randn(512, 512, device=device), torch.randn(512, 512, device=device))]


    def mm_small_inputs(device="cpu"):
        return [(torch.randn(33, 96, device=device), torch.randn(96, 70, device=device)),
                (torch.randn(48, 256, device=device), torch.randn(256, 40, device=device))]
""")


def test_a_tf32_matmul_original_stands_where_its_outputs_near_zero_are_off(pool, tmp_path):
    """TF32's error follows the operands, not each output: outputs near zero are off by as much
    as large ones (on the H200 the corpus matmul was 0.029 off with outputs of mean 7.8). The
    floor's atol follows the output's magnitude, so the original stands; a candidate ten times as
    far off is still refused."""
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "mm.py").write_text(TF32_MATMUL)
    (tmp_path / "kernelbrain.toml").write_text(
        '[[tasks]]\nfile = "ops/mm.py"\nkernel = "mm_kernel"\nentry = "mm"\n'
        'reference = "mm_ref"\ninputs = "mm_inputs"\nsmall_inputs = "mm_small_inputs"\n'
    )
    task = find_task(tmp_path / "ops" / "mm.py", "mm_kernel")
    original = run_harness(pool, task, None, "cpu")
    assert original.accepted, original.message
    assert "bf16's tolerance" in original.notes[0], original.notes
    # exact fp32 dots: more accurate than the original, fine
    exact = TF32_MATMUL.replace("tl.dot(_tf32(a), _tf32(b))", "tl.dot(a, b)")
    assert verify(pool, task, exact, "cpu").accepted
    # operands cut to 4 mantissa bits (bf16 keeps 7): far worse than the original, refused
    coarse = TF32_MATMUL.replace("& -8192", "& -524288")
    assert not verify(pool, task, coarse, "cpu").accepted


def test_a_grossly_wrong_original_is_refused_with_how_far_off_it_is(pool, tmp_path):
    ws = workspace(tmp_path, (KERNEL_LINE, "mask=offs < n) * 2.2"))
    task = find_task(ws / "ops" / "scale.py", "scale_kernel")
    original = run_harness(pool, task, None, "cpu")
    assert (original.accepted, original.reason) == (False, "mismatch")
    assert "further off the reference than the accuracy oracle allows" in original.message
    assert original.notes == []


def test_what_the_original_does_is_learned_on_the_case_itself(pool, tmp_path):
    """An original that computes with PyTorch only above a size (here a rescale past 100
    elements) does so on the sweep's larger cases, not on the first small case: a copy of it is
    accepted (its ops are the original's on that case), while a candidate that adds PyTorch
    compute the original never does is still refused."""
    branch = (
        "        return out\n",
        "        if x.numel() > 100:\n            out = out * 1.0\n        return out\n",
    )
    ws = workspace(tmp_path, tuple(s.replace("        ", "    ") for s in branch))
    task = find_task(ws / "ops" / "scale.py", "scale_kernel")
    source = (ws / "ops" / "scale.py").read_text()
    copy = verify(pool, task, source + "\n# a copy\n", "cpu")
    assert copy.accepted, copy.message
    added = source.replace("    return out\n", "    out = out + 0.0\n    return out\n", 1)
    assert added != source
    refused = verify(pool, task, added, "cpu")
    assert (refused.accepted, refused.reason) == (False, "torch-fallback"), refused.message


def test_a_finite_value_where_the_reference_is_nan_is_a_mismatch_not_a_crash():
    """+inf inputs make some references NaN where a kernel gives a finite value: a mismatch that
    names the place, not an IndexError from looking for the worst element."""
    import torch

    from kernelbrain.engine.worker.compare import compare

    got = torch.tensor([1.0, 2.0, 3.0])
    want = torch.tensor([1.0, float("nan"), 3.0])
    result = compare(got, want)
    assert not result.ok and result.reason == "mismatch" and "(1,)" in result.message
