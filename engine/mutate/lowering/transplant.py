"""From Inductor's output code to a candidate of the user's module.

The candidate keeps the user's module whole and adds, per case torch.compile was run on, the
compiler's kernels (readable names: the reference's argument names for `in_ptr0`, `out` for what
is returned) and a function that launches them with the configuration Inductor chose made
explicit. The entry dispatches: on arguments exactly like a lowered case's (shapes, strides,
dtypes, scalar values: the compiled code was specialised for those) it runs that case's
kernels, anywhere else the user's own launcher, renamed `_<entry>_yours`, runs as before. A
variant is therefore never wrong off the shapes it was compiled for, and the search's dispatch
and configuration mutators can work on it like on any other candidate.
"""

from __future__ import annotations

import ast
import re

from ...api.facts import KernelConfig, LoweredCase
from . import helpers
from .output_code import CompiledKernel, CompiledProgram, NotTranslated, read

GRID_DIMENSIONS = {"Grid1D": "x", "Grid2D": "xy", "Grid3D": "xyz"}


def _readable(kernel: str, index: int) -> str:
    """`triton_per_fused__softmax_0` → `inductor_per_fused_softmax_0` (per: one block per row)."""
    rest = re.sub(r"_+", "_", kernel.removeprefix("triton_"))
    return f"inductor_{rest}" if rest else f"inductor_kernel_{index}"


def _launch(
    kernel: CompiledKernel, new_name: str, call: ast.Call, config: KernelConfig | None
) -> ast.stmt:
    """`k.run(a, b, n, stream=s)` → `k[grid](a, b, n, XBLOCK=…, num_warps=…)`."""
    if config is None:
        raise NotTranslated(f"no configuration was recorded for `{kernel.name}`")
    args = list(call.args)
    runtime = [p for p in kernel.params if p not in config.kwargs]
    if kernel.grid_type == "FixedGrid":
        # templates (a max-autotune matmul): the grid comes as three launcher arguments
        if len(args) != len(runtime) + 3:
            raise NotTranslated(f"`{kernel.name}` is launched without its fixed grid")
        grid = [ast.unparse(a) for a in args[-3:]]
        args = args[:-3]
    else:
        dims = GRID_DIMENSIONS.get(kernel.grid_type)
        if dims is None:
            raise NotTranslated(f"kernel `{kernel.name}` uses a {kernel.grid_type} grid")
        if len(args) > len(runtime):
            raise NotTranslated(f"`{kernel.name}` is launched with more arguments than it takes")
        by_param = dict(zip(runtime, args))
        grid = []
        for d in dims:
            numel = by_param.get(f"{d}numel")
            if numel is None:
                raise NotTranslated(f"`{kernel.name}` has no {d}numel to size its grid")
            block = config.kwargs.get(f"{d.upper()}BLOCK", 1)
            grid.append(f"triton.cdiv({ast.unparse(numel)}, {block})")
    grid_text = "(" + ", ".join(grid) + ("," if len(grid) == 1 else "") + ")"
    options = [f"{k}={v}" for k, v in config.kwargs.items() if k in kernel.params]
    options += [f"num_warps={config.num_warps}", f"num_stages={config.num_stages}"]
    text = f"{new_name}[{grid_text}](" + ", ".join([ast.unparse(a) for a in args] + options) + ")"
    return ast.parse(text).body[0]


