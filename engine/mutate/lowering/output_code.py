"""Reading Inductor's output code: its Triton kernels and the wrapper that launches them.

The output code is a Python module Inductor writes per graph: each kernel as a string handed to
`async_compile.triton(name, source)`, and a `call(args)` function (a method of `Runner` in recent
PyTorch) that allocates buffers and launches the kernels. It is read with `ast` only, never run:
it came out of the user's reference, which is workspace code.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass


class NotTranslated(Exception):
    """Output code the transplant does not translate; the message says what, for the user."""


@dataclass
class CompiledKernel:
    name: str
    source: str  # the `@triton.jit` function alone, without Inductor's autotuning decorator
    params: list[str]
    grid_type: str


@dataclass
class CompiledProgram:
    kernels: dict[str, CompiledKernel]
    inputs: list[str]  # the names `call` gives its arguments, in order
    body: list[ast.stmt]  # `call`'s statements past unpacking its arguments


PREAMBLE_MODULES = ("triton", "triton.language", "torch._inductor.runtime")


def _inductor_preamble(node: ast.stmt) -> bool:
    """Imports Inductor writes beside a kernel (dropped: the candidate imports its own)."""
    if isinstance(node, ast.Import):
        return all(a.name in PREAMBLE_MODULES for a in node.names)
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        return node.level == 0 and (
            module in PREAMBLE_MODULES or module.startswith("torch._inductor.runtime.")
        )
    return isinstance(node, ast.Expr) and ast.unparse(node) in (
        "triton_helpers.set_driver_to_gpu()",
        "triton_helpers.set_driver_to_cpu()",
    )


def _kernel(name: str, text: str) -> CompiledKernel:
    tree = ast.parse(text)
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if len(fns) != 1:
        raise NotTranslated(f"kernel `{name}` holds {len(fns)} functions")
    for node in tree.body:
        # what Inductor writes beside a kernel: its imports and a driver choice, nothing else
        if node is fns[0] or _inductor_preamble(node):
            continue
        raise NotTranslated(f"kernel `{name}` comes with `{ast.unparse(node)[:60]}` beside it")
    fn = fns[0]
    jit = [d for d in fn.decorator_list if ast.unparse(d) in ("triton.jit", "jit")]
    if not jit:
        raise NotTranslated(f"kernel `{name}` is not a `@triton.jit` function")
    fn.decorator_list = [ast.parse("triton.jit", mode="eval").body]
    grid = re.search(r"'grid_type': '(\w+)'", text)
    return CompiledKernel(
        name,
        ast.unparse(fn),
        [a.arg for a in fn.args.args],
        grid.group(1) if grid else "Grid1D",
    )


def _call_function(tree: ast.Module) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "call":
            return node
        if isinstance(node, ast.ClassDef) and node.name == "Runner":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "call":
                    return item
    raise NotTranslated("the output code has no `call` function")


DEVICE_GUARD = re.compile(r"torch\.cuda\._DeviceGuard\(\d+\)")


def _flatten(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """`with torch.cuda._DeviceGuard(0):` holds the launches: its body, in order."""
    out = []
    for s in stmts:
        if isinstance(s, ast.With):
            guards = [ast.unparse(i.context_expr) for i in s.items if i.optional_vars is None]
            if len(guards) != len(s.items) or not all(map(DEVICE_GUARD.fullmatch, guards)):
                raise NotTranslated(f"the wrapper enters `{ast.unparse(s.items[0])[:60]}`")
            out.extend(_flatten(s.body))
        else:
            out.append(s)
    return out


def read(output_code: str) -> CompiledProgram:
    """The kernels and the launching wrapper of one graph's output code."""
    try:
        tree = ast.parse(output_code)
    except SyntaxError as exc:
        raise NotTranslated(f"the output code does not parse: {exc.msg}") from None
    kernels = {}
    for node in tree.body:
        value = node.value if isinstance(node, ast.Assign) else None
        if (
            isinstance(value, ast.Call)
            and ast.unparse(value.func) == "async_compile.triton"
            and len(value.args) >= 2
            and isinstance(value.args[1], ast.Constant)
        ):
            name = node.targets[0].id
            kernels[name] = _kernel(name, value.args[1].value)
        elif isinstance(value, ast.Call) and ast.unparse(value.func).startswith("async_compile."):
            kind = ast.unparse(value.func).split(".")[1]
            raise NotTranslated(f"the compiled code holds a {kind} kernel (Triton only)")
    call = _call_function(tree)
    body = _flatten(call.body)
    unpack = body[0] if body else None
    if not (
        isinstance(unpack, ast.Assign)
        and isinstance(unpack.value, ast.Name)
        and unpack.value.id == "args"
    ):
        raise NotTranslated("`call` does not start by unpacking its arguments")
    target = unpack.targets[0]
    names = target.elts if isinstance(target, ast.Tuple) else [target]
    return CompiledProgram(kernels, [n.id for n in names], body[1:])
