"""Every static rule fires on code that has the problem and stays quiet on code that does not."""

from __future__ import annotations

import textwrap

import pytest

from kernelbrain.engine.rules import REGISTRY, check_source, load_rules, rule

PRELUDE = "import torch\nimport triton\nimport triton.language as tl\n"


def codes(src: str) -> list[str]:
    return [f.code for f in check_source(PRELUDE + textwrap.dedent(src), "t.py")]


# (code, snippet that must trigger it, snippet that must not)
CASES = {
    "KB101": (
        """
        @triton.jit
        def k(x_ptr, out_ptr, n, B: tl.constexpr):
            row = x_ptr + tl.program_id(0) * 0
            acc = tl.zeros([B], tl.float32)
            for s in range(0, n, B):
                acc += tl.load(row + s + tl.arange(0, B))
            total = tl.sum(acc, 0)
            for s in range(0, n, B):
                x = tl.load(row + s + tl.arange(0, B))
                tl.store(out_ptr + s + tl.arange(0, B), x / total)
        """,
        """
        @triton.jit
        def k(x_ptr, w_ptr, out_ptr, n, B: tl.constexpr):
            cols = tl.arange(0, B)
            x = tl.load(x_ptr + cols, mask=cols < n, other=0.0)
            total = tl.sum(x, 0)
            for s in range(0, n, B):
                w = tl.load(w_ptr + s + cols)
                tl.store(out_ptr + s + cols, w / total)
        """,
    ),
    "KB102": (
        """
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

        def launch(x):
            k[(triton.cdiv(x.numel(), 64),)](x, x.numel(), BLOCK=64, num_warps=1)
        """,
        """
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

        def launch(x):
            k[(triton.cdiv(x.numel(), 1024),)](x, x.numel(), BLOCK=1024, num_warps=4)
        """,
    ),
    "KB103": (
        """
        @triton.jit
        def k(x_ptr, n, BLOCK_SIZE):
            offs = tl.program_id(0) * BLOCK_SIZE
            tl.store(x_ptr + offs, 1.0)
        """,
        """
        @triton.jit
        def k(x_ptr, n, BLOCK_SIZE: tl.constexpr):
            offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
            tl.store(x_ptr + offs, 1.0, mask=offs < n)
        """,
    ),
    "KB104": (
        """
        @triton.jit
        def k(x_ptr, stride, n, B: tl.constexpr):
            row = tl.program_id(0)
            cols = tl.arange(0, B)
            tl.store(x_ptr + row * stride + cols, 0.0, mask=cols < n)
        """,
        """
        @triton.jit
        def k(x_ptr, stride, n, B: tl.constexpr):
            row = tl.program_id(0).to(tl.int64)
            cols = tl.arange(0, B)
            tl.store(x_ptr + row * stride + cols, 0.0, mask=cols < n)
            tl.store(x_ptr + tl.program_id(0) * B + cols, 0.0, mask=cols < n)
        """,
    ),
    "KB105": (
        """
        @triton.jit
        def k(x_ptr, out_ptr, n, B: tl.constexpr):
            cols = tl.arange(0, B)
            x = tl.load(x_ptr + cols, mask=cols < n)
            tl.store(out_ptr, tl.sum(x * x, axis=0))
        """,
        """
        @triton.jit
        def k(x_ptr, out_ptr, n, B: tl.constexpr):
            cols = tl.arange(0, B)
            x = tl.load(x_ptr + cols, mask=cols < n, other=float("-inf"))
            y = tl.load(x_ptr + cols, mask=cols < n)
            y = tl.where(cols < n, y, 0.0)
            tl.store(out_ptr, tl.max(x, axis=0) + tl.sum(y, axis=0))
        """,
    ),
    "KB106": (
        """
        @triton.jit
        def k(x_ptr, out_ptr, n, B: tl.constexpr):
            offs = tl.program_id(0) * B + tl.arange(0, B)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        def launch(x):
            out = torch.zeros_like(x)
            k[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), B=1024)
            return out
        """,
        """
        @triton.jit
        def k(x_ptr, out_ptr, n, B: tl.constexpr):
            offs = tl.program_id(0) * B + tl.arange(0, B)
            tl.atomic_add(out_ptr + offs % 4, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        def launch(x):
            out = torch.zeros(4, device=x.device)
            k[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), B=1024)
            return out
        """,
    ),
    "KB107": (
        """
        @triton.jit
        def k(x_ptr, out_ptr, sr, sc, n, B: tl.constexpr):
            c = tl.arange(0, B)
            v = tl.load(x_ptr + tl.program_id(0) * 0 + c * sc, mask=c < n)
            tl.store(out_ptr + c, v, mask=c < n)

        def launch(x):
            y = x.clone()
            out = torch.empty(x.shape[1], device=x.device)
            k[(1,)](y, out, y.stride(0), y.stride(1), x.shape[1], B=1024)
            return out
        """,
        """
        @triton.jit
        def k(x_ptr, out_ptr, sr, n, B: tl.constexpr):
            c = tl.arange(0, B)
            v = tl.load(x_ptr + c, mask=c < n)
            tl.store(out_ptr + c, v, mask=c < n)

        def launch(x):
            x = x.contiguous()
            out = torch.empty(x.shape[1], device=x.device)
            k[(1,)](x, out, x.stride(0), x.shape[1], B=1024)
            return out
        """,
    ),
    "KB108": (
        """
        @triton.jit
        def k(x_ptr, n, B: tl.constexpr):
            pass

        def launch(x):
            n = int(x.sum().item())
            k[(1,)](x, n, B=1024)
        """,
        """
        @triton.jit
        def k(x_ptr, n, B: tl.constexpr):
            pass

        def launch(x):
            k[(1,)](x, x.numel(), B=1024)

        def report(x):
            return x.cpu().tolist()
        """,
    ),
    "KB109": (
        """
        @triton.jit
        def k(a_ptr, b_ptr, c_ptr, B: tl.constexpr):
            r = tl.arange(0, B)
            a = tl.load(a_ptr + r[:, None] * B + r[None, :]).to(tl.float32)
            b = tl.load(b_ptr + r[:, None] * B + r[None, :]).to(tl.float32)
            tl.store(c_ptr + r[:, None] * B + r[None, :], tl.dot(a, b))
        """,
        """
        @triton.jit
        def k(a_ptr, b_ptr, c_ptr, B: tl.constexpr):
            r = tl.arange(0, B)
            a = tl.load(a_ptr + r[:, None] * B + r[None, :])
            b = tl.load(b_ptr + r[:, None] * B + r[None, :]).to(tl.float32)
            tl.store(c_ptr + r[:, None] * B + r[None, :], tl.dot(a, b, input_precision="ieee") + tl.dot(a, a))
        """,
    ),
    "KB110": (
        """
        @triton.jit
        def k(x_ptr, out_ptr, n, B: tl.constexpr):
            offs = tl.program_id(0) * B + tl.arange(0, B)
            tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), 0))
        """,
        """
        @triton.jit
        def k(x_ptr, counter_ptr, n, B: tl.constexpr):
            tl.atomic_add(counter_ptr, 1)
            tl.atomic_max(counter_ptr + 1, tl.program_id(0))
        """,
    ),
    "KB111": (
        """
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            cols = tl.arange(0, BLOCK)
            tl.store(x_ptr + cols, tl.load(x_ptr + cols, mask=cols < n) * 2, mask=cols < n)

        def launch(x):
            BLOCK = triton.next_power_of_2(x.shape[1])
            k[(x.shape[0],)](x, x.shape[1], BLOCK=BLOCK)
        """,
        """
        @triton.jit
        def k(x_ptr, n, BLOCK: tl.constexpr):
            cols = tl.arange(0, BLOCK)
            tl.store(x_ptr + cols, tl.load(x_ptr + cols, mask=cols < n) * 2, mask=cols < n)

        def launch(x):
            BLOCK = triton.next_power_of_2(x.shape[1])
            k[(x.shape[0],)](x, x.shape[1], BLOCK=BLOCK, num_warps=8 if BLOCK >= 2048 else 4)
            k[(x.shape[0],)](x, x.shape[1], BLOCK=1024)
        """,
    ),
    "KB112": (
        """
        @triton.jit
        def k(a_ptr, b_ptr, c_ptr, B: tl.constexpr):
            pid_m = tl.program_id(0)
            pid_n = tl.program_id(1)
            r = tl.arange(0, B)
            a = tl.load(a_ptr + (pid_m * B + r)[:, None] * B + r[None, :])
            b = tl.load(b_ptr + r[:, None] * B + (pid_n * B + r)[None, :])
            tl.store(c_ptr + r[:, None] + r[None, :], tl.dot(a, b))
        """,
        """
        @triton.jit
        def k(a_ptr, b_ptr, c_ptr, M, N, B: tl.constexpr, GROUP_M: tl.constexpr):
            pid = tl.program_id(0)
            num_pid_m = tl.cdiv(M, B)
            num_pid_n = tl.cdiv(N, B)
            group_id = pid // (GROUP_M * num_pid_n)
            pid_m = group_id * GROUP_M + (pid % GROUP_M)
            pid_n = (pid % (GROUP_M * num_pid_n)) // GROUP_M
            r = tl.arange(0, B)
            a = tl.load(a_ptr + r[:, None] * B + r[None, :])
            b = tl.load(b_ptr + r[:, None] * B + r[None, :])
            tl.store(c_ptr + r[:, None] + r[None, :], tl.dot(a, b))
        """,
    ),
    "KB113": (
        """
        @triton.jit
        def k(x_ptr, out_ptr, n, B: tl.constexpr):
            offs = tl.program_id(0) * B + tl.arange(0, B)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        def launch(x):
            xf = x.float()
            out = torch.empty_like(xf)
            k[(triton.cdiv(x.numel(), 1024),)](xf, out, x.numel(), B=1024)
            return out
        """,
        """
        @triton.jit
        def k(x_ptr, out_ptr, n, B: tl.constexpr):
            offs = tl.program_id(0) * B + tl.arange(0, B)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n).to(tl.float32), mask=offs < n)

        def launch(x):
            out = torch.empty(x.shape, dtype=torch.float32, device=x.device)
            k[(triton.cdiv(x.numel(), 1024),)](x, out.float(), x.numel(), B=1024)
            return out
        """,
    ),
    "KB114": (
        """
        SQRT_2_OVER_PI = 0.7978845608028654

        @triton.jit
        def k(x_ptr, out_ptr, n, B: tl.constexpr):
            offs = tl.program_id(0) * B + tl.arange(0, B)
            x = tl.load(x_ptr + offs, mask=offs < n)
            tl.store(out_ptr + offs, x * SQRT_2_OVER_PI, mask=offs < n)
        """,
        """
        SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)
        SCALE = 2.0
        BLOCKS = [64, 128]  # read by the autotune decorator only, in Python

        @triton.autotune(configs=[triton.Config({"B": b}) for b in BLOCKS], key=["n"])
        @triton.jit
        def k(x_ptr, out_ptr, n, B: tl.constexpr):
            SCALE = 3.0
            offs = tl.program_id(0) * B + tl.arange(0, B)
            x = tl.load(x_ptr + offs, mask=offs < n)
            tl.store(out_ptr + offs, x * SQRT_2_OVER_PI * SCALE, mask=offs < n)

        def launch(x):
            return x * SCALE
        """,
    ),
    "KB115": (
        """
        @triton.jit
        def k(x_ptr, out_ptr, n, B: tl.constexpr):
            offs = tl.program_id(0) * B + tl.arange(0, B)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        def launch(x):
            out = torch.empty_like(x)
            compiled = k.warmup(x, out, x.numel(), B=1024, grid=(1,))
            props = torch.cuda.get_device_properties(x.device)
            compiled[(props.multi_processor_count,)](x, out, x.numel(), 1024)
            return out
        """,
        """
        @triton.jit
        def k(x_ptr, out_ptr, n, B: tl.constexpr):
            offs = tl.program_id(0) * B + tl.arange(0, B)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        _compiled = {}

        def launch(x):
            out = torch.empty_like(x)
            key = (x.dtype, x.device)
            if key not in _compiled:
                _compiled[key] = k.warmup(x, out, x.numel(), B=1024, grid=(1,))
            _compiled[key][(132,)](x, out, x.numel(), 1024)
            return out
        """,
    ),
}


