"""`kernelbrain init FILE::KERNEL --llm`: an LLM drafts the harness, the engine checks it.

From the kernel's module (its launcher wherever it is) and the stub `init` would write, the LLM
drafts a PyTorch reference and realistic inputs. The draft is untrusted code: it passes a static
gate (`policy.harness_gate`: nothing reached that the stub does not reach, nothing run at
import), then the original kernel is checked against the drafted reference with the five
correctness stages in the sandboxed judge, from a scratch copy under `.kernelbrain/drafts/`.
What failed goes back to the LLM for at most `max_repairs` more rounds. Only a harness the
original passes is offered, as the same config entry and module plain `init` writes.
"""

from __future__ import annotations

import ast
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..api.secrets import scrub
from ..evaluate.policy import harness_gate
from ..index import reach
from ..task.scaffold import Scaffold, plan
from ..task.spec import Task
from .answer import BadAnswer
from .client import LLMError
from .mutator import LLMMutator, LLMUnavailable
from .prompt import SOURCE_LIMIT

DRAFT_SYSTEM = """You write test harnesses for Triton GPU kernels. Given a Python module with a kernel and
the function that launches it (the entry), you write a module with three functions and answer
with JSON: {"rationale": "<what the entry computes and how the cases were chosen>",
"source": "<the complete harness module>"}.

- `<entry>_reference(...)`: the same arguments as the entry; computes what the entry returns
  with plain PyTorch (in float32 or wider where the kernel accumulates so), same shapes, dtypes
  and structure as the entry's result.
- `<entry>_inputs(device="cuda")`: a list of argument tuples for the entry at realistic sizes
  for a GPU (millions of elements; at least one size that is not a power of two), in the dtypes
  the kernel is written for.
- `<entry>_small_inputs(device="cpu")`: two or three tiny cases (at most a few thousand elements,
  one size not a multiple of the kernel's block) for the CPU interpreter.
- Respect every input's domain: integer indices within their range, sentinel values the kernel
  honours (such as an ignore index of -100), sizes that other arguments tie together.
- Import only torch and math; no other code at module level than imports and the three
  functions; no file, network, process or environment access."""


class DraftFailed(Exception):
    """No drafted harness held: the LLM was unavailable, or every round failed (the message
    says how the last one did)."""


@dataclass
class Draft:
    scaffold: Scaffold  # the config entry and the drafted harness module, to write
    rationale: str
    rounds: int
    checked: str  # what the original passed against the drafted reference
    failures: list[str] = field(default_factory=list)


def _messages(
    entry: str, source: str, stub: str, failure: str | None, draft: str | None
) -> list[dict]:
    user = (
        f"The entry is `{entry}`. The kernel's module:\n```python\n{scrub(source, limit=SOURCE_LIMIT)}\n```\n"
        f"The harness to fill in (keep these names and signatures):\n```python\n{stub}\n```"
    )
    if failure is not None and draft is not None:
        user += (
            f"\n\nYour previous harness failed:\n{scrub(failure, limit=1500)}\n\nIt was:\n"
            f"```python\n{scrub(draft, limit=SOURCE_LIMIT)}\n```\nFix it; answer with the complete "
            "corrected module. If the kernel itself differs from your reference, the reference "
            "is what must follow the kernel's intent as the code states it."
        )
    return [{"role": "system", "content": DRAFT_SYSTEM}, {"role": "user", "content": user}]


def _signature_problem(kernel_source: str, entry: str, draft: str, reference: str) -> str | None:
    want = reach.signature_of(ast.parse(kernel_source), entry)
    fn = next(
        (
            n
            for n in ast.parse(draft).body
            if isinstance(n, ast.FunctionDef) and n.name == reference
        ),
        None,
    )
    if want is None or fn is None:
        return None
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    if len(params) != len(want[0]):
        return (
            f"`{reference}({', '.join(params)})` does not take the entry's arguments "
            f"`{entry}({', '.join(want[0])})`"
        )
    return None


def draft_harness(
    file: str | Path,
    kernel: str,
    llm: LLMMutator,
    check,
    budget_s: float = 600.0,
) -> Draft:
    """Draft a harness for `kernel` and check the original against it. `check(task)` runs the
    correctness stages of the original on a Task and returns the harness result (injected: the
    CLI passes a sandboxed worker pool's)."""
    path = Path(file).resolve()
    scaffold = plan(path, kernel)
    source = path.read_text(encoding="utf-8")
    entry = scaffold.entry
    names = [f"{entry}_reference", f"{entry}_inputs", f"{entry}_small_inputs"]
    drafts = scaffold.config.parent / ".kernelbrain" / "drafts"
    drafts.mkdir(parents=True, exist_ok=True)
    scratch = drafts / scaffold.harness.name
    deadline = time.monotonic() + budget_s
    failures: list[str] = []
    failure = draft = None
    rounds = 1 + llm.settings.max_repairs
    try:
        for round_no in range(1, rounds + 1):
            try:
                answer = llm.ask(
                    _messages(entry, source, scaffold.harness_text, failure, draft),
                    deadline - time.monotonic(),
                )
            except LLMUnavailable as exc:
                raise DraftFailed(f"the LLM is unavailable: {exc}") from exc
            except (LLMError, BadAnswer) as exc:
                failure = f"round {round_no}: the answer was unusable: {scrub(str(exc), limit=300)}"
                failures.append(failure)
                if isinstance(exc, LLMError) and exc.kind in ("unreachable", "auth"):
                    raise DraftFailed(failure) from exc
                continue
            draft = answer.source
            rejected = harness_gate(draft, scaffold.harness_text, names)
            problem = (
                f"{rejected.message}" + (f" (line {rejected.line})" if rejected.line else "")
                if rejected is not None
                else _signature_problem(source, entry, draft, names[0])
            )
            if problem is None:
                scratch.write_text(draft, encoding="utf-8")
                task = Task(
                    kind="config",
                    file=str(path),
                    kernel=kernel,
                    entry=entry,
                    reference_module=str(scratch),
                    reference=names[0],
                    inputs=f"{scratch}:{names[1]}",
                    small_inputs=f"{scratch}:{names[2]}",
                    root=str(scaffold.config.parent),
                )
                result = check(task)
                if result.accepted:
                    stages = ", ".join(dict.fromkeys(c.stage for c in result.cases))
                    return Draft(
                        replace(scaffold, harness_text=draft),
                        answer.description,
                        round_no,
                        f"{len(result.cases)} cases ({stages})",
                        failures,
                    )
                problem = f"the original kernel fails it ({result.reason}): {result.message}"
            failure = f"round {round_no}: {problem}"
            failures.append(failure)
        raise DraftFailed(
            f"no drafted harness held after {rounds} rounds; the last: {failures[-1] if failures else '-'}"
        )
    finally:
        scratch.unlink(missing_ok=True)


def draft_checked(file: str | Path, kernel: str, llm: LLMMutator, device: str) -> Draft:
    """`draft_harness` with the original checked in a sandboxed worker pool of its own on
    `device`: what `init --llm` and the editor's KB003 quick fix both run."""
    from ..evaluate.pool import WorkerPool
    from ..evaluate.verify import run_harness

    with WorkerPool() as pool:
        return draft_harness(file, kernel, llm, lambda task: run_harness(pool, task, None, device))
