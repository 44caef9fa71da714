"""End-to-end: a real `kernelbrain serve` over stdio, driven by pytest-lsp's client."""

from __future__ import annotations

import asyncio
import os
import textwrap
from pathlib import Path

import pytest_asyncio
from lsprotocol import types

from .helpers import (
    codes,
    doc,
    open_file,
    replace_text,
    start_client,
    stop_client,
    store_measured_gelu_search,
    wait_until,
)


@pytest_asyncio.fixture
async def client(examples_copy: Path, tmp_path: Path):
    record = tmp_path / "forbidden-imports.txt"
    c = await start_client(examples_copy, record, {"compiledView": False})
    c.workspace_root = examples_copy
    yield c
    await stop_client(c)
    assert not record.exists(), f"the language server imported: {record.read_text()}"


def softmax_uri(client) -> tuple[Path, str]:
    path = client.workspace_root / "ops" / "softmax.py"
    return path, open_file(client, path)


async def test_diagnostics_on_open(client):
    path, uri = softmax_uri(client)
    await wait_until(lambda: codes(client, uri) == ["KB101", "KB104"], what="softmax diagnostics")
    by_code = {d.code: d for d in client.diagnostics[uri]}
    d = by_code["KB104"]
    assert d.source == "kernelbrain"
    assert d.severity == types.DiagnosticSeverity.Warning
    line = path.read_text().splitlines()[d.range.start.line]
    assert line[d.range.start.character : d.range.end.character] == "row * stride_x"


async def test_workspace_kernel_files_are_indexed_without_opening(client):
    gelu = (client.workspace_root / "ops" / "gelu.py").as_uri()
    await wait_until(
        lambda: codes(client, gelu) == ["KB102", "KB106"], what="workspace scan diagnostics"
    )
    listing = await client.protocol.send_request_async("kernelbrain/kernels", {})
    names = sorted(k.name for f in listing.files for k in f.kernels)
    assert names == sorted(f"{p.stem}_kernel" for p in (client.workspace_root / "ops").glob("*.py"))


async def test_did_change_is_debounced_and_updates_diagnostics(client):
    path, uri = softmax_uri(client)
    await wait_until(lambda: "KB104" in codes(client, uri), what="initial diagnostics")
    fixed = path.read_text().replace(
        "row = tl.program_id(0)", "row = tl.program_id(0).to(tl.int64)"
    )
    publishes_before = len([m for m in client.diagnostics])
    for v in range(2, 12):  # a burst of keystrokes: only the last state matters
        replace_text(client, uri, fixed if v == 11 else fixed + "\n" * v, v)
    await wait_until(
        lambda: codes(client, uri) == ["KB101"], what="KB104 to disappear after the edit"
    )
    assert publishes_before >= 1


async def test_the_editor_is_asked_for_lenses_again_after_start_and_open(client):
    """An editor restores open files while the server starts and may ask for their lenses too
    early (VS Code then waits for an edit): the server asks it to refresh once it is ready, and
    on each open."""
    await wait_until(lambda: client.lens_refreshes >= 1, what="a refresh after start-up")
    before = client.lens_refreshes
    softmax_uri(client)
    await wait_until(lambda: client.lens_refreshes > before, what="a refresh after didOpen")


async def test_code_lens_per_launchable_kernel(client):
    path = client.workspace_root / "ops" / "fused.py"
    path.write_text(
        textwrap.dedent("""
        import triton
        import triton.language as tl

        @triton.jit
        def _helper(x):
            return x * 2

        @triton.jit
        def first_kernel(x_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, _helper(tl.load(x_ptr + offs)))

        @triton.jit
        def second_kernel(x_ptr, BLOCK: tl.constexpr):
            pass

        def run(x):
            first_kernel[(1,)](x, BLOCK=1024)
            second_kernel[(1,)](x, BLOCK=1024)
    """)
    )
    uri = open_file(client, path)
    lines = path.read_text().splitlines()
    first, second = (
        lines.index(f"def {k}(x_ptr, BLOCK: tl.constexpr):")
        for k in ("first_kernel", "second_kernel")
    )
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=doc(uri))
    )
    assert [
        (l.range.start.line, l.command.title, l.command.command, tuple(l.command.arguments))
        for l in lenses
    ] == [
        (first, "⚡ Optimize kernel", "kernelbrain.optimize", (uri, "first_kernel")),
        (second, "⚡ Optimize kernel", "kernelbrain.optimize", (uri, "second_kernel")),
    ]


async def test_code_action_only_inside_a_kernel(client):
    _, uri = softmax_uri(client)

    async def actions(line: int, only=None):
        return await client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=doc(uri),
                range=types.Range(
                    start=types.Position(line=line, character=4),
                    end=types.Position(line=line, character=4),
                ),
                context=types.CodeActionContext(diagnostics=[], only=only),
            )
        )

    inside = await actions(20)
    assert [(a.title, a.command.command, tuple(a.command.arguments)) for a in inside] == [
        ("Optimize kernel `softmax_kernel`", "kernelbrain.optimize", (uri, "softmax_kernel"))
    ]
    assert inside[0].kind.startswith("refactor")
    assert list(await actions(40)) == []  # in the launcher
    assert list(await actions(20, only=[types.CodeActionKind.QuickFix])) == []
    assert len(await actions(20, only=[types.CodeActionKind.Refactor])) == 1


