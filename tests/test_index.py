"""The AST kernel index: kernels, parameters, autotune, helpers, launches, broken files."""

from __future__ import annotations

import textwrap

from kernelbrain.engine.index import build_index

from .conftest import EXAMPLES

RICH = textwrap.dedent('''
    import triton
    import triton.language as tl
    from triton import jit as tjit

    CONFIGS = [
        triton.Config({"BLOCK": 1024}, num_warps=4, num_stages=2),
        triton.Config({"BLOCK": 2048}, num_warps=8),
    ]

    @tjit
    def _square(x):
        return x * x

    @triton.autotune(configs=CONFIGS, key=["n"])
    @triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})
    @triton.jit
    def sq_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr = False):
        """Squares x."""
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, _square(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)

    class Op:
        def forward(self, x):
            out = torch.empty_like(x)
            sq_kernel[lambda m: (triton.cdiv(x.numel(), m["BLOCK"]),)](x, out, x.numel())
            return out

    def not_a_kernel(x):
        return x
''')


def test_finds_kernels_params_and_constexprs():
    idx = build_index(RICH, "rich.py")
    assert [k.name for k in idx.kernels] == ["_square", "sq_kernel"]
    k = idx.kernel("sq_kernel")
    assert [p.name for p in k.params] == ["x_ptr", "out_ptr", "n", "BLOCK", "EVEN"]
    assert k.constexprs == ["BLOCK", "EVEN"]
    assert k.params[4].default == "False"
    assert k.decorators == ["triton.autotune", "triton.heuristics", "triton.jit"]
    assert k.docstring == "Squares x."
    assert idx.imports_triton


def test_autotune_configs_heuristics_and_helpers():
    k = build_index(RICH).kernel("sq_kernel")
    assert [c.kwargs for c in k.autotune_configs] == [{"BLOCK": 1024}, {"BLOCK": 2048}]
    assert [(c.num_warps, c.num_stages) for c in k.autotune_configs] == [(4, 2), (8, None)]
    assert k.autotune_key == ["n"]
    assert "EVEN" in k.heuristics and "BLOCK" in k.heuristics["EVEN"]
    assert k.helpers == ["_square"]


def test_helper_is_not_launchable_and_launcher_is_qualified():
    idx = build_index(RICH)
    helper = idx.kernel("_square")
    assert helper.is_helper and helper.decorators == ["triton.jit"]
    assert [k.name for k in idx.launchable] == ["sq_kernel"]
    k = idx.kernel("sq_kernel")
    assert len(k.launch_sites) == 1
    site = k.launch_sites[0]
    assert site.launcher == "Op.forward"
    assert site.args == ["x", "out", "x.numel()"]
    assert site.grid.startswith("lambda m:")
    assert [(l.name, l.kernels, l.params) for l in idx.launchers] == [
        ("Op.forward", ["sq_kernel"], ["self", "x"])
    ]


def test_spans_are_zero_based_and_cover_decorators():
    idx = build_index(RICH)
    k = idx.kernel("sq_kernel")
    lines = RICH.splitlines()
    assert lines[k.span.line].startswith("@triton.autotune")
    assert k.span.col == 0
    assert lines[k.name_span.line][k.name_span.col : k.name_span.end_col] == "sq_kernel"
    inside = k.span.line + 5
    assert idx.kernel_at(inside, 4).name == "sq_kernel"
    assert idx.kernel_at(0, 0) is None


def test_non_ascii_columns_are_characters_not_bytes():
    src = 'import triton\nimport triton.language as tl\n@triton.jit\ndef k(x_ptr):  # ünïcödé\n    s = "é";  t = tl.program_id(0)\n'
    k = build_index(src).kernel("k")
    assert (k.name_span.col, k.name_span.end_col) == (4, 5)


def test_syntax_error_keeps_the_intact_kernels():
    src = textwrap.dedent("""
        import triton
        import triton.language as tl

        @triton.jit
        def good_kernel(x_ptr, BLOCK: tl.constexpr):
            pid = tl.program_id(0)

        def broken(:
            pass

        @triton.jit
        def also_good(x_ptr):
            pass
    """)
    idx = build_index(src, "broken.py")
    assert [k.name for k in idx.kernels] == ["good_kernel", "also_good"]
    assert len(idx.errors) == 1
    assert idx.errors[0].line == src.splitlines().index("def broken(:")


def test_hopeless_input_never_raises():
    for src in ["def (((", "\x00\x00", "(" * 5000, "", "x = 1\n" * 3, "@triton.jit\n"]:
        idx = build_index(src)
        assert idx.kernels == []
    assert build_index("def (((").errors


def test_file_without_kernels():
    idx = build_index("import torch\n\ndef f(x):\n    return x + 1\n")
    assert idx.kernels == [] and idx.errors == [] and not idx.imports_triton


def test_bundled_examples_index_cleanly():
    for path in sorted((EXAMPLES / "ops").glob("*.py")):
        idx = build_index(path.read_text(), str(path))
        assert not idx.errors, path
        (kernel,) = idx.launchable
        assert kernel.name == f"{path.stem}_kernel"
        assert kernel.launchers == [path.stem], path
        assert kernel.constexprs, path


def test_index_never_imports_triton():
    import subprocess
    import sys

    code = (
        "import sys; from kernelbrain.engine.index import build_index; "
        f"build_index(open({str(EXAMPLES / 'ops' / 'matmul.py')!r}).read()); "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'triton')]; print(bad); assert not bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
