"""torch.compile's kernels of the reference as a candidate: captured by the real judge (on the CPU,
Inductor's Triton for CPU tensors, the same kernels a GPU gets), written into the user's module,
then judged like any candidate."""

from __future__ import annotations

import ast
import importlib.util

import pytest
import torch

from kernelbrain.engine import protocol as m
from kernelbrain.engine.api import facts
from kernelbrain.engine.evaluate.policy import static_gate
from kernelbrain.engine.evaluate.verify import verify
from kernelbrain.engine.mutate.lowering.output_code import NotTranslated
from kernelbrain.engine.mutate.lowering.transplant import transplant

from .helpers import example


def lowered(pool, task) -> facts.LoweringResult:
    answer = pool.call("cpu", m.LowerReference(task, 0, ["default"]), 300)
    assert isinstance(answer, facts.LoweringResult), answer
    return answer


@pytest.mark.parametrize("op", ["softmax", "rmsnorm", "cross_entropy"])
def test_the_compilers_kernels_become_a_variant_the_judge_accepts(pool, op):
    task, original = example(op)
    result = lowered(pool, task)
    assert result.declined == [] and len(result.cases) == 2  # each small input, one graph each
    source = transplant(original, task.entry, result.cases)
    # the user's launcher stays, renamed, for every other argument; Inductor's helpers inlined
    assert f"def _{task.entry}_yours(" in source and "torch._inductor" not in source
    assert "@triton.jit\ndef inductor_" in source
    # the kernels' pointers are named after what they point at, in the entry's words
    entry_params = {
        "softmax": ["x"],
        "rmsnorm": ["x", "weight"],
        "cross_entropy": ["logits", "target"],
    }
    assert all(f"{p}_ptr" in source for p in entry_params[op]), source
    assert "out_ptr" in source and "in_ptr0" not in source
    report = verify(pool, task, source, "cpu")
    assert report.accepted, report.message


def test_a_parameter_left_to_its_default_is_guarded_at_its_default(pool, tmp_path):
    """The compiled code baked rmsnorm's eps=1e-6 in: any other eps runs the user's kernel (the
    judge's sweep moves eps; an unguarded variant was rejected there)."""
    task, original = example("rmsnorm")
    source = transplant(original, task.entry, lowered(pool, task).cases)
    assert "(isinstance(eps, float) and not isinstance(eps, bool) and eps == 1e-06)" in source
    path = tmp_path / "rmsnorm_lowered.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("rmsnorm_lowered", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines kernels, launches nothing
    calls = []
    module._rmsnorm_yours = lambda *a: calls.append(a) or "yours"
    module._rmsnorm_compiled_case0 = lambda *a: "compiled"
    x, w = torch.randn(4, 100, dtype=torch.bfloat16), torch.randn(100, dtype=torch.bfloat16)
    assert module.rmsnorm(x, w) == "compiled"  # the shape and the default it was compiled for
    assert module.rmsnorm(x, w, 0.5) == "yours" and calls
    assert module.rmsnorm(x, w, 1) == "yours"  # an int is not the float it was compiled for


def test_a_library_kernel_is_declined_with_the_reason(pool):
    task, original = example("matmul")
    with pytest.raises(NotTranslated, match="library kernel .*extern_kernels.mm"):
        transplant(original, task.entry, lowered(pool, task).cases)


OUTPUT_CODE = '''
import torch
from torch._inductor.async_compile import AsyncCompile
async_compile = AsyncCompile()
triton_poi_0 = async_compile.triton('triton_poi_0', """
import triton
import triton.language as tl
@triton_heuristics.pointwise(size_hints={'x': 64}, inductor_meta={'grid_type': 'Grid1D'})
@triton.jit
def triton_poi_0(in_ptr0, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    tl.store(out_ptr0 + xindex, tl.load(in_ptr0 + xindex, xindex < xnumel), xindex < xnumel)
""", device_str='cuda')

class Runner:
    def call(self, args):
        arg0_1, = args
        args.clear()
        buf0 = empty_strided_cuda((64, ), (1, ), torch.float32)
        triton_poi_0.run(arg0_1, buf0, 64, stream=stream0)
        WRAPPER_EXTRA
        return (buf0, )
'''

GELU_CASE = dict(
    guard=[["tensor", [64], [1], "torch.float32"]],
    inputs=[0],
    configs={"triton_poi_0": facts.KernelConfig({"XBLOCK": 64}, 4, 1)},
    outputs="tensor",
)


def case_with(extra: str = "del arg0_1", kernel_line: str = "") -> facts.LoweredCase:
    code = OUTPUT_CODE.replace("WRAPPER_EXTRA", extra)
    if kernel_line:
        code = code.replace("    tl.store(", f"    {kernel_line}\n    tl.store(")
    return facts.LoweredCase(output_code=code, **GELU_CASE)