class _Wrapper(ast.NodeTransformer):
    """`call`'s statements in plain PyTorch and Triton launches."""

    def __init__(self, program: CompiledProgram, names: dict[str, str], configs, device: str):
        self.program = program
        self.names = names  # Inductor's kernel name → the candidate's
        self.configs = configs
        self.device = device

    def statement(self, s: ast.stmt) -> ast.stmt | None:
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            func = ast.unparse(s.value.func)
            if func in ("args.clear", "assert_size_stride", "assert_alignment") or func.startswith(
                "torch.cuda.set_device"
            ):
                return None
            if func.endswith(".run") and func[: -len(".run")] in self.program.kernels:
                name = func[: -len(".run")]
                return _launch(
                    self.program.kernels[name], self.names[name], s.value, self.configs.get(name)
                )
            if func.startswith("extern_kernels."):
                raise NotTranslated(
                    f"torch.compile calls a library kernel here (`{func}`, cuBLAS or ATen): a "
                    "variant must compute with Triton (max-autotune writes Triton templates)"
                )
            raise NotTranslated(f"the compiled wrapper calls `{func}`")
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call):
            func = ast.unparse(s.value.func)
            if func in ("get_raw_stream", "torch.cuda.current_stream"):
                return None
            if func.startswith("empty_strided"):
                size, stride, dtype = s.value.args
                s.value = ast.parse(
                    f"torch.empty_strided({ast.unparse(size)}, {ast.unparse(stride)}, "
                    f"dtype={ast.unparse(dtype)}, device={self.device})",
                    mode="eval",
                ).body
                return s
            if func == "reinterpret_tensor":
                s.value.func = ast.parse("torch.as_strided", mode="eval").body
                return s
            raise NotTranslated(f"the compiled wrapper calls `{func}`")
        if isinstance(s, ast.Delete):
            return None  # the buffers die with the function
        if isinstance(s, (ast.Assign, ast.Return)):
            return s
        raise NotTranslated(f"the compiled wrapper does `{ast.unparse(s)[:80]}`")


def _case_function(
    name: str,
    case: LoweredCase,
    program: CompiledProgram,
    names: dict[str, str],
    params: list[str],
) -> str:
    """One case's launcher: its arguments named as the entry names them."""
    args = [params[i] for i in case.inputs]
    rename = dict(zip(program.inputs, args))
    tensor = next((p for p, g in zip(params, case.guard) if g[0] == "tensor"), None)
    if tensor is None:
        raise NotTranslated("the case has no tensor argument to take the device from")
    wrapper = _Wrapper(program, names, case.configs, f"{tensor}.device")
    body = []
    for s in program.body:
        s = wrapper.statement(s)
        if s is None:
            continue
        if isinstance(s, ast.Return):
            values = s.value.elts if isinstance(s.value, ast.Tuple) else [s.value]
            s = ast.Return(values[0] if case.outputs == "tensor" else ast.Tuple(values, ast.Load()))
        body.append(ast.unparse(s))
    text = "\n".join(body)
    for old, new in rename.items():
        text = re.sub(rf"\b{re.escape(old)}\b", new, text)
    lines = "\n    ".join(text.splitlines())
    doc = f'"""torch.compile ({case.mode}) of the reference, for {_describe(case, params)}."""'
    return f"def {name}({', '.join(params)}):\n    {doc}\n    {lines}\n"


def _describe(case: LoweredCase, params: list[str]) -> str:
    parts = []
    for p, g in zip(params, case.guard):
        if g[0] == "tensor":
            parts.append(f"{p} {tuple(g[1])} {g[3].removeprefix('torch.')}")
        else:
            parts.append(f"{p}={g[1]}")
    return ", ".join(parts)


def _value_guard(param: str, literal: str) -> str:
    """`param` holds the scalar `literal` (a repr), of the same type (True is not 1)."""
    try:
        value = ast.literal_eval(literal)
    except (ValueError, SyntaxError):
        raise NotTranslated(f"`{param}` was compiled for `{literal[:40]}`, not a plain value")
    if value is None:
        return f"({param} is None)"
    kind = type(value).__name__
    if kind not in ("bool", "int", "float", "str"):
        raise NotTranslated(f"`{param}` was compiled for a {kind}")
    exact = f" and not isinstance({param}, bool)" if kind in ("int", "float") else ""
    return f"(isinstance({param}, {kind}){exact} and {param} == {value!r})"


def _guard_expression(case: LoweredCase, params: list[str], defaults: dict[str, str]) -> str:
    """True exactly on arguments like the case's. A parameter the case left to its default was
    compiled with the default's value: the guard holds it to that value too."""
    terms = []
    for p in params[len(case.guard) :]:
        if p not in defaults:
            raise NotTranslated(f"the case does not pass `{p}`, which has no default")
        terms.append(_value_guard(p, defaults[p]))
    for p, g in zip(params, case.guard):
        if g[0] == "tensor":
            terms.append(
                f"(isinstance({p}, torch.Tensor) and tuple({p}.shape) == {tuple(g[1])!r} "
                f"and {p}.stride() == {tuple(g[2])!r} and {p}.dtype == {g[3]})"
            )
        else:
            terms.append(_value_guard(p, g[1]))
    return " and ".join(terms) or "True"


