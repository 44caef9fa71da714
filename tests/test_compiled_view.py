"""The compiled view without a GPU (AOT for sm_90): load widths follow alignment, spills appear
when the register budget forces them, the matmul uses tensor cores."""

from __future__ import annotations

import pytest

from kernelbrain.engine.api.compiled_view import CompiledViewRequest, summary
from kernelbrain.engine.evaluate.pool import WorkerPool
from kernelbrain.engine.profile.view import CompiledViewService
from kernelbrain.engine.worker.compiled import sass_facts

from .conftest import EXAMPLES

COPY = """import triton
import triton.language as tl

@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs + SHIFT, mask=offs < n), mask=offs < n)

def run(x, out):
    copy_kernel[(1,)](x, out, x.numel(), BLOCK=1024)
"""


@pytest.fixture(scope="module")
def service():
    with WorkerPool() as pool:
        yield CompiledViewService(pool)


def view(service, path: str, source: str, **kw):
    (v,) = service.view(CompiledViewRequest(path, source, **kw)).views
    return v


def test_128_bit_loads_only_where_alignment_allows(service, tmp_path):
    aligned = view(service, str(tmp_path / "a.py"), COPY.replace("SHIFT", "0"))
    shifted = view(service, str(tmp_path / "b.py"), COPY.replace("SHIFT", "1"))
    assert aligned.source == "launch site" and "assumed" in aligned.note
    assert set(aligned.facts[0].global_load_bits) == {"128"}
    assert "128" not in shifted.facts[0].global_load_bits and set(
        shifted.facts[0].global_load_bits
    ) == {"32"}
    assert "KB202" not in [f.code for f in aligned.findings]


def test_instructions_grow_with_the_elements_each_thread_handles(service, tmp_path):
    """A loop-free kernel's SASS is each thread's instruction stream: 4x the elements a thread,
    about 4x the instructions (what the cost model's issue floor reads)."""
    narrow = view(service, str(tmp_path / "a.py"), COPY.replace("SHIFT", "0"))
    wide = view(
        service,
        str(tmp_path / "b.py"),
        COPY.replace("SHIFT", "0").replace("BLOCK=1024)", "BLOCK=4096)"),
    )
    assert (
        0 < narrow.facts[0].instructions
        and 2.5 * narrow.facts[0].instructions < wide.facts[0].instructions
    )
    assert f"{wide.facts[0].instructions} SASS instructions" in summary(wide)  # the hover's line


def test_loop_instructions_are_those_between_a_backward_branch_and_its_target(service, tmp_path):
    """The first-draft softmax loops over its row three times: most of its SASS sits in those
    loops; a loop-free copy has none. The hover shows both counts."""
    copy = view(service, str(tmp_path / "a.py"), COPY.replace("SHIFT", "0")).facts[0]
    path = EXAMPLES / "ops" / "softmax.py"
    draft_view = view(service, str(path), path.read_text())
    draft = draft_view.facts[0]
    assert copy.instructions > 0 and copy.loop_instructions == 0
    assert 0.5 * draft.instructions < draft.loop_instructions < draft.instructions
    assert (
        f"{draft.instructions} SASS instructions ({draft.loop_instructions} in loops)"
        in summary(draft_view)
    )


# cuobjdump -sass as it prints sm_90 code: a forward branch over the loop, a four-instruction loop
# closed by a backward branch, a padding NOP inside it, and the trailing self-branch.
SASS = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;         /* 0x00000a0000017a02 */
        /*0010*/              @!P1 BRA 0x60 ;                     /* 0x0000000400309947 */
        /*0020*/                   LDG.E.U16 R2, desc[UR4][R4.64] ;  /* 0x000000040402798 */
        /*0030*/                   NOP ;                          /* 0x0000000000007918 */
        /*0040*/                   FMNMX R3, R2, R3, !PT ;        /* 0x0000000302037209 */
        /*0050*/              @!P0 BRA 0x20 ;                     /* 0xfffffffc00148947 */
        /*0060*/                   EXIT ;                         /* 0x000000000000794d */
        /*0070*/                   BRA 0x70;                      /* 0xfffffffc00fc7947 */