@pytest.mark.parametrize(
    "extra",
    [
        "__import__('os').system('touch /tmp/kb-lowered')",
        "open('/tmp/kb-lowered', 'w')",
        "torch.ops.aten.copy_(buf0, arg0_1)",
        "import os",
        "for _ in range(1): pass",
        "pass",
        # a red team's: expressions of the capture's choosing inside statements of allowed kinds
        "buf1 = (torch.nn.functional.gelu(arg0_1.float(), approximate='tanh'),)[0]",
        "buf9 = [triton.compiler.compiler.Path.home().joinpath('.bashrc').open('a').write('x')]",
        "buf1 = [arg0_1.add_(1)]",
        "buf1 = lambda: 1",
        "buf1 = reinterpret_tensor(torch.tanh(arg0_1), (64,), (1,), 0)",
        "buf1 = empty_strided_cuda(torch.tanh(arg0_1).shape, (1,), torch.float32)",
        "buf1 = empty_strided_cuda((64,), (1,), torch.float32, device='cuda')",
        "torch = buf0",
        "triton_poi_0.run(torch.tanh(arg0_1), buf0, 64, stream=stream0)",
        "triton_poi_0.run(arg0_1, buf0, 64, grid=(1,))",
        "return (torch.tanh(arg0_1),)",
    ],
)
def test_output_code_doing_anything_but_allocate_and_launch_is_not_translated(extra):
    """The output code came out of the user's reference (workspace code): the wrapper's
    statements are translated from a closed list, anything else stops the transplant."""
    task, original = example("gelu")
    with pytest.raises(NotTranslated, match="wrapper|launched with"):
        transplant(original, task.entry, [case_with(extra)])


def test_what_a_compiled_kernel_holds_still_meets_the_gate():
    task, original = example("gelu")
    honest = transplant(original, task.entry, [case_with()])
    assert static_gate(task, original, honest) is None
    hostile = transplant(
        original, task.entry, [case_with(kernel_line="open('/tmp/kb-lowered', 'w')")]
    )
    rejection = static_gate(task, original, hostile)
    assert rejection is not None and "open" in rejection.message


@pytest.mark.parametrize(
    "beside", ["import os", "x = open('/tmp/kb-lowered')", "def helper(): pass"]
)
def test_a_kernel_with_code_beside_it_is_not_translated(beside):
    task, original = example("gelu")
    case = case_with()
    case.output_code = case.output_code.replace(
        "@triton_heuristics.pointwise", f"{beside}\n@triton_heuristics.pointwise"
    )
    with pytest.raises(NotTranslated, match="beside it|holds 2 functions"):
        transplant(original, task.entry, [case])


def test_a_grid_the_transplant_cannot_size_is_not_translated():
    task, original = example("gelu")
    split = case_with()
    split.output_code = split.output_code.replace("'Grid1D'", "'SplitScanGrid'")
    with pytest.raises(NotTranslated, match="SplitScanGrid grid"):
        transplant(original, task.entry, [split])


def test_the_dispatch_keeps_the_entrys_signature_and_falls_back_to_the_users_launcher():
    task, original = example("gelu")
    source = transplant(original, task.entry, [case_with()])
    text = source
    assert "def gelu(x: torch.Tensor) -> torch.Tensor:" in text
    assert text.rstrip().endswith("return _gelu_yours(x)")
    assert "inductor_poi_0_case0[(triton.cdiv(64, 64),)](x, buf0, 64, XBLOCK=64" in text


TEMPLATE_CODE = '''
triton_tem_fused_mm_0 = async_compile.triton('triton_tem_fused_mm_0', """
import triton
import triton.language as tl
@triton_heuristics.template(num_stages=3, num_warps=4, inductor_meta={'grid_type': 'FixedGrid', 'fixed_grid': ['_grid_0', '_grid_1', '_grid_2']})
@triton.jit
def triton_tem_fused_mm_0(arg_A, arg_B, out_ptr0):
    BLOCK_M : tl.constexpr = 16
    pid = tl.program_id(0)
    offs = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    tl.store(out_ptr0 + offs, tl.load(arg_A + offs) * tl.load(arg_B + offs))
""", device_str='cuda')

class Runner:
    def call(self, args):
        arg0_1, arg1_1 = args
        args.clear()
        buf0 = empty_strided_cuda((64, ), (1, ), torch.float32)
        triton_tem_fused_mm_0.run(arg0_1, arg1_1, buf0, 4, 1, 1, stream=stream0)
        return (buf0, )
'''


def test_a_template_kernel_is_launched_on_the_grid_it_was_given():
    """A max-autotune matmul's kernel is a template: no numel arguments, its grid passed as the
    launcher's last three arguments (FixedGrid)."""
    task, original = example("matmul")
    case = facts.LoweredCase(
        guard=[["tensor", [64], [1], "torch.float32"], ["tensor", [64], [1], "torch.float32"]],
        inputs=[0, 1],
        output_code=TEMPLATE_CODE,
        configs={"triton_tem_fused_mm_0": facts.KernelConfig({}, 4, 3)},
        outputs="tensor",
    )
    source = transplant(original, task.entry, [case])
    assert (
        "inductor_tem_fused_mm_0_case0[(4, 1, 1)](a, b, buf0, num_warps=4, num_stages=3)" in source
    )
    assert static_gate(task, original, source) is None