def _rename_kernel(kernel: CompiledKernel, new_name: str, used: set[str]) -> str:
    tree = ast.parse(kernel.source)
    fn = tree.body[0]
    fn.name = new_name
    return ast.unparse(helpers.rewrite(tree, used))


DTYPE = re.compile(r"torch\.[a-z][a-z0-9_]*")
MODES = ("default", "max-autotune-no-cudagraphs", "max-autotune", "reduce-overhead")


def _checked(case: LoweredCase, n_params: int) -> None:
    """Every value of `case` that becomes code is what the capture writes: the capture ran the
    user's reference, so its answer is read as untrusted text, never pasted as code."""
    if case.mode not in MODES:
        raise NotTranslated(f"unknown torch.compile mode {case.mode[:40]!r}")
    if case.outputs != "tensor" and not re.fullmatch(r"tuple:[1-9][0-9]?", case.outputs):
        raise NotTranslated(f"unknown output shape {case.outputs[:40]!r}")
    if len(case.guard) > n_params:
        raise NotTranslated("a case passes more arguments than the entry takes")
    if not all(isinstance(i, int) and 0 <= i < len(case.guard) for i in case.inputs):
        raise NotTranslated("a compiled input comes from no argument")
    for g in case.guard:
        if g and g[0] == "tensor" and len(g) == 4:
            dims_ok = all(
                isinstance(d, list) and all(type(v) is int for v in d) for d in (g[1], g[2])
            )
            if dims_ok and isinstance(g[3], str) and DTYPE.fullmatch(g[3]):
                continue
        elif g and g[0] == "value" and len(g) == 2 and isinstance(g[1], str):
            continue
        raise NotTranslated(f"an argument recorded as {str(g)[:60]}")


def transplant(original: str, entry: str, cases: list[LoweredCase]) -> str:
    """The user's module with torch.compile's kernels for `cases`, dispatched from `entry`."""
    if not cases:
        raise NotTranslated("no case was lowered")
    tree = ast.parse(original)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == entry), None)
    if fn is None:
        raise NotTranslated(f"the entry `{entry}` is not a module-level function")
    a = fn.args
    if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
        raise NotTranslated(f"`{entry}` takes *args, **kwargs or keyword-only parameters")
    params = [p.arg for p in a.args]
    defaults = {
        p.arg: ast.unparse(d) for p, d in zip(a.args[len(a.args) - len(a.defaults) :], a.defaults)
    }
    yours = f"_{entry}_yours"
    used: set[str] = set()
    kernels, functions, guards = [], [], []
    for index, case in enumerate(cases):
        _checked(case, len(params))
        program = read(case.output_code)
        names = {}
        for k, kernel in program.kernels.items():
            names[k] = f"{_readable(k, len(kernels))}_case{index}"
            kernels.append(_rename_kernel(kernel, names[k], used))
        name = f"_{entry}_compiled_case{index}"
        functions.append(_case_function(name, case, program, names, params[: len(case.guard)]))
        guards.append((_guard_expression(case, params, defaults), name, len(case.guard)))

    fn.name = yours
    lines = original.splitlines()
    # the user's entry keeps its text; only its name changes, at its own line
    def_line = fn.lineno - 1 + len(fn.decorator_list)
    lines[def_line] = re.sub(rf"\bdef {re.escape(entry)}\b", f"def {yours}", lines[def_line], 1)
    returns = f" -> {ast.unparse(fn.returns)}" if fn.returns else ""
    dispatch = [f"def {entry}({ast.unparse(a)}){returns}:"]
    dispatch.append(
        '    """torch.compile\'s kernels on the arguments they were compiled for; yours elsewhere."""'
    )
    for guard, name, n in guards:
        dispatch.append(f"    if {guard}:")
        dispatch.append(f"        return {name}({', '.join(params[:n])})")
    dispatch.append(f"    return {yours}({', '.join(params)})")
    added = helpers.inlined(used) + kernels + functions + ["\n".join(dispatch) + "\n"]
    header = "\n\n# torch.compile's kernels for this module's reference (KernelBrain lowering)\n"
    extra_imports = ""
    if "libdevice." in "\n".join(added) and "libdevice" not in original:
        extra_imports = "from triton.language.extra import libdevice\n"
    text = "\n".join(lines).rstrip("\n") + "\n" + header + extra_imports
    return text + "\n\n" + "\n\n\n".join(s.rstrip("\n") for s in added) + "\n"
