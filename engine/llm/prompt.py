"""The prompt: what the engine knows about the kernel, in the manner of the playbook's tiers.

One focused change per proposal, so that a failure teaches something. The model sees the
module as it stands (the parent candidate), the kernel and entry names it must keep, the
harness's cases and tolerances, the static findings on the source, what the compiler did with
it (KB2xx), where the original stands on the roofline (KB3xx, when measured), torch.compile's
time per case and the Triton kernels it writes for the reference (where the search lowered
it), what made the best
variants of similar kernels before (the experience memory), the best so far, and what was
already tried with how it ended. Every piece of workspace text that goes in is scrubbed of
secrets and cut to size: the workspace is untrusted, and the endpoint is someone else's server.
"""

from __future__ import annotations

import builtins
import re
from dataclasses import dataclass, field

from ..api.secrets import scrub
from ..rules import check_module

SOURCE_LIMIT = 24_000  # characters of the module shown (a kernel file is rarely longer)
TRIED_SHOWN = 8
FAILURE_LIMIT = 600
COMPILER_LIMIT = 6_000  # characters of Inductor's kernels shown (a fused kernel is ~1-3k)

SYSTEM = """You are an expert in writing fast Triton GPU kernels for NVIDIA Hopper (H100/H200, sm_90).
You improve one kernel of a Python module, one focused change at a time, and answer with JSON:
{"rationale": "<the one change and why it is faster>", "source": "<the complete new module>"}.

Rules, all checked by machine; a proposal that breaks one is rejected:
- Keep the kernel's name and runtime parameters, and the entry function's name and signature.
- Compute the result with Triton kernels only: no PyTorch or NumPy compute on the inputs in
  the launcher (allocating outputs and taking views is fine).
- No state between calls (module-level caches, attributes), no imports beyond triton, torch,
  math and what the module already imports, no file, network, process or environment access.
- Do not hard-code one input's shape; the result must be correct for every shape the harness
  tries, including sizes that are not multiples of the block.
- Return the whole module, every line of it, not a diff and not only the kernel."""


@dataclass
class Diagnosis:
    """What the search knows when it asks: the cases, the best so far, what was tried."""

    cases: list[str] = field(default_factory=list)
    measured: bool = False
    best_speedup: float | None = None
    best_description: str = ""
    tried: list[tuple[str, str]] = field(default_factory=list)  # (what changed, how it ended)
    notes: list[str] = field(default_factory=list)
    compiled: list[str] = field(default_factory=list)  # KB2xx on the module shown
    roofline: list[str] = field(default_factory=list)  # per case: the original's place (KB3xx)
    past_wins: list[str] = field(default_factory=list)  # chains that paid on similar kernels
    compiler: list[str] = field(default_factory=list)  # per case: the original vs torch.compile
    compiler_kernels: str = ""  # Inductor's Triton kernels of the reference (one case)


def _scrubbed(text: str, limit: int) -> str:
    return scrub(text, limit=limit)


# Rejections whose message quotes what the candidate's own code wrote (an exception's text, a
# worker's stderr, a compiler error around the candidate's lines): a candidate can put anything
# there (a secret it read, instructions to the model), so the model is told only the reason,
# the exception's type when it is a known one, and the line.
CANDIDATE_WORDED = frozenset(
    {
        "exception", "crash", "compile-error", "load-error", "interpreter-gap", "cuda-error",
        "illegal-memory-access", "out-of-memory", "protocol", "harness-error", "syntax-error",
        "bad-answer", "segfault", "abort", "died", "tampered",
    }
)  # fmt: skip
KNOWN_ERRORS = frozenset(
    {"CompilationError", "OutOfResources", "AcceleratorError", "InterpreterError"}
)
_ERROR_NAME = re.compile(r"\b([A-Z][A-Za-z]*(?:Error|Exception))\b")
_LINE = re.compile(r"\bline (\d{1,6})\b")


