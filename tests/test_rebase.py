"""Variants rebase onto unrelated edits and are stale when their own lines changed."""

from kernelbrain.server.rebase import rebase

ORIGINAL = "import x\n\ndef kernel():\n    a = 1\n    b = 2\n\ndef launcher():\n    kernel()\n"
VARIANT = "import x\n\ndef kernel():\n    a = 10\n    b = 2\n\ndef launcher():\n    kernel()\n    kernel()\n"


def test_unchanged_document_takes_the_variant():
    assert rebase(ORIGINAL, VARIANT, ORIGINAL).text == VARIANT


def test_unrelated_edit_is_kept():
    current = "import x\nimport y  # added\n\ndef kernel():\n    a = 1\n    b = 2\n\ndef launcher():\n    kernel()\n"
    out = rebase(ORIGINAL, VARIANT, current).text
    assert (
        out
        == "import x\nimport y  # added\n\ndef kernel():\n    a = 10\n    b = 2\n\ndef launcher():\n    kernel()\n    kernel()\n"
    )


def test_edit_inside_the_rewritten_lines_is_stale():
    current = ORIGINAL.replace("a = 1", "a = 3")
    r = rebase(ORIGINAL, VARIANT, current)
    assert r.text is None and "changed since the search" in r.reason