async def test_hover_on_kernel_name_and_launch_site(client):
    path, uri = softmax_uri(client)
    lines = path.read_text().splitlines()

    async def hover_at(line: int, col: int):
        return await client.text_document_hover_async(
            types.HoverParams(
                text_document=doc(uri), position=types.Position(line=line, character=col)
            )
        )

    def_line = next(i for i, l in enumerate(lines) if l.startswith("def softmax_kernel"))
    h = await hover_at(def_line, 8)
    text = h.contents.value
    assert "softmax_kernel" in text and "`BLOCK_SIZE`" in text and "`stride_x`" in text
    assert "in `softmax`" in text and "KB101" in text
    launch_line = next(i for i, l in enumerate(lines) if "softmax_kernel[" in l)
    h2 = await hover_at(launch_line, lines[launch_line].index("softmax_kernel") + 3)
    assert h2 is not None and "softmax_kernel" in h2.contents.value
    assert await hover_at(0, 0) is None


async def test_file_created_changed_and_deleted_on_disk(client):
    await wait_until(lambda: len(client.diagnostics) >= 6, what="workspace scan")
    new = client.workspace_root / "ops" / "generated.py"
    uri = new.as_uri()
    source = (client.workspace_root / "ops" / "gelu.py").read_text().replace("gelu", "gen")
    new.write_text(source)
    # KB003: the new file has no harness (a hint with a quick fix)
    await wait_until(
        lambda: codes(client, uri) == ["KB003", "KB102", "KB106"],
        what="diagnostics for a created file",
    )
    new.write_text(source.replace("BLOCK=64, num_warps=1", "BLOCK=1024, num_warps=4"))
    await wait_until(
        lambda: codes(client, uri) == ["KB003", "KB106"], what="diagnostics after an on-disk edit"
    )
    listing = await client.protocol.send_request_async("kernelbrain/kernels", {})
    assert "gen_kernel" in [k.name for f in listing.files for k in f.kernels]
    os.remove(new)
    await wait_until(lambda: codes(client, uri) == [], what="diagnostics cleared after delete")
    listing = await client.protocol.send_request_async("kernelbrain/kernels", {})
    assert "gen_kernel" not in [k.name for f in listing.files for k in f.kernels]


async def test_open_buffer_wins_over_disk(client):
    path, uri = softmax_uri(client)
    await wait_until(lambda: "KB104" in codes(client, uri), what="initial diagnostics")
    path.write_text(
        path.read_text().replace("row = tl.program_id(0)", "row = tl.program_id(0).to(tl.int64)")
    )
    # The editor's unsaved buffer is still the first draft: diagnostics stay as they were, while a
    # file nobody has open is re-analysed from disk (proving the watcher saw this write too).
    other = client.workspace_root / "ops" / "rmsnorm.py"
    other.write_text(
        other.read_text().replace("row = tl.program_id(0)", "row = tl.program_id(0).to(tl.int64)")
    )
    await wait_until(
        lambda: codes(client, other.as_uri()) == ["KB101"],
        what="the unopened file to be re-analysed",
    )
    assert "KB104" in codes(client, uri)


async def test_syntax_error_in_open_file(client):
    path = client.workspace_root / "ops" / "softmax.py"
    broken = path.read_text().replace("def softmax(x: torch.Tensor)", "def softmax(x: torch.Tensor")
    uri = open_file(client, path, broken)
    await wait_until(lambda: "KB001" in codes(client, uri), what="syntax error diagnostic")
    assert "KB101" in codes(client, uri)  # the kernel itself is intact and still analysed
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=doc(uri))
    )
    assert [l.command.arguments[1] for l in lenses] == ["softmax_kernel"]


async def test_optimize_without_a_harness_says_why(client):
    path = client.workspace_root / "ops" / "orphan.py"
    path.write_text(
        (client.workspace_root / "ops" / "gelu.py").read_text().replace("gelu", "orphan")
    )
    uri = open_file(client, path)
    await wait_until(lambda: "KB003" in codes(client, uri), what="no-harness hint")
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="kernelbrain.optimize", arguments=[uri, "orphan_kernel"])
    )
    assert (
        result["started"] is False
        and result["reason"] == "no-harness"
        and "kernelbrain init" in result["message"]
    )
    await wait_until(
        lambda: any("cannot optimize `orphan_kernel`" in m.message for m in client.messages),
        what="message",
    )


