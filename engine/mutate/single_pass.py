"""Keep a row in registers and read it once when it fits (KB101 fixed).

A kernel that loops over a row several times (max, sum, normalise) gets a constexpr switch
`ONE_PASS`: when set, every loop runs exactly once over a block covering the whole row, the
loops become straight-line code, and repeated loads of the row are dropped, so the row is read
from global memory once. The launcher sets the switch when the row fits in registers
(<= 32,768 elements) and falls back to the original looping kernel otherwise.
"""

from __future__ import annotations

import ast
import copy

from .dataflow import deloop, fix, remove_repeated_values, row_loops, unique_name
from .edits import Edits
from .registry import Mutation, MutationContext, mutator

# Elements kept in registers: 64 fp32 per thread at 16 warps. Compiled for sm_90, a 32,768-wide
# single-pass softmax takes 115 registers and cross_entropy 79, neither spills; at 16,384 the
# 1024x32768 softmax case kept the three-pass loop (36% of copy bandwidth on an H200).
MAX_ROW = 32768


@mutator("single-pass", "keep the row in registers and read it once when it fits")
def propose(ctx: MutationContext):
    kv = ctx.kernel
    if kv is None or kv.kernel.autotuned or "ONE_PASS" in kv.params:
        return
    constexprs = set(kv.kernel.constexprs)
    runtime = {p.name for p in kv.kernel.params if not p.constexpr}
    loops = row_loops(kv.node, constexprs, runtime)
    keys = {(ast.unparse(lp.iter.args[1]), ast.unparse(lp.iter.args[2])) for lp in loops}
    if len(loops) < 2 or len(keys) != 1:
        return  # needs several passes over the same row, chunked by one constexpr block
    ((n_param, block_param),) = keys
    launches = [lv for lv in ctx.entry_launches() if n_param in lv.args and lv.launcher is not None]
    if not launches:
        return
    fused, removed = remove_repeated_values(deloop(kv.node.body, loops))
    if removed == 0:
        return  # nothing was read twice: no pass saved
    new_fn = copy.deepcopy(kv.node)
    new_fn.body = [
        ast.If(
            test=ast.Name(id="ONE_PASS", ctx=ast.Load()),
            body=fused,
            orelse=copy.deepcopy(kv.node.body),
        )
    ]
    new_fn.args.args.append(
        ast.arg(
            arg="ONE_PASS",
            annotation=ast.Attribute(
                value=ast.Name(id="tl", ctx=ast.Load()), attr="constexpr", ctx=ast.Load()
            ),
        )
    )
    new_fn.args.defaults.append(ast.Constant(False))  # other callers keep the looping kernel
    edits = Edits(ctx.source)
    edits.replace_function(kv.node, fix(new_fn))
    for lv in launches:
        stmt = lv.statement
        if stmt is None:
            return
        taken = {n.id for n in ast.walk(lv.launcher) if isinstance(n, ast.Name)}
        block = unique_name("row_block", taken)
        one = unique_name("one_pass", taken)
        original_block = edits.text(lv.args[block_param]) if block_param in lv.args else None
        if original_block is None:
            return
        warps = lv.options.get("num_warps")
        fallback_warps = edits.text(warps) if warps is not None else "4"
        edits.insert_before(
            stmt,
            f"{block} = triton.next_power_of_2({edits.text(lv.args[n_param])})\n"
            f"{one} = {block} <= {MAX_ROW}  # the whole row fits in registers",
        )
        edits.replace(lv.args[block_param], f"{block} if {one} else {original_block}")
        edits.add_keyword(lv.call, "ONE_PASS", one)
        edits.add_keyword(
            lv.call, "num_warps", f"min(16, max(4, {block} // 256)) if {one} else {fallback_warps}"
        )
    yield Mutation(
        edits.apply(),
        "single-pass",
        f"rows up to {MAX_ROW} elements are read once and kept in registers ({len(loops)} passes over "
        f"`{n_param}` became one; {removed} repeated load{'s' if removed != 1 else ''} removed); longer rows keep the looping kernel",
    )
