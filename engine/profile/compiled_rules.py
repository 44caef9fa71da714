"""Compiled-view diagnostics (KB2xx): what the compiler did with a kernel, with the evidence.

Each rule reads the facts of one compiled specialisation (`CompiledFacts`) and the launch it
came from (`LaunchRecord`), and says what costs time and what to do instead.
"""

from __future__ import annotations

from ..api.device import REGS_PER_SM, SMEM_PER_SM
from ..api.facts import CompiledFacts, LaunchRecord

ELEMENT_BITS = {
    "bf16": 16,
    "fp16": 16,
    "fp32": 32,
    "fp64": 64,
    "i8": 8,
    "u8": 8,
    "i16": 16,
    "i32": 32,
    "i64": 64,
}


def _config(rec: LaunchRecord) -> str:
    consts = [
        f"{a.name}={a.value}"
        for a in rec.args
        if a.kind == "constexpr" and isinstance(a.value, int)
    ]
    consts += [f"{k}={v}" for k, v in rec.config.items()]
    return ", ".join(consts + [f"num_warps={rec.num_warps}", f"num_stages={rec.num_stages}"])


def compiled_findings(
    rec: LaunchRecord, facts: CompiledFacts, target: str = "sm_90"
) -> list[tuple[str, str, str]]:
    """(code, severity, message) for one compiled specialisation."""
    out: list[tuple[str, str, str]] = []
    where = f"at {_config(rec)} ({target})"
    if not facts.ok:
        out.append(("KB200", "error", f"does not compile for {target} {where}: {facts.error}"))
        return out
    if facts.n_spills:
        out.append(
            (
                "KB201",
                "warning",
                f"{facts.n_spills} bytes spilled per thread {where}: spilled values go through local "
                f"memory (slow, and extra traffic). Raise num_warps or split the tile so fewer values are "
                f"live per thread.",
            )
        )
    ptr_bits = [ELEMENT_BITS.get(a.dtype or "", 32) for a in rec.args if a.kind == "ptr"]
    loads = {int(w): n for w, n in facts.global_load_bits.items()}
    if loads and not facts.tensor_core_ops:
        widest = max(loads)
        narrow = sum(n for w, n in loads.items() if w < 64)
        if widest < 128 and narrow and ptr_bits and min(ptr_bits) < widest * 4:
            out.append(
                (
                    "KB202",
                    "warning",
                    f"global loads are at most {widest}-bit {where} ({narrow} narrow load instruction"
                    f"{'s' if narrow != 1 else ''}): each thread moves few bytes per request. Give each thread "
                    f">= 16 contiguous bytes (more elements per thread, contiguous and 16-byte aligned "
                    f"offsets) so loads become 128-bit.",
                )
            )
    if facts.occupancy is not None and facts.occupancy < 0.25:
        limiter = (
            "registers"
            if facts.n_regs and facts.n_regs * 32 * facts.num_warps > REGS_PER_SM // 4
            else "shared memory"
            if (facts.shared_bytes or 0) > SMEM_PER_SM // 4
            else "warps per block"
        )
        out.append(
            (
                "KB203",
                "information",
                f"theoretical occupancy {facts.occupancy:.0%} {where} ({facts.n_regs} registers/thread, "
                f"{(facts.shared_bytes or 0) // 1024} KB shared), limited by {limiter}: few warps to hide "
                f"memory latency unless each has much independent work.",
            )
        )
    return out


def tensor_core_finding(
    uses_dot: bool, facts: CompiledFacts, rec: LaunchRecord, target: str = "sm_90"
):
    """KB204: a `tl.dot` kernel compiled without tensor-core instructions."""
    if uses_dot and facts.ok and facts.tensor_core_ops == 0:
        return (
            "KB204",
            "warning",
            f"`tl.dot` compiled without tensor-core instructions at {_config(rec)} ({target}): it runs on the "
            f"FMA units at a fraction of the matrix rate. Use bf16/fp16 operands (or input_precision='tf32') "
            f"and tiles of at least 16 in every dimension.",
        )
    return None
