"""Exponentials as `tl.exp2` of a log2(e)-scaled argument.

`tl.exp` on fp32 lowers to `ex2.approx.f32` after a multiply by log2(e); without flush-to-zero
ptxas wraps the MUFU.EX2 in a denormal fix-up (an FSETP and two FMULs an element). `tl.exp2` goes
through libdevice, which Triton builds with flush-to-zero: one MUFU.EX2. On sm_90 the
cross_entropy kernel the search had reached (4096 wide, 2 warps) compiles to 808 SASS
instructions with `tl.exp` and 615 with `tl.exp2((x - m) * log2 e)` — issue slots a kernel that
also streams 256 MB needs. The subtraction stays ahead of the scaling, so `x - m` near zero keeps
its precision (folding it into one FFMA, `x * log2e - m * log2e`, loses |x| * 2^-24 of the
exponent). Results below 2^-126 flush to zero, which a sum of exponentials never sees.

Precondition: the argument is provably fp32 (a light type inference over the kernel's
assignments); an fp16/bf16 argument would be scaled in its own precision before `tl.exp2`
upcasts it, and an fp64 one gains nothing. Only the kernel's own body is rewritten, not the
`@triton.jit` helpers it calls (other kernels may call them too).
"""

from __future__ import annotations

import ast
import copy

from ..rules.analysis import TL, KernelView
from .dataflow import fix
from .edits import Edits
from .registry import Mutation, MutationContext, mutator

LOG2E = 1.4426950408889634
_FLOATS = {
    "float32": "f32",
    "float64": "f64",
    "float16": "low",
    "bfloat16": "low",
    "fp32": "f32",
    "fp64": "f64",
    "fp16": "low",
    "bf16": "low",
}
_ELEMENTWISE = {
    "maximum",
    "minimum",
    "max",
    "min",
    "sum",
    "exp",
    "exp2",
    "log",
    "log2",
    "sqrt",
    "sqrt_rn",
    "rsqrt",
    "abs",
    "fma",
    "cumsum",
    "where",
    "math.exp",
    "math.exp2",
    "math.log",
    "math.log2",
    "math.sqrt",
    "math.rsqrt",
    "math.fma",
    "math.abs",
}
NEUTRAL = "scalar"  # a Python number, an integer, a runtime scalar: takes the tile's float type
PENDING = "pending"  # a local not typed yet in the fixed-point iteration: neutral until it is


def _combine(types: list[str | None]) -> str | None:
    if any(t is None for t in types):
        return None
    floats = {t for t in types if t in ("f32", "f64", "low")}
    if "f64" in floats:
        return "f64"
    if "f32" in floats:
        return "f32"
    return "low" if floats else NEUTRAL


class _Types:
    """Float type of each local name ("f32", "f64", "low" or NEUTRAL; None: unknown), flow-
    insensitive: a name's type combines every value assigned to it, to a fixed point."""

    def __init__(self, kv: KernelView):
        self.kv = kv
        self.env: dict[str, str | None] = {p: NEUTRAL for p in kv.params}
        for _ in range(len(kv.assigns) + 1):
            new = {
                name: _combine([self.of(v) for v in values]) for name, values in kv.assigns.items()
            }
            if all(self.env.get(k, PENDING) == t for k, t in new.items()):
                break
            self.env.update(new)

    def _dtype_arg(self, call: ast.Call, position: int) -> str | None:
        arg = next((k.value for k in call.keywords if k.arg == "dtype"), None)
        if arg is None and len(call.args) > position:
            arg = call.args[position]
        name = self.kv.pm.aliases.canonical(arg) if arg is not None else None
        return _FLOATS.get(name[len(TL) :]) if name and name.startswith(TL) else None

    def of(self, e: ast.expr) -> str | None:
        if isinstance(e, ast.Constant):
            return NEUTRAL if isinstance(e.value, (int, float)) else None
        if isinstance(e, ast.Name):
            return (
                self.env.get(e.id, PENDING) if e.id in self.kv.assigns or e.id in self.env else None
            )
        if isinstance(e, ast.BinOp):
            return _combine([self.of(e.left), self.of(e.right)])
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
            return self.of(e.operand)
        if isinstance(e, ast.Subscript):
            return self.of(e.value)
        if isinstance(e, ast.IfExp):
            return _combine([self.of(e.body), self.of(e.orelse)])
        if isinstance(e, ast.Call):
            return self._call(e)
        return None

    def _call(self, e: ast.Call) -> str | None:
        if isinstance(e.func, ast.Name) and e.func.id in ("float", "int"):
            return NEUTRAL
        name = self.kv.pm.aliases.canonical(e.func) or ""
        if isinstance(e.func, ast.Attribute) and e.func.attr == "to" and not name.startswith(TL):
            return self._dtype_arg(e, 0)  # `<tile>.to(tl.float32)`
        name = name[len(TL) :] if name.startswith(TL) else None
        if name in ("zeros", "full"):
            return self._dtype_arg(e, 1 if name == "zeros" else 2)
        if name in ("arange", "program_id", "num_programs", "cdiv"):
            return NEUTRAL
        if (
            name in _ELEMENTWISE
        ):  # an integer axis argument is neutral; `where`'s condition is no value
            return _combine([self.of(a) for a in (e.args[1:] if name == "where" else e.args)])
        return None


def _is_exp(kv: KernelView, node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and kv.pm.aliases.canonical(node.func) in (
        f"{TL}exp",
        f"{TL}math.exp",
    )


class _ToExp2(ast.NodeTransformer):
    """Rewrites each `tl.exp` whose argument is fp32 (types are name-based, so the inference done
    on the kernel holds for its copy)."""

    def __init__(self, kv: KernelView, types: _Types):
        self.kv, self.types, self.count, self.skipped = kv, types, 0, 0

    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        if not (
            _is_exp(self.kv, node)
            and isinstance(node.func, ast.Attribute)
            and len(node.args) == 1
            and not node.keywords
        ):
            return node
        if self.types.of(node.args[0]) != "f32":
            self.skipped += 1
            return node
        self.count += 1
        scaled = ast.BinOp(left=node.args[0], op=ast.Mult(), right=ast.Constant(LOG2E))
        func = ast.Attribute(value=copy.deepcopy(node.func.value), attr="exp2", ctx=ast.Load())
        return ast.Call(func=func, args=[scaled], keywords=[])


@mutator(
    "exp2",
    "exponentials as tl.exp2 of a log2(e)-scaled fp32 argument (one ex2 instruction, no fix-up)",
)
def propose(ctx: MutationContext):
    kv = ctx.kernel
    if kv is None or not kv.uses("exp", "math.exp"):
        return
    rewrite = _ToExp2(kv, _Types(kv))
    new_fn = rewrite.visit(copy.deepcopy(kv.node))
    if not rewrite.count:
        return
    source = Edits(ctx.source).replace_function(kv.node, fix(new_fn)).apply()
    note = (
        f" ({rewrite.skipped} left as tl.exp: argument not provably fp32)"
        if rewrite.skipped
        else ""
    )
    yield Mutation(
        source,
        "exp2",
        f"{rewrite.count} `tl.exp(a)` rewritten as `tl.exp2(a * log2(e))`: one flush-to-zero "
        f"ex2 instruction an element instead of ex2 with its denormal fix-up{note}",
    )