@pytest.mark.parametrize(
    "forged",
    [
        {"mode": 'default""")\nimport os\n("""'},
        {"outputs": "tuple:1); import os; ("},
        {"guard": [["tensor", [64], [1], "torch.float32 or __import__('os')"]]},
        {"guard": [["tensor", ["64); import os; ("], [1], "torch.float32"]]},
        {"guard": [["value", "__import__('os').system('x')"]]},
        {"inputs": [3]},
    ],
)
def test_a_forged_capture_never_becomes_code(forged):
    """The capture's answer comes from a process that ran the user's reference: every value
    that would be written into the candidate is checked to be what the capture writes."""
    task, original = example("gelu")
    case = case_with()
    for field, value in forged.items():
        setattr(case, field, value)
    with pytest.raises(NotTranslated):
        transplant(original, task.entry, [case])


def test_a_scalar_of_the_capture_cannot_close_the_docstring_it_is_quoted_in():
    """A red team's: a `value` guard holding a triple-quoted string with three double quotes and
    new lines closed the case function's docstring and redefined the user's launcher."""
    task, original = example("rmsnorm")
    payload = repr('"""\ndef _rmsnorm_yours(x, weight, eps=1e-6):\n    return x\n')
    case = case_with()
    case.guard = [
        ["tensor", [64], [1], "torch.float32"],
        ["tensor", [64], [1], "torch.float32"],
        ["value", "'''" + payload[1:-1] + "'''"],
    ]
    case.inputs = [0, 1]
    source = transplant(original, task.entry, [case])
    tree = ast.parse(source)
    top = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert top.count("_rmsnorm_yours") == 1  # the user's, renamed; no second one
    assert "(isinstance(eps, str) and eps == " in source  # compared as the string it is


@pytest.mark.parametrize(
    "code",
    [
        "with torch.cuda._DeviceGuard(0), open('/etc/passwd') as f:\n            buf2 = buf0",
        "[arg0_1] = args",
        "k.x = async_compile.triton('k', '')",
        "k = async_compile.triton('k', 1)",
        "buf0 = empty_strided_cuda((64,), (1,))",
        "return ()",
        "buf2 = " + "1+" * 20000 + "1",
    ],
)
def test_output_code_no_inductor_writes_is_not_translated_and_never_crashes(code):
    task, original = example("gelu")
    case = case_with()
    if code.startswith(("[arg0_1]", "return")):
        case.output_code = case.output_code.replace("arg0_1, = args", code, 1)
    elif code.startswith("k"):
        case.output_code = code + "\n" + case.output_code
    else:
        case.output_code = case.output_code.replace("del arg0_1", code)
    with pytest.raises(NotTranslated):
        transplant(original, task.entry, [case])


def test_only_inductors_own_imports_stand_beside_a_kernel():
    task, original = example("gelu")
    case = case_with()
    case.output_code = case.output_code.replace(
        "@triton_heuristics.pointwise", "from tritonevil import x\n@triton_heuristics.pointwise"
    )
    with pytest.raises(NotTranslated, match="beside it"):
        transplant(original, task.entry, [case])


def test_a_lowered_module_is_not_lowered_again():
    """A red team's: lowering an accepted lowered variant renamed its dispatch to a second
    `_gelu_yours` (every other shape recursed) and its guard ran the new case's kernels."""
    task, original = example("gelu")
    once = transplant(original, task.entry, [case_with()])
    with pytest.raises(NotTranslated, match="already"):
        transplant(once, task.entry, [case_with()])


def test_a_decorated_entry_keeps_its_launcher_under_the_new_name():
    task, original = example("gelu")
    decorated = original.replace(
        "def gelu(x: torch.Tensor)", "@torch.no_grad()\ndef gelu(x: torch.Tensor)"
    )
    source = transplant(decorated, task.entry, [case_with()])
    assert source.count("def gelu(") == 1 and "@torch.no_grad()\ndef _gelu_yours(" in source


def test_what_parses_but_does_not_compile_is_not_translated():
    """A kernel parameter named like a launch option repeats a keyword at the launch."""
    task, original = example("gelu")
    case = case_with()
    case.output_code = case.output_code.replace(
        "XBLOCK : tl.constexpr)", "XBLOCK : tl.constexpr, num_warps: tl.constexpr=4)"
    )
    case.configs = {"triton_poi_0": facts.KernelConfig({"XBLOCK": 64, "num_warps": 8}, 4, 1)}
    with pytest.raises(NotTranslated, match="does not compile"):
        transplant(original, task.entry, [case])