def test_every_registered_rule_has_cases():
    load_rules()
    static = {c for c in REGISTRY if c.startswith("KB1")}
    assert static == set(CASES), "add trigger/no-trigger cases for every KB1xx rule"
    assert len(static) >= 10


@pytest.mark.parametrize("code", sorted(CASES))
def test_rule_triggers(code):
    bad, _ = CASES[code]
    assert code in codes(bad)


@pytest.mark.parametrize("code", sorted(CASES))
def test_rule_stays_quiet(code):
    _, good = CASES[code]
    found = codes(good)
    assert code not in found
    assert "KB002" not in found, "a rule crashed"


@pytest.mark.parametrize("code", sorted(CASES))
def test_messages_say_what_costs_and_what_to_do(code):
    bad, _ = CASES[code]
    (finding,) = [
        f for f in check_source(PRELUDE + textwrap.dedent(bad), "t.py") if f.code == code
    ][:1]
    assert finding.kernel == "k"
    assert len(finding.message) > 80
    assert finding.severity in ("error", "warning", "information", "hint")


def test_autotune_configs_are_judged_too():
    src = """
    @triton.autotune(configs=[triton.Config({"BLOCK": 32}, num_warps=2), triton.Config({"BLOCK": 2048}, num_warps=8)], key=["n"])
    @triton.jit
    def k(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, 0.0, mask=offs < n)
    """
    found = [f for f in check_source(PRELUDE + textwrap.dedent(src)) if f.code == "KB102"]
    assert (
        len(found) == 1
        and "autotune config" in found[0].message
        and "32 elements" in found[0].message
    )


