"""Task discovery: configs, KernelBench files, and a clear error for every missing or wrong piece."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kernelbrain.engine.task import TaskError, find_task
from kernelbrain.engine.task.scaffold import STUB_MARK, scaffold

from .conftest import EXAMPLES

KERNEL = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    def scale(x):
        out = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out

    def scale_ref(x):
        return x * 2

    def scale_ref_two(x, y):
        return x * 2

    def scale_inputs(device="cuda"):
        return [(torch.randn(4096, device=device),)]
""")


def project(
    tmp_path: Path, config: str, name: str = "kernelbrain.toml", source: str = KERNEL
) -> Path:
    (tmp_path / "ops").mkdir(exist_ok=True)
    (tmp_path / "ops" / "scale.py").write_text(source)
    (tmp_path / name).write_text(textwrap.dedent(config))
    return tmp_path / "ops" / "scale.py"


def error(path, kernel="scale_kernel") -> TaskError:
    with pytest.raises(TaskError) as info:
        find_task(path, kernel)
    return info.value


def test_examples_resolve():
    for path in sorted((EXAMPLES / "ops").glob("*.py")):
        task = find_task(path, f"{path.stem}_kernel")
        assert (
            task.kind == "config"
            and task.entry == path.stem
            and task.reference == f"{path.stem}_ref"
        )
        assert task.small_inputs.endswith(f":{path.stem}_small_inputs")


def test_entry_is_detected_and_pyproject_works(tmp_path):
    path = project(
        tmp_path,
        """
        [tool.kernelbrain]
        [[tool.kernelbrain.tasks]]
        file = "ops/scale.py"
        kernel = "scale_kernel"
        reference = "scale_ref"
        inputs = "scale_inputs"
    """,
        name="pyproject.toml",
    )
    task = find_task(path)  # kernel omitted: the only harnessed one
    assert (
        task.entry == "scale"
        and task.config.endswith("pyproject.toml")
        and task.small_inputs is None
    )


def test_reference_in_another_module(tmp_path):
    path = project(
        tmp_path,
        """
        [[tasks]]
        file = "ops/scale.py"
        kernel = "scale_kernel"
        reference = "refs/scale_refs.py:ref"
        inputs = "scale_inputs"
    """,
    )
    (tmp_path / "refs").mkdir()
    (tmp_path / "refs" / "scale_refs.py").write_text("def ref(x):\n    return x * 2\n")
    task = find_task(path, "scale_kernel")
    assert task.reference_module.endswith("scale_refs.py") and task.reference == "ref"


@pytest.mark.parametrize(
    "config, code, words",
    [
        (
            'file = "ops/scale.py"\nkernel = "scale_kernel"\nreference = "nope"\ninputs = "scale_inputs"',
            "reference-not-found",
            "reference `nope` not found",
        ),
        (
            'file = "ops/scale.py"\nkernel = "scale_kernel"\nreference = "scale_ref"\ninputs = "nope"',
            "inputs-not-found",
            "inputs `nope` not found",
        ),
        (
            'file = "ops/scale.py"\nkernel = "scale_kernel"\nentry = "nope"\nreference = "scale_ref"\ninputs = "scale_inputs"',
            "entry-not-found",
            "entry `nope` not found",
        ),
        (
            'file = "ops/scale.py"\nkernel = "scale_kernel"\nreference = "scale_ref_two"\ninputs = "scale_inputs"',
            "signature-mismatch",
            "does not take the same arguments",
        ),
        (
            'file = "ops/scale.py"\nkernel = "scale_kernel"\ninputs = "scale_inputs"',
            "reference-not-found",
            "has no `reference`",
        ),
        (
            'file = "ops/scale.py"\nkernel = "scale_kernel"\nreference = "missing.py:ref"\ninputs = "scale_inputs"',
            "reference-not-found",
            "module `missing.py`",
        ),
        (
            'file = "ops/scale.py"\nkernel = 3\nreference = "scale_ref"\ninputs = "scale_inputs"',
            "config",
            "kernelbrain.toml:3: [[tasks]] entry 1: Expected `str`, got `int`",
        ),
        (
            'file = "ops/scale.py"\nkernel = "scale_kernel"\nreference = "scale_ref"\ninputs = "scale_inputs"\nbogus = 1',
            "config",
            "kernelbrain.toml:6: [[tasks]] entry 1: unknown field `bogus` (the fields are: file,",
        ),
        (
            'file = "ops/scale.py"\nkernel = "scale_kernel"\nrefrence = "scale_ref"\ninputs = "scale_inputs"',
            "config",
            "kernelbrain.toml:4: [[tasks]] entry 1: unknown field `refrence`; did you mean `reference`?",
        ),
    ],
)
def test_clear_error_for_every_wrong_piece(tmp_path, config, code, words):
    path = project(tmp_path, "[[tasks]]\n" + config + "\n")
    err = error(path)
    assert err.code == code and words in str(err), str(err)


def test_missing_file_kernel_and_harness(tmp_path):
    path = project(tmp_path, "")
    assert error(path).code == "no-harness" and "kernelbrain init" in str(error(path))
    assert error(path, "other_kernel").code == "kernel-not-found"
    assert error(tmp_path / "ops" / "gone.py").code == "file-not-found"
    (tmp_path / "kernelbrain.toml").write_text("[[tasks]\nfile=")
    assert error(path).code == "config" and "invalid TOML" in str(error(path))


def test_kernelbench_task_file(tmp_path):
    src = KERNEL + textwrap.dedent("""
        class Model(torch.nn.Module):
            def forward(self, x):
                return x * 2

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return scale(x)

        def get_inputs():
            return [torch.randn(1000)]

        def get_init_inputs():
            return []
    """)
    (tmp_path / "level1.py").write_text(src)
    task = find_task(tmp_path / "level1.py")
    assert (task.kind, task.kernel, task.entry, task.reference) == (
        "kernelbench",
        "scale_kernel",
        "ModelNew",
        "Model",
    )


def test_init_scaffolds_a_harness_that_fails_clearly_until_filled(tmp_path):
    path = project(tmp_path, "# my tasks\n")
    result = scaffold(path, "scale_kernel")
    assert result.entry == "scale" and not result.created_config
    assert "[[tasks]]" in result.config.read_text() and "# my tasks" in result.config.read_text()
    stub = result.harness.read_text()
    assert "def scale_reference(x):" in stub and STUB_MARK in stub
    task = find_task(path, "scale_kernel")  # now resolves statically
    assert task.reference == "scale_reference" and task.reference_module == str(result.harness)
    namespace: dict = {}
    exec(compile(stub, str(result.harness), "exec"), namespace)
    with pytest.raises(NotImplementedError, match="fill in `scale_reference`"):
        namespace["scale_reference"](None)
    with pytest.raises(TaskError, match="already has a harness"):
        scaffold(path, "scale_kernel")


def test_init_creates_config_and_refuses_unknown_kernel(tmp_path):
    (tmp_path / "k.py").write_text(KERNEL)
    result = scaffold(tmp_path / "k.py", "scale_kernel")
    assert result.created_config and result.config == tmp_path / "kernelbrain.toml"
    with pytest.raises(TaskError, match="not found"):
        scaffold(tmp_path / "k.py", "nope")
