"""Inductor's `call` wrapper, statement by statement, into plain PyTorch and Triton launches.

The wrapper came out of the user's reference, in a process that ran workspace code, so it is
read as untrusted text: each statement must be one Inductor writes (allocate, reinterpret,
alias, launch, return; stream and device bookkeeping is dropped), and every expression in one
is built from the closed forms below (its own input and buffer names, numbers, tuples of them,
arithmetic on sizes, `torch.<dtype>`). Anything else stops the transplant with a reason: no
expression of the capture's choosing is ever pasted into a candidate.
"""

from __future__ import annotations

import ast
import re

from ...api.facts import KernelConfig
from .output_code import CompiledKernel, CompiledProgram, NotTranslated

INPUT_NAME = re.compile(r"(arg|primals|tangents)\d+_\d+")
BUFFER_NAME = re.compile(r"buf\d+")
DTYPE = re.compile(r"torch\.[a-z][a-z0-9_]*")
GRID_DIMENSIONS = {"Grid1D": "x", "Grid2D": "xy", "Grid3D": "xyz"}
RETURN = "<return>"  # where `call` returns: the caller writes it as the reference returns
SIZE_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
DROPPED_CALLS = ("args.clear", "assert_size_stride", "assert_alignment", "torch.cuda.set_device")


def _number(e: ast.expr) -> bool:
    if isinstance(e, ast.Constant):
        return type(e.value) in (int, float) and len(repr(e.value)) < 40
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        return _number(e.operand)
    return (
        isinstance(e, ast.BinOp)
        and isinstance(e.op, SIZE_OPS)
        and _number(e.left)
        and _number(e.right)
    )


def _sizes(e: ast.expr) -> bool:
    return isinstance(e, (ast.Tuple, ast.List)) and len(e.elts) <= 8 and all(map(_number, e.elts))


def _dtype(e: ast.expr) -> bool:
    return isinstance(e, ast.Attribute) and bool(DTYPE.fullmatch(ast.unparse(e)))


class Translation:
    """`call`'s statements for one case: `known` holds the names a statement may read."""

    def __init__(self, program: CompiledProgram, names: dict[str, str], configs, device: str):
        bad = [n for n in program.inputs if not INPUT_NAME.fullmatch(n)]
        if bad:
            raise NotTranslated(f"the wrapper names an input `{bad[0][:40]}`")
        self.program, self.names, self.configs, self.device = program, names, configs, device
        self.known = set(program.inputs)
        self.returned: list[str] = []
        # per launch: the kernel and the name bound to each runtime argument (None: a number)
        self.launches: list[tuple[str, list[str | None]]] = []

    def _name(self, e: ast.expr) -> bool:
        return isinstance(e, ast.Name) and e.id in self.known

    def _operand(self, e: ast.expr) -> bool:
        return self._name(e) or _number(e)

    def _bind(self, s: ast.Assign) -> str:
        if len(s.targets) != 1 or not isinstance(s.targets[0], ast.Name):
            raise NotTranslated(f"the wrapper assigns `{ast.unparse(s)[:60]}`")
        name = s.targets[0].id
        if not BUFFER_NAME.fullmatch(name):
            raise NotTranslated(f"the wrapper names a buffer `{name[:40]}`")
        self.known.add(name)
        return name

    def statement(self, s: ast.stmt) -> str | None:
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            return self._call(s.value)
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call):
            return self._allocation(s)
        if isinstance(s, ast.Assign) and self._name(s.value):  # `buf3 = buf1  # reuse`
            return f"{self._bind(s)} = {s.value.id}"
        if isinstance(s, ast.Delete):
            return None  # the buffers die with the function
        if isinstance(s, ast.Return) and isinstance(s.value, ast.Tuple):
            if s.value.elts and all(self._name(e) for e in s.value.elts):
                self.returned = [e.id for e in s.value.elts]
                return RETURN
        raise NotTranslated(f"the compiled wrapper does `{ast.unparse(s)[:80]}`")

    def _call(self, call: ast.Call) -> str | None:
        func = ast.unparse(call.func)
        if func.startswith(DROPPED_CALLS):
            return None
        if func.endswith(".run") and func[: -len(".run")] in self.program.kernels:
            name = func[: -len(".run")]
            if [k.arg for k in call.keywords] not in ([], ["stream"]):
                raise NotTranslated(f"`{name}` is launched with keywords")
            if not all(self._operand(a) for a in call.args):
                raise NotTranslated(f"`{name}` is launched with `{ast.unparse(call)[:80]}`")
            kernel = self.program.kernels[name]
            bound = [a.id if isinstance(a, ast.Name) else None for a in call.args]
            self.launches.append((name, bound))
            return launch(kernel, self.names[name], call.args, self.configs.get(name))
        if func.startswith("extern_kernels."):
            raise NotTranslated(
                f"torch.compile calls a library kernel here (`{func[:60]}`, cuBLAS or ATen): a "
                "variant must compute with Triton (max-autotune writes Triton templates)"
            )
        raise NotTranslated(f"the compiled wrapper calls `{func[:60]}`")

    def _allocation(self, s: ast.Assign) -> str | None:
        call = s.value
        func = ast.unparse(call.func)
        if func in ("get_raw_stream", "torch.cuda.current_stream"):
            return None
        args, plain = call.args, not call.keywords
        if func.startswith("empty_strided") and plain and len(args) == 3:
            size, stride, dtype = args
            if _sizes(size) and _sizes(stride) and _dtype(dtype):
                return (
                    f"{self._bind(s)} = torch.empty_strided({ast.unparse(size)}, "
                    f"{ast.unparse(stride)}, dtype={ast.unparse(dtype)}, device={self.device})"
                )
        if func == "reinterpret_tensor" and plain and len(args) == 4:
            base, size, stride, offset = args
            if self._name(base) and _sizes(size) and _sizes(stride) and _number(offset):
                return (
                    f"{self._bind(s)} = torch.as_strided({base.id}, {ast.unparse(size)}, "
                    f"{ast.unparse(stride)}, {ast.unparse(offset)})"
                )
        raise NotTranslated(f"the compiled wrapper does `{ast.unparse(s)[:80]}`")