def test_syntax_error_is_a_finding():
    found = check_source("import triton\n@triton.jit\ndef k(x:\n", "broken.py")
    assert [f.code for f in found] == ["KB001"]
    assert found[0].severity == "error" and found[0].span.line == 2


def test_a_crashing_rule_is_reported_not_raised():
    load_rules()

    @rule("KB999", "test-crash", "raises on purpose")
    def boom(ctx):
        raise RuntimeError("kaboom")
        yield

    try:
        found = check_source(PRELUDE + "@triton.jit\ndef k(x):\n    pass\n")
        assert any(
            f.code == "KB002" and "KB999" in f.message and "kaboom" in f.message for f in found
        )
    finally:
        REGISTRY.pop("KB999")


def test_adding_a_rule_is_one_registration():
    load_rules()

    @rule("KB998", "no-docstring", "kernels should say what they compute", severity="hint")
    def no_doc(ctx):
        for kv in ctx.kernels:
            if kv.kernel.docstring is None:
                yield ctx.finding("KB998", "kernel has no docstring", kv.node, kv.name)

    try:
        assert "KB998" in codes("@triton.jit\ndef k(x):\n    pass\n")
        assert "KB998" not in codes('@triton.jit\ndef k(x):\n    """doc"""\n')
        found = check_source(PRELUDE + "@triton.jit\ndef k(x):\n    pass\n", select=["KB1"])
        assert "KB998" not in [f.code for f in found]
    finally:
        REGISTRY.pop("KB998")


