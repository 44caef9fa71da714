"""The compiled view (worker only): ahead-of-time compilation for a target GPU, no driver needed.

`triton.compile(ASTSource(...), target=GPUTarget("cuda", arch, 32))` gives PTX and a cubin on any
machine. Registers, spills and stack come from `cuobjdump -res-usage` on the cubin; global
load/store widths, tensor-core and local-memory instructions from its SASS (the cuobjdump bundled
in the triton wheel). Pointers get the 16-byte divisibility the JIT infers for fresh allocations,
and integers divisible by 16 are marked so, or loads would look scalar. The specialisation is
written exactly as the JIT writes it, so a cubin compiled here is the one the JIT would build.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from ..api.device import (
    MAX_BLOCKS_PER_SM,
    MAX_WARPS_PER_SM,
    REGS_PER_SM,
    SMEM_PER_PROGRAM,
    SMEM_PER_SM,
)
from ..api.facts import CompiledFacts, LaunchRecord
from ..protocol import Compile

REG_RE = re.compile(r"REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")
LDG_RE = re.compile(r"\bLDG(?:STS)?\.E(?:\.([A-Z0-9_.]+))?")  # LDGSTS: async copy to shared
STG_RE = re.compile(r"\bSTG\.E(?:\.([A-Z0-9_.]+))?")
# One SASS instruction: its address comment, an optional predicate, the opcode.
INSTR_RE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)([^;]*)")
BRA_TARGET_RE = re.compile(r"^\s*`?\(?(0x[0-9a-f]+)")
WIDTHS = {"64": 64, "128": 128, "U8": 8, "S8": 8, "U16": 16, "S16": 16}
# AOT compiles report a launch's shared memory, so one over SMEM_PER_PROGRAM is refused at the
# compile rung: on the H200 four attention re-tilings (264-416 KB) passed compile and the small
# smoke inputs and failed only when timed, each after a quick timing.


def _tool(name: str) -> str | None:
    import triton

    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    return str(bundled) if bundled.exists() else shutil.which(name)


def _signature(rec: LaunchRecord):
    signature, constexprs, attrs = {}, {}, {}
    for i, a in enumerate(rec.args):
        if a.kind == "constexpr":
            signature[a.name] = "constexpr"
            constexprs[a.name] = a.value
        elif a.kind == "ptr":
            signature[a.name] = f"*{a.dtype}"
            attrs[(i,)] = [["tt.divisibility", 16]] if a.aligned else []
        elif a.kind == "int" and a.value == 1 and a.dtype != "i1":
            signature[a.name] = (
                "constexpr"  # as the JIT does: an integer equal to 1 is specialised away
            )
            constexprs[a.name] = 1
        elif a.kind == "int" and a.dtype == "i1":
            signature[a.name] = "u1"
        elif a.kind == "int":
            signature[a.name] = a.dtype
            # As the JIT does, including an empty entry for an integer that is not a multiple of
            # 16 (0 is one): the attributes are part of Triton's cache key, so the GPU worker's
            # JIT loads these cubins only if they match (engine/search/prewarm.py).
            divisible = isinstance(a.value, int) and a.value % 16 == 0
            attrs[(i,)] = [["tt.divisibility", 16]] if divisible else []
        elif a.kind == "float":
            signature[a.name] = "fp32"
        else:
            signature[a.name] = "constexpr"
            constexprs[a.name] = None
    for k, v in rec.config.items():
        constexprs[k] = v
    return signature, constexprs, attrs


def _width(suffix: str | None) -> int:
    if not suffix:
        return 32
    for part in suffix.split("."):
        if part in WIDTHS:
            return WIDTHS[part]
    return 32


def sass_facts(sass: str) -> tuple[dict[str, int], dict[str, int], int, int, int, int]:
    """Load and store widths, tensor-core and local-memory instructions, the instruction count
    (padding NOPs left out) and how many of those sit in loops, between a backward branch and its
    target. ptxas unrolls loops (the first-draft rmsnorm's first loop by 4, its remainder peeled),
    so a loop body's trip count is not the source's."""
    loads: dict[str, int] = {}
    stores: dict[str, int] = {}
    for m in LDG_RE.finditer(sass):
        w = str(_width(m.group(1)))
        loads[w] = loads.get(w, 0) + 1
    for m in STG_RE.finditer(sass):
        w = str(_width(m.group(1)))
        stores[w] = stores.get(w, 0) + 1
    tensor = len(re.findall(r"\b(HGMMA|HMMA|IMMA|QGMMA|WGMMA)\b", sass))
    local = len(re.findall(r"\b(LDL|STL)\b", sass))
    code = [
        (int(m.group(1), 16), m.group(2), m.group(3))
        for m in INSTR_RE.finditer(sass)
        if m.group(2) != "NOP"
    ]
    loops = [
        (int(t.group(1), 16), addr)
        for addr, op, rest in code
        if op.startswith("BRA") and (t := BRA_TARGET_RE.match(rest)) and int(t.group(1), 16) < addr
    ]
    in_loops = sum(1 for addr, _, _ in code if any(lo <= addr <= hi for lo, hi in loops))
    return loads, stores, tensor, local, len(code), in_loops


def occupancy(n_regs: int | None, shared: int | None, num_warps: int) -> float:
    threads = 32 * num_warps
    blocks = min(MAX_BLOCKS_PER_SM, MAX_WARPS_PER_SM // num_warps)
    if n_regs:
        blocks = min(blocks, REGS_PER_SM // (max(n_regs, 1) * threads))
    if shared:
        blocks = min(blocks, SMEM_PER_SM // shared)
    return max(blocks, 0) * num_warps / MAX_WARPS_PER_SM


def _jit_function(module, name: str):
    """The JITFunction under any @autotune/@heuristics wrappers."""
    from triton.runtime.jit import JITFunction

    fn = getattr(module, name)
    while not isinstance(fn, JITFunction) and hasattr(fn, "fn"):  # Autotuner also has arg_names
        fn = fn.fn
    return fn


def compile_one(
    fn, rec: LaunchRecord, arch: int, want_sass: bool, maxnreg: int | None = None
) -> CompiledFacts:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    t0 = time.perf_counter()
    signature, constexprs, attrs = _signature(rec)
    try:
        src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
        options = {"num_warps": rec.num_warps, "num_stages": rec.num_stages}
        if maxnreg:
            options["maxnreg"] = maxnreg
        kernel = triton.compile(src, target=GPUTarget("cuda", arch, 32), options=options)
    except Exception as exc:
        msg = f"{type(exc).__name__}: {exc}".strip().splitlines()
        return CompiledFacts(
            rec.kernel,
            False,
            error=" ".join(msg[-3:])[:600],
            num_warps=rec.num_warps,
            num_stages=rec.num_stages,
            compile_s=time.perf_counter() - t0,
        )
    facts = CompiledFacts(
        rec.kernel,
        True,
        num_warps=rec.num_warps,
        num_stages=rec.num_stages,
        shared_bytes=int(getattr(kernel.metadata, "shared", 0) or 0),
    )
    cuobjdump = _tool("cuobjdump")
    if cuobjdump and "cubin" in kernel.asm:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "k.cubin")
            with open(path, "wb") as f:
                f.write(kernel.asm["cubin"])
            usage = subprocess.run(
                [cuobjdump, "-res-usage", path], capture_output=True, text=True
            ).stdout
            if (m := REG_RE.search(usage)) is not None:
                # spills live in the per-thread stack frame (STACK), not in LOCAL (seen with sm_90 cubins)
                facts.n_regs, facts.local_bytes = int(m.group(1)), int(m.group(2)) + int(m.group(4))
                facts.shared_bytes = max(facts.shared_bytes or 0, int(m.group(3)))
            if want_sass:
                sass = subprocess.run(
                    [cuobjdump, "-sass", path], capture_output=True, text=True
                ).stdout
                (
                    facts.global_load_bits,
                    facts.global_store_bits,
                    facts.tensor_core_ops,
                    facts.local_memory_ops,
                    facts.instructions,
                    facts.loop_instructions,
                ) = sass_facts(sass)
    # Local memory in a Triton kernel is register spilling: its size per thread is the spill.
    facts.n_spills = (facts.local_bytes or 0) if facts.local_memory_ops else 0
    facts.occupancy = occupancy(facts.n_regs, facts.shared_bytes, rec.num_warps)
    facts.compile_s = time.perf_counter() - t0
    if (facts.shared_bytes or 0) > SMEM_PER_PROGRAM and not rec.config:
        # (an autotuner skips a configuration the GPU refuses, so only a fixed launch fails)
        facts.ok = False
        facts.error = (
            f"needs {facts.shared_bytes} bytes of shared memory a program; sm_90 gives one at "
            f"most {SMEM_PER_PROGRAM} (the launch fails with OutOfResources): smaller tiles or "
            "fewer stages"
        )
    return facts


def compile_launches(loader, req: Compile) -> list[CompiledFacts]:
    module = loader.load(req.source, req.file, [str(Path(req.file).parent)])
    out = []
    for rec in req.launches:
        try:
            fn = _jit_function(module, rec.kernel)
        except AttributeError:
            out.append(CompiledFacts(rec.kernel, False, error=f"kernel {rec.kernel} not found"))
            continue
        out.append(compile_one(fn, rec, req.arch, req.sass, req.maxnreg))
    return out