async def test_measured_view_diagnostics_from_a_stored_gpu_search(examples_copy, tmp_path):
    """A measured search result in the store puts KB3xx on the kernel, until the kernel changes."""
    original = store_measured_gelu_search(examples_copy)
    record = tmp_path / "imports.txt"
    client = await start_client(examples_copy, record, {"compiledView": False})
    path = examples_copy / "ops" / "gelu.py"
    uri = open_file(client, path)
    await wait_until(lambda: "KB301" in codes(client, uri), what="a measured-view diagnostic")
    kb301 = next(d for d in client.diagnostics[uri] if d.code == "KB301")
    # the Problems view's line is the finding's first sentence; the rest is related information
    assert "memory-bound at 9%" in kb301.message and "\n" not in kb301.message
    assert kb301.message.endswith("reaches ~90%.")
    (detail,) = kb301.related_information
    assert detail.message == "(measured by the last search)" and detail.location.uri == uri
    replace_text(
        client, uri, original.replace("inner = 0.7978845608028654", "inner = 0.79788456"), 2
    )
    await wait_until(
        lambda: "KB301" not in codes(client, uri), what="KB301 to go once the kernel changed"
    )
    await stop_client(client)
    assert not record.exists()


async def test_no_harness_quick_fix_scaffolds_through_apply_edit(client):
    path = client.workspace_root / "ops" / "lonely.py"
    path.write_text(
        (client.workspace_root / "ops" / "gelu.py")
        .read_text()
        .split("def gelu_ref")[0]
        .replace("gelu", "lonely")
    )
    uri = open_file(client, path)
    await wait_until(lambda: "KB003" in codes(client, uri), what="the no-harness hint")
    diag = next(d for d in client.diagnostics[uri] if d.code == "KB003")
    received = []

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams):
        received.append(params)
        return types.ApplyWorkspaceEditResult(applied=True)

    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=doc(uri),
            range=diag.range,
            context=types.CodeActionContext(
                diagnostics=[diag], only=[types.CodeActionKind.QuickFix]
            ),
        )
    )
    (fix,) = actions
    assert (
        fix.title == "Create a task harness for `lonely_kernel`"
        and fix.kind == types.CodeActionKind.QuickFix
    )
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=fix.command.command, arguments=fix.command.arguments)
    )
    assert result["applied"] is True and received
    changes = received[0].edit.document_changes
    created = [c.uri for c in changes if isinstance(c, types.CreateFile)]
    assert created == [(client.workspace_root / "ops" / "lonely_harness.py").as_uri()]
    edits = {c.text_document.uri: c.edits for c in changes if isinstance(c, types.TextDocumentEdit)}
    stub = edits[created[0]][0].new_text
    assert "def lonely_reference(x: torch.Tensor):" in stub and "fill in" in stub
    config_edit = "".join(
        e.new_text for e in edits[(client.workspace_root / "kernelbrain.toml").as_uri()]
    )
    assert 'kernel = "lonely_kernel"' in config_edit and 'entry = "lonely"' in config_edit
    assert not (
        client.workspace_root / "ops" / "lonely_harness.py"
    ).exists()  # the editor writes, not the server


async def test_a_variant_says_where_it_stands_against_torch_compile(examples_copy, tmp_path):
    """A stored GPU search that timed torch.compile of the reference: the Apply action and the
    hover say the variant's speed against the compiler's, not only against the user's kernel."""
    original = (examples_copy / "ops" / "gelu.py").read_text()
    faster = original.replace(
        "gelu_kernel[(triton.cdiv(n, 64),)](x, out, n, BLOCK=64, num_warps=1)",
        "gelu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024, num_warps=4)",
    )
    assert faster != original
    store_measured_gelu_search(examples_copy, variant_source=faster)
    client = await start_client(examples_copy, tmp_path / "imports.txt", {"compiledView": False})
    path = examples_copy / "ops" / "gelu.py"
    uri = open_file(client, path)
    line = original.splitlines().index(
        next(s for s in original.splitlines() if s.startswith("def gelu_kernel"))
    )
    where = types.Range(types.Position(line, 5), types.Position(line, 5))

    async def titles():
        actions = await client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=doc(uri),
                range=where,
                context=types.CodeActionContext(
                    diagnostics=[], only=[types.CodeActionKind.RefactorRewrite]
                ),
            )
        )
        return [a.title for a in actions or []]

    found: list[str] = []

    async def has_apply():
        found[:] = await titles()
        return any(t.startswith("Apply") for t in found)

    for _ in range(100):
        if await has_apply():
            break
        await asyncio.sleep(0.2)
    # 1850 µs for torch.compile against the variant's 1678.75: 1.10x the compiler's speed
    assert (
        "Apply: `gelu_kernel` 1.60× faster, 1.10× torch.compile's speed (verified on 1 cases)"
        in found
    ), found
    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=doc(uri), position=where.start)
    )
    assert "1.10x the speed of torch.compile of your reference" in hover.contents.value
    # the kernel as the user has it (2686 µs) is slower than the compiler (1850 µs): KB304 says so
    await wait_until(lambda: "KB304" in codes(client, uri), what="the slower-than-compiler finding")
    kb304 = next(d for d in client.diagnostics[uri] if d.code == "KB304")
    assert "torch.compile of the reference (default) takes 1850.0 µs, 1.45× faster" in kb304.message
    assert "the search's best variant takes 1678.8 µs there" in kb304.message
    await stop_client(client)
