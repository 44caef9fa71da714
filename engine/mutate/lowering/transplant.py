"""From Inductor's output code to a candidate of the user's module.

The candidate keeps the user's module whole and adds, per case torch.compile was run on, the
compiler's kernels (named after Inductor's, `inductor_per_fused_softmax_0_case0`; their
parameters keep Inductor's `in_ptr0`, `out_ptr0`) and a function that launches them with the
configuration Inductor chose made explicit, its arguments named as the entry names them. The entry dispatches: on arguments exactly like a lowered case's (shapes, strides,
dtypes, scalar values: the compiled code was specialised for those) it runs that case's
kernels, anywhere else the user's own launcher, renamed `_<entry>_yours`, runs as before. A
variant is therefore never wrong off the shapes it was compiled for, and the search's dispatch
and configuration mutators can work on it like on any other candidate.
"""

from __future__ import annotations

import ast
import math
import re

from ...api.facts import LoweredCase
from . import helpers
from .output_code import CompiledKernel, CompiledProgram, NotTranslated, read
from .wrapper import DTYPE, RETURN, Translation

MAX_CASES = 32  # per mode: the benchmark cases of one task


def _lowered_names(tree: ast.Module, entry: str) -> list[str]:
    """Names of an earlier lowering in the module: lowering it again would define them twice."""
    prefixes = (f"_{entry}_yours", f"_{entry}_compiled_case", "inductor_", helpers.PREFIX)
    return [
        n.name
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name.startswith(prefixes)
    ]


def _readable(kernel: str, index: int) -> str:
    """`triton_per_fused__softmax_0` → `inductor_per_fused_softmax_0` (per: one block per row)."""
    rest = re.sub(r"_+", "_", kernel.removeprefix("triton_"))
    return f"inductor_{rest}" if rest else f"inductor_kernel_{index}"


def _case_function(
    name: str,
    case: LoweredCase,
    program: CompiledProgram,
    names: dict[str, str],
    params: list[str],
    pointers: dict[str, dict[str, str]] | None = None,
) -> str:
    """One case's launcher: its arguments named as the entry names them. `pointers` receives,
    per kernel, readable names for its pointer parameters (`in_ptr0` → `x_ptr`, the returned
    buffer's → `out_ptr`)."""
    args = [params[i] for i in case.inputs]
    rename = dict(zip(program.inputs, args))
    tensor = next((p for p, g in zip(params, case.guard) if g[0] == "tensor"), None)
    if tensor is None:
        raise NotTranslated("the case has no tensor argument to take the device from")
    translation = Translation(program, names, case.configs, f"{tensor}.device")
    body = []
    for statement in program.body:
        line = translation.statement(statement)
        if line == RETURN:
            out = translation.returned
            if case.outputs == "tensor" and len(out) == 1:
                line = f"return {out[0]}"
            elif case.outputs == f"tuple:{len(out)}":
                line = f"return ({', '.join(out)},)"
            else:
                raise NotTranslated(f"the wrapper returns {len(out)} values, not {case.outputs}")
        if line is not None:
            body.append(line)
    if not translation.returned:
        raise NotTranslated("the compiled wrapper returns nothing")
    if pointers is not None:
        _name_pointers(translation, program, rename, pointers)
    text = "\n".join(body)
    if rename:  # one pass, whatever the number of inputs
        names_re = re.compile(r"\b(" + "|".join(map(re.escape, rename)) + r")\b")
        text = names_re.sub(lambda m: rename[m.group(1)], text)
    lines = "\n    ".join(text.splitlines())
    # a constant, written by `ast`: nothing of the capture's text can close the docstring
    doc = ast.unparse(
        ast.Constant(
            f"torch.compile ({case.mode}) of the reference, for {_describe(case, params)}."
        )
    )
    return f"def {name}({', '.join(params)}):\n    {doc}\n    {lines}\n"


