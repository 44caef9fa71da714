"""The LLM mutator against an OpenAI-compatible server on 127.0.0.1 that scripts its answers
(`scripted_llm.py`), through the whole search on the CPU: a good rewrite is verified and tagged; a failing rewrite is repaired by the second
answer; garbage, cut-off, slow and rate-limited answers cost a proposal, never the search; the
token cap holds; an endpoint that is down is said once. The LLM's attacks (cheating rewrites,
the key's exfiltration) are in `tests/adversarial/test_llm_attacks.py`."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from kernelbrain.engine.api.request import LLMOptions, OptimizeRequest
from kernelbrain.engine.llm.answer import BadAnswer, decode
from kernelbrain.engine.service import optimize

from .conftest import EXAMPLES
from .scripted_llm import Answer, Raw, ScriptedLLM, Slow, Status, rewrite

SENTINEL = "sk-kbsentinel-0123456789abcdefXYZ"
ORIGINAL = (EXAMPLES / "ops" / "gelu.py").read_text()
GOOD = ORIGINAL.replace(
    "gelu_kernel[(triton.cdiv(n, 64),)](x, out, n, BLOCK=64, num_warps=1)",
    "# 1024-element tiles on four warps keep every SM streaming\n"
    "    gelu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024, num_warps=4)",
)
BROKEN = GOOD.replace("tl.arange(0, BLOCK)", "tl.arange(0, BLOCK, 7)")


@pytest.fixture
def ws(tmp_path) -> Path:
    dest = tmp_path / "ws"
    shutil.copytree(EXAMPLES, dest, ignore=shutil.ignore_patterns(".kernelbrain", "__pycache__"))
    return dest


def search(ws: Path, server: ScriptedLLM, **settings):
    llm = LLMOptions(
        model="scripted",
        base_url=server.base_url,
        timeout_s=settings.pop("timeout_s", 30.0),
        max_retries=settings.pop("max_retries", 1),
        concurrency=1,
        proposals_per_generation=settings.pop("proposals", 1),
        max_completion_tokens=2000,
        **settings,
    )
    notices: list[str] = []
    result = optimize(
        OptimizeRequest(
            str(ws / "ops" / "gelu.py"),
            "gelu_kernel",
            budget_s=120,
            device="cpu",
            mutators=[],  # the LLM alone: what it proposed is all there is
            llm=llm,
        ),
        llm_key=SENTINEL,
        on_notice=notices.append,
    )
    return result, notices


def llm_variants(result):
    return [v for v in result.variants if v.llm]


def test_decoding_answers():
    assert decode(json.dumps({"rationale": "r", "source": "x = 1"})).source == "x = 1"
    chatty = 'Sure! {"rationale": "bigger tiles", "source": "y = {1: 2}"} Hope it helps.'
    assert decode(chatty).source == "y = {1: 2}"
    assert decode("Bigger tiles:\n```python\nz = 3\n```\n").source == "z = 3\n"
    for bad in ("", "no code here", '{"rationale": "r", "sour'):
        with pytest.raises(BadAnswer):
            decode(bad)
    with pytest.raises(BadAnswer, match="cut off"):
        decode(json.dumps({"rationale": "r", "source": "x"}), finish_reason="length")


@pytest.mark.slow
def test_a_good_rewrite_is_verified_and_tagged(ws):
    with ScriptedLLM([rewrite(GOOD, "64-element tiles on one warp leave the SMs idle")]) as llm:
        result, _ = search(ws, llm)
    (variant,) = llm_variants(result)
    assert variant.origin == "llm" and "one warp" in variant.description
    assert set(variant.verified) >= {"smoke", "sweep", "stability", "determinism", "edge"}
    first = llm.requests[0]["body"]
    assert first["response_format"]["type"] == "json_schema"
    prompt = first["messages"][-1]["content"]
    assert "gelu_kernel" in prompt and "KB102" in prompt  # the source and the static diagnosis
    # what the compiler did with the 64-element tile on one warp (KB202: narrow loads)
    assert "What the compiler did with it (sm_90):\n- KB202" in prompt, prompt
    n = len(llm.requests)  # one a generation, on the best so far
    assert result.budget.spent.llm_tokens == 1500 * n and result.budget.limits.llm_tokens > 0
    assert any(f"LLM (scripted): {n} requests (ok {n})" in note for note in result.notes)


@pytest.mark.slow
def test_a_failing_rewrite_is_repaired_by_the_second_answer(ws):
    with ScriptedLLM(
        [rewrite(BROKEN, "bigger tiles"), rewrite(GOOD, "bigger tiles, fixed")]
    ) as llm:
        result, _ = search(ws, llm, max_repairs=1)
    assert [v.description for v in llm_variants(result)] == ["bigger tiles, fixed"]
    repair = llm.requests[1]["body"]["messages"][-1]["content"]
    assert "failed" in repair  # the rejection went back: its rung and reason, not its words
    assert "tl.arange(0, BLOCK, 7)" in repair  # with the failing module


@pytest.mark.slow
def test_garbage_slow_and_rate_limited_answers_cost_a_proposal_not_the_search(ws):
    script = [
        Raw(b"<html>not a completion</html>"),
        Answer("I would use bigger tiles."),  # no JSON, no code
        Answer('{"rationale": "bigger", "source": "import tor', finish_reason="length"),
        Slow(4.0, rewrite(GOOD)),  # past the timeout, and so is the retry
        Slow(4.0, rewrite(GOOD)),
        Status(429, headers={"retry-after": "0"}),  # rate-limited, then the retry succeeds
        rewrite(GOOD, "after a 429"),
    ]
    with ScriptedLLM(script) as llm:
        result, _ = search(ws, llm, proposals=5, timeout_s=1.5, max_repairs=0)
    assert [v.description for v in llm_variants(result)] == ["after a 429"]
    summary = next(n for n in result.notes if n.startswith("LLM (scripted)"))
    for kind in ("bad-answer 2", "server 1", "timeout 1", "ok "):
        assert kind in summary, summary


@pytest.mark.slow
def test_the_token_cap_holds(ws):
    costly = rewrite(GOOD, prompt_tokens=3000, completion_tokens=1000)
    with ScriptedLLM([costly]) as llm:
        result, _ = search(ws, llm, proposals=4, max_tokens=12_000)
    spent = result.budget.spent.llm_tokens
    assert 0 < spent <= 12_000 and len(llm.requests) < 4  # the script would spend 16,000
    assert any("token budget" in n for n in result.notes)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(ws: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "kernelbrain.engine.cli.main",
            "optimize",
            "ops/gelu.py::gelu_kernel",
        ]
        + ["--device", "cpu", "--budget", "60s", "--max-candidates", "4", "--llm", *args],
        cwd=ws,
        env=os.environ | env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_an_endpoint_that_is_down_is_said_once_and_the_search_goes_on_offline(ws):
    env = {
        "KERNELBRAIN_API_KEY": SENTINEL,
        "KERNELBRAIN_LLM_BASE_URL": f"http://127.0.0.1:{_closed_port()}/v1",
    }
    proc = _cli(ws, env, "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr.count("LLM off") == 1, proc.stderr
    assert "cannot reach" in proc.stderr and "offline" in proc.stderr
    out = json.loads(proc.stdout)
    assert out["variants"] and not any(v["llm"] for v in out["variants"])


def test_no_key_is_said_once_and_nothing_is_sent(ws):
    with ScriptedLLM([rewrite(GOOD)]) as llm:
        env = {
            "KERNELBRAIN_LLM_BASE_URL": llm.base_url,
            "KERNELBRAIN_API_KEY": "",
            "OPENAI_API_KEY": "",
        }
        proc = _cli(ws, env, "--json", "--max-candidates", "1", "--budget", "20s")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr.count("LLM off: no API key") == 1 and not llm.requests


def test_the_prompt_carries_the_roofline_and_what_paid_on_similar_kernels():
    from kernelbrain.engine.api.facts import CaseBench, Ceilings
    from kernelbrain.engine.llm.prompt import Diagnosis, proposal_messages
    from kernelbrain.engine.mutate import MutationContext
    from kernelbrain.engine.profile.measured import roofline
    from kernelbrain.engine.task import find_task

    ceilings = Ceilings("H200", copy_gbps=4000.0, bf16_tflops=700.0)
    slow = CaseBench("bfloat16[1048576]", 0.05, 0.01, 50_000_000, None, 1000.0, None, None,
                     "memory", False)  # fmt: skip
    tiny = CaseBench("bfloat16[4096]", 0.004, 0.01, 16_384, None, 4.0, None, None,
                     "memory", False)  # fmt: skip
    lines = roofline([slow, tiny], ceilings)
    assert lines[0].startswith("KB301 bfloat16[1048576]: memory-bound at 25%"), lines
    assert lines[1].startswith("KB303 bfloat16[4096]: latency-bound"), lines
    task = find_task(EXAMPLES / "ops" / "gelu.py", "gelu_kernel")
    ctx = MutationContext(task, ORIGINAL)
    diagnosis = Diagnosis(
        cases=["bfloat16[1048576]"], measured=True, roofline=lines, past_wins=["config+hints"]
    )
    prompt = proposal_messages(ctx, diagnosis)[-1]["content"]
    assert "Where the original stands (roofline, measured):\n- KB301" in prompt
    assert (
        "these rewrites made the best variant (the offline mutators' names): config+hints" in prompt
    )
    bare = proposal_messages(ctx, Diagnosis())[-1]["content"]
    assert "roofline" not in bare and "similar kernels" not in bare


def test_the_prompt_shows_what_torch_compile_writes_and_its_times_scrubbed():
    """Where the search lowered the reference: torch.compile's time per case beside the
    original's, and Inductor's kernels with the configuration it chose, scrubbed of secrets
    (the reference is workspace code, and so is what the compiler made of it)."""
    from kernelbrain.engine.llm.prompt import Diagnosis, proposal_messages
    from kernelbrain.engine.mutate import MutationContext
    from kernelbrain.engine.search.llm_step import compiler_lines
    from kernelbrain.engine.search.lowering_step import compiler_configs, compiler_kernels
    from kernelbrain.engine.search.population import Population
    from kernelbrain.engine.task import find_task

    from .mutate.test_lowering import case_with

    secret = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
    kernels = compiler_kernels([case_with(kernel_line=f"note = '{secret}'")])
    assert kernels.startswith("# triton_poi_0 (default): {'XBLOCK': 64}, num_warps=4")
    assert "def triton_poi_0(in_ptr0, out_ptr0, xnumel" in kernels and secret in kernels
    assert "triton_heuristics" not in kernels  # the kernel alone, not Inductor's decorator
    # what it chose goes to the config mutator too (`MutationContext.suggested`), each once
    assert compiler_configs([case_with(), case_with("pass")]) == [
        {"XBLOCK": 64, "num_warps": 4, "num_stages": 1}
    ]
    pop = Population(gpu=True)
    pop.labels, pop.baseline_us = ["float32[64]"], [9.0]
    pop.compile_us = [{"default": 6.0, "max-autotune-no-cudagraphs": 5.5}]
    lines = compiler_lines(pop)
    assert lines == [
        "float32[64]: the original 9.0 µs, torch.compile (max-autotune-no-cudagraphs) 5.5 µs"
    ]
    task = find_task(EXAMPLES / "ops" / "gelu.py", "gelu_kernel")
    prompt = proposal_messages(
        MutationContext(task, ORIGINAL),
        Diagnosis(measured=True, compiler=lines, compiler_kernels=kernels),
    )[-1]["content"]
    assert "torch.compile of the task's reference, timed beside the original" in prompt
    assert "- float32[64]: the original 9.0 µs" in prompt
    assert "What torch.compile writes for the reference" in prompt
    assert "def triton_poi_0(" in prompt and secret not in prompt
    assert (
        "torch.compile"
        not in proposal_messages(MutationContext(task, ORIGINAL), Diagnosis())[-1]["content"]
    )


def test_llm_settings_come_from_the_environment_then_the_flags_and_bad_values_are_named():
    from kernelbrain.engine.llm.settings import from_environment

    env = {"KERNELBRAIN_LLM_TEMPERATURE": "0.2", "KERNELBRAIN_LLM_TIMEOUT": "30",
           "KERNELBRAIN_LLM_PRICES": '{"house-model": [1.0, 3.0]}', "OPENAI_API_KEY": "k"}  # fmt: skip
    settings, key = from_environment(env, model="house-model", concurrency=4)
    assert (settings.temperature, settings.timeout_s, settings.concurrency) == (0.2, 30.0, 4)
    assert settings.price() == (1.0, 3.0) and key == "k"
    priced, _ = from_environment({}, model="other", price=(2.0, 4.0))
    assert priced.dollars(1_000_000, 1_000_000) == 6.0
    with pytest.raises(ValueError, match="temperature"):
        from_environment({"KERNELBRAIN_LLM_TEMPERATURE": "hot"})
    with pytest.raises(ValueError, match="concurrency"):
        from_environment({}, concurrency=0)
    proc = subprocess.run(
        [sys.executable, "-m", "kernelbrain.engine.cli.main", "optimize",
         str(EXAMPLES / "ops" / "gelu.py") + "::gelu_kernel", "--llm", "--llm-temperature", "3"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2 and "temperature = 3.0 is out of range" in proc.stderr