def launch(kernel: CompiledKernel, new_name: str, args, config: KernelConfig | None) -> str:
    """`k.run(a, b, n, stream=s)` → `k[grid](a, b, n, XBLOCK=…, num_warps=…)`."""
    if config is None:
        raise NotTranslated(f"no configuration was recorded for `{kernel.name}`")
    args = list(args)
    runtime = [p for p in kernel.params if p not in config.kwargs]
    if kernel.grid_type == "FixedGrid":
        # templates (a max-autotune matmul): the grid comes as three launcher arguments
        if len(args) != len(runtime) + 3 or not all(_number(a) for a in args[-3:]):
            raise NotTranslated(f"`{kernel.name}` is launched without its fixed grid")
        grid = [ast.unparse(a) for a in args[-3:]]
        args = args[:-3]
    else:
        dims = GRID_DIMENSIONS.get(kernel.grid_type)
        if dims is None:
            raise NotTranslated(f"kernel `{kernel.name}` uses a {kernel.grid_type[:40]} grid")
        if len(args) > len(runtime):
            raise NotTranslated(f"`{kernel.name}` is launched with more arguments than it takes")
        by_param = dict(zip(runtime, args))
        grid = []
        for d in dims:
            numel = by_param.get(f"{d}numel")
            if numel is None or not _number(numel):
                raise NotTranslated(f"`{kernel.name}` has no {d}numel to size its grid")
            block = config.kwargs.get(f"{d.upper()}BLOCK", 1)
            grid.append(f"triton.cdiv({ast.unparse(numel)}, {block})")
    grid_text = "(" + ", ".join(grid) + ("," if len(grid) == 1 else "") + ")"
    options = [f"{k}={int(v)}" for k, v in config.kwargs.items() if k in kernel.params]
    options += [f"num_warps={int(config.num_warps)}", f"num_stages={int(config.num_stages)}"]
    return f"{new_name}[{grid_text}](" + ", ".join([ast.unparse(a) for a in args] + options) + ")"