def _describe(case: LoweredCase, params: list[str]) -> str:
    parts = []
    for p, g in zip(params, case.guard):
        if g[0] == "tensor":
            parts.append(f"{p} {tuple(g[1])} {g[3].removeprefix('torch.')}")
        else:
            parts.append(f"{p}={ast.literal_eval(g[1])!r}"[:80])
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
    if kind == "float" and not math.isfinite(value):
        raise NotTranslated(f"`{param}` was compiled for {value!r}")
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


POINTER = re.compile(r"(in|out|in_out)_ptr\d+")


def _name_pointers(translation, program: CompiledProgram, inputs: dict, pointers: dict) -> None:
    """What each kernel's pointer parameters point at, in the entry's words: an input by the
    entry's parameter, a returned buffer as `out` (`out0`, `out1`, …), a buffer between kernels
    by the wrapper's name for it (`buf1`)."""
    out = translation.returned
    for kernel_name, bound in translation.launches:
        kernel = program.kernels[kernel_name]
        chosen = pointers.setdefault(kernel_name, {})
        for param, arg in zip(kernel.params, bound):
            if not POINTER.fullmatch(param) or arg is None:
                continue
            if arg in inputs:
                readable = f"{inputs[arg]}_ptr"
            elif arg in out:
                readable = "out_ptr" if len(out) == 1 else f"out{out.index(arg)}_ptr"
            else:  # a buffer of the wrapper's own, between kernels
                readable = f"{arg}_ptr"
            if chosen.get(param, readable) == readable and readable not in chosen.values():
                chosen[param] = readable


class _Renamed(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]):
        self.names = names

    def visit_Name(self, node: ast.Name):
        node.id = self.names.get(node.id, node.id)
        return node

    def visit_arg(self, node: ast.arg):
        node.arg = self.names.get(node.arg, node.arg)
        return node


def _rename_kernel(
    kernel: CompiledKernel, new_name: str, used: set[str], pointers: dict[str, str] | None = None
) -> str:
    tree = ast.parse(kernel.source)
    fn = tree.body[0]
    fn.name = new_name
    if pointers:
        taken = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | {
            a.arg for a in fn.args.args
        }
        safe = {old: new for old, new in pointers.items() if new not in taken}
        fn = _Renamed(safe).visit(fn)
    return ast.unparse(helpers.rewrite(tree, used))


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
    taken = _lowered_names(tree, entry)
    if taken:
        raise NotTranslated(
            f"the module holds torch.compile's kernels already (`{taken[0]}`): a lowered "
            "variant is not lowered again"
        )
    if len(cases) > MAX_CASES:
        raise NotTranslated(f"{len(cases)} cases lowered, more than {MAX_CASES}")
    used: set[str] = set()
    kernels, functions, guards = [], [], []
    for index, case in enumerate(cases):
        try:
            _checked(case, len(params))
            program = read(case.output_code)
            names = {k: f"{_readable(k, i)}_case{index}" for i, k in enumerate(program.kernels)}
            name = f"_{entry}_compiled_case{index}"
            params_of = params[: len(case.guard)]
            pointers: dict[str, dict[str, str]] = {}
            functions.append(_case_function(name, case, program, names, params_of, pointers))
            for k, kernel in program.kernels.items():
                kernels.append(_rename_kernel(kernel, names[k], used, pointers.get(k)))
            guards.append((_guard_expression(case, params, defaults), name, len(case.guard)))
        except NotTranslated:
            raise
        except (
            SyntaxError,
            ValueError,
            TypeError,
            AttributeError,
            LookupError,
            RecursionError,
            MemoryError,
        ) as e:
            # text no Inductor writes, whatever went wrong with it
            raise NotTranslated(
                f"case {index}: the output code is not what Inductor writes ({type(e).__name__})"
            ) from None

    fn.name = yours
    lines = original.splitlines()
    # the user's entry keeps its text; only its name changes, at its own line
    def_line = fn.lineno - 1  # the `def` line itself, decorators above it
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
    text += "\n\n" + "\n\n\n".join(s.rstrip("\n") for s in added) + "\n"
    try:  # what parses may still not compile (a repeated keyword, a repeated parameter)
        compile(text, "<lowered>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise NotTranslated(f"the written module does not compile: {str(e)[:120]}") from None
    return text