"""


def test_sass_loop_bodies_are_the_span_of_backward_branches():
    *_, instructions, in_loops = sass_facts(SASS)
    assert (instructions, in_loops) == (
        7,
        3,
    )  # NOPs count in neither; forward and self branches open no loop


def test_spills_when_maxnreg_forces_them(service, tmp_path):
    source = (
        (EXAMPLES / "ops" / "softmax.py")
        .read_text()
        .replace("BLOCK_SIZE=1024)", "BLOCK_SIZE=8192, num_warps=4)")
    )
    free = view(service, str(tmp_path / "s.py"), source)
    capped = view(service, str(tmp_path / "s.py"), source, maxnreg=32)
    assert free.facts[0].n_spills == 0 and free.facts[0].n_regs > 32
    assert (
        capped.facts[0].n_regs <= 32
        and capped.facts[0].n_spills > 0
        and capped.facts[0].local_memory_ops > 0
    )
    (kb201,) = [f for f in capped.findings if f.code == "KB201"]
    assert (
        f"{capped.facts[0].n_spills} bytes spilled per thread at BLOCK_SIZE=8192, num_warps=4"
        in kb201.message
    )


def test_matmul_uses_tensor_cores_and_first_draft_gelu_loads_narrow(service):
    path = EXAMPLES / "ops" / "matmul.py"
    mm = view(service, str(path), path.read_text())
    assert mm.source == "harness" and all(f.tensor_core_ops > 0 for f in mm.facts)
    assert "KB204" not in [f.code for f in mm.findings]
    gelu = EXAMPLES / "ops" / "gelu.py"
    g = view(service, str(gelu), gelu.read_text())
    assert g.facts[0].global_load_bits == {"32": 1}
    assert "KB202" in [f.code for f in g.findings]


def test_fp32_ieee_dot_has_no_tensor_cores(service, tmp_path):
    src = """import triton
import triton.language as tl

@triton.jit
def mm(a_ptr, b_ptr, c_ptr, B: tl.constexpr):
    r = tl.arange(0, B)
    a = tl.load(a_ptr + r[:, None] * B + r[None, :])
    b = tl.load(b_ptr + r[:, None] * B + r[None, :])
    tl.store(c_ptr + r[:, None] * B + r[None, :], tl.dot(a, b, input_precision="ieee"))

def run(a, b, c):
    mm[(1,)](a, b, c, B=32)
"""
    v = view(service, str(tmp_path / "mm.py"), src)
    assert v.facts[0].tensor_core_ops == 0
    assert "KB204" in [f.code for f in v.findings]


def test_a_launch_needing_more_shared_memory_than_sm90_gives_is_refused(service, tmp_path):
    """A matmul tile pipelined 5 deep at 256 x 256 x 128 needs about 640 KB of shared memory a
    program: it compiles, but the GPU refuses the launch (OutOfResources), which on the H200
    came to light only when a search timed such candidates. The compiled facts say so, so the
    compile rung refuses it and the editor reports it; the draft's own tiles stay fine."""
    path = EXAMPLES / "ops" / "matmul.py"
    source = path.read_text()
    huge = source.replace(
        "BLOCK_M=64, BLOCK_N=64, BLOCK_K=32,",
        "BLOCK_M=256, BLOCK_N=256, BLOCK_K=128, num_stages=5,",
    )
    assert huge != source
    big = view(service, str(tmp_path / "m.py"), huge)
    assert big.facts and all(not f.ok for f in big.facts)
    assert all(f.shared_bytes > 227 * 1024 for f in big.facts)
    assert "OutOfResources" in big.facts[0].error and "shared memory" in big.facts[0].error
    assert "KB200" in [f.code for f in big.findings]
    fine = view(service, str(path), source)
    assert all(f.ok and 0 < f.shared_bytes <= 227 * 1024 for f in fine.facts)