KERNEL_8192 = """
@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    tl.store(x_ptr + cols, tl.load(x_ptr + cols, mask=cols < n) * 2, mask=cols < n)
"""


@pytest.mark.parametrize(
    "launch, fires",
    [
        ("k[(1,)](x, n, BLOCK=8192)", True),
        ("k[(1,)](x, n, BLOCK=8192, **make_config(n))", False),  # opaque: may hold num_warps
        ("k[(1,)](x, n, BLOCK=8192, **LAUNCH)", False),  # LAUNCH = {"num_warps": 16}
        ("k[(1,)](x, n, BLOCK=8192, **OTHER)", True),  # OTHER = {"num_stages": 2}
        ("config = {'num_warps': 8}\n    k[(1,)](x, n, BLOCK=8192, **config)", False),
    ],
)
def test_kb111_reads_launch_options_wherever_they_are_passed(launch, fires):
    """num_warps passed in a `**dict` (a literal one read, an opaque one given the benefit of
    the doubt) is not a default: KB111 only fires when the default really applies."""
    src = (
        KERNEL_8192
        + f"\n\ndef launch(x, n):\n    {launch}\n\n\n"
        + 'LAUNCH = {"num_warps": 16}\nOTHER = {"num_stages": 2}\n'
    )
    assert ("KB111" in codes(src)) is fires


def test_kb111_leaves_a_kernel_under_its_projects_own_autotuner_alone():
    src = (
        "@project_autotune(configs=CONFIGS)"
        + KERNEL_8192
        + ("\n\ndef launch(x, n):\n    k[(1,)](x, n, BLOCK=8192)\n")
    )
    assert "KB111" not in codes(src)


@pytest.mark.parametrize(
    "masking, fires",
    [
        ("x = x * mask\n    s = tl.sum(x, axis=0)", False),
        ("s = tl.sum(x * mask.to(tl.float32), axis=0)", False),
        ("s = tl.sum((cols < n) * x, axis=0)", False),
        ("s = tl.sum(x * 2.0, axis=0)", True),
        ("s = tl.sum(x * n, axis=0)", True),  # a scalar, not a mask
    ],
)
def test_kb105_sees_a_mask_applied_before_the_reduction(masking, fires):
    src = f"""
@triton.jit
def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + cols, mask=mask).to(tl.float32)
    {masking}
    tl.store(out_ptr, s)
"""
    assert ("KB105" in codes(src)) is fires