def failure_told(rung: str, reason: str, message: str) -> str:
    """What the model is told of a rejection: `rung: reason: detail`, where the detail is the
    engine's own words (a mismatch's counts and worst element, a timeout, a gate rule), or, for
    a reason in CANDIDATE_WORDED, only a known exception type and a line number."""
    if reason not in CANDIDATE_WORDED:
        return f"{rung}: {reason}: {_scrubbed(message, FAILURE_LIMIT)}"
    names = [
        n
        for n in _ERROR_NAME.findall(message)
        if n in KNOWN_ERRORS or isinstance(getattr(builtins, n, None), type)
    ]
    line = _LINE.search(message)
    detail = (names[0] if names else "an error") + (f" at line {line.group(1)}" if line else "")
    return f"{rung}: {reason}: {detail} (its message is not shown: the candidate wrote it)"


def proposal_messages(ctx, diagnosis: Diagnosis) -> list[dict]:
    """Messages asking for one new variant of the module in `ctx`."""
    task = ctx.task
    findings = [
        f"- {f.code} (line {f.span.line + 1}): {f.message}"
        for f in check_module(ctx.module)
        if f.kernel in (None, task.kernel)
    ][:12]
    parts = [
        f"Kernel to make faster: `{task.kernel}`; the harness calls `{task.entry}`.",
        f"Tolerances: rtol {task.rtol or 'per dtype'}, atol {task.atol or 'per dtype'}.",
    ]
    if diagnosis.cases:
        parts.append("Benchmark cases (arguments): " + "; ".join(diagnosis.cases[:8]))
    speed = "measured on the GPU" if diagnosis.measured else "estimated by a cost model (no GPU)"
    if diagnosis.best_speedup:
        parts.append(
            f"Best so far: {diagnosis.best_speedup:.2f}x the original ({speed}): "
            f"{_scrubbed(diagnosis.best_description, 400)}"
        )
    if findings:
        parts.append("Static analysis of the module below:\n" + "\n".join(findings))
    if diagnosis.compiled:
        parts.append(
            "What the compiler did with it (sm_90):\n"
            + "\n".join(f"- {_scrubbed(f, 400)}" for f in diagnosis.compiled[:8])
        )
    if diagnosis.roofline:
        parts.append(
            "Where the original stands (roofline, measured):\n"
            + "\n".join(f"- {_scrubbed(f, 300)}" for f in diagnosis.roofline[:8])
        )
    if diagnosis.compiler:
        parts.append(
            "torch.compile of the task's reference, timed beside the original (the user has "
            "this for free; beat it):\n"
            + "\n".join(f"- {_scrubbed(f, 300)}" for f in diagnosis.compiler[:8])
        )
    if diagnosis.compiler_kernels:
        parts.append(
            "What torch.compile writes for the reference (Inductor's Triton kernels, with the "
            "configuration it chose; the search already tries them as they are):\n```python\n"
            + _scrubbed(diagnosis.compiler_kernels, COMPILER_LIMIT)
            + "\n```"
        )
    if diagnosis.past_wins:
        parts.append(
            "On similar kernels searched before, these rewrites made the best variant "
            "(the offline mutators' names): " + "; ".join(diagnosis.past_wins[:4])
        )
    if diagnosis.tried:
        tried = "\n".join(
            f"- {_scrubbed(what, 200)}: {_scrubbed(how, FAILURE_LIMIT)}"
            for what, how in diagnosis.tried[-TRIED_SHOWN:]
        )
        parts.append("Already tried (do not repeat these):\n" + tried)
    for note in diagnosis.notes[:4]:
        parts.append(_scrubbed(note, 400))
    parts.append(
        "The module:\n```python\n" + _scrubbed(ctx.source, SOURCE_LIMIT) + "\n```\n"
        "Propose one change that makes the kernel faster on these cases."
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def repair_messages(ctx, rationale: str, failure: str) -> list[dict]:
    """Messages asking to fix a proposal that failed to compile or to verify."""
    return [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": (
                f"Your rewrite of `{ctx.task.kernel}` ({_scrubbed(rationale, 400)}) failed:\n"
                f"{_scrubbed(failure, 1500)}\n\nThe module you proposed:\n```python\n"
                f"{_scrubbed(ctx.source, SOURCE_LIMIT)}\n```\n"
                "Fix this failure, keeping the idea if it can be made correct; answer with the "
                "complete corrected module."
            ),
        },
    ]
