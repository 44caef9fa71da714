"""Text a candidate writes (an exception message here) reaches the user's terminal and JSON only
as text: no terminal control sequence (a carriage return and colours that would print a forged
"ACCEPTED" line over the real verdict), no Rich markup taking effect, and no configured secret
in any encoding (hex, base64 at any alignment, URL-safe base64)."""

from __future__ import annotations

import base64
import binascii
import json
import os
import subprocess
import sys

import pytest

from .attacks import base_task, in_launcher

SENTINEL = "kb-sentinel-5c1e0d9b7a44"  # the engine's configured key


def _forms(secret: str) -> list[str]:
    raw = secret.encode()
    return [
        secret,
        binascii.hexlify(raw).decode(),
        binascii.hexlify(raw).decode().upper(),
        base64.b64encode(b"x" + raw).decode(),
        base64.urlsafe_b64encode(b"xy" + raw).decode(),
    ]


FORGERIES = {
    "carriage return and colours": "\\r\\x1b[2K\\x1b[32mACCEPTED\\x1b[0m: passed all 5 stages",
    "rich markup": "[/][green]ACCEPTED[/green]: passed all 5 stages[red]",
    "title and cursor moves": "\\x1b]0;ACCEPTED\\x07\\x1b[1A\\x1b[2KACCEPTED: passed",
    "C1 controls": "\\x9b2K\\x85ACCEPTED: passed all 5 stages",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_candidates_message_is_printed_as_text_without_secrets(tmp_path, name):
    base_task(tmp_path)
    smuggled = " ".join(_forms(SENTINEL))
    candidate = tmp_path / "candidate.py"
    candidate.write_text(in_launcher(f'raise RuntimeError("{FORGERIES[name]} {smuggled}")'))
    env = {**os.environ, "KERNELBRAIN_API_KEY": SENTINEL}
    outputs = []
    for extra in ([], ["--json"]):
        proc = subprocess.run(
            [sys.executable, "-m", "kernelbrain.engine.cli.main", "verify",
             "softmax.py::softmax_kernel", "--candidate", str(candidate), "--device", "cpu",
             *extra],
            capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 1, proc.stderr[-2000:]
        outputs.append(proc.stdout + proc.stderr)
    plain, as_json = outputs
    report = json.loads(as_json[: as_json.rindex("}") + 1])
    assert not report["accepted"] and report["reason"] == "exception", report
    for text in (plain, as_json):
        assert not any(ord(c) < 32 and c not in "\n\t" or 0x7F <= ord(c) <= 0x9F for c in text)
        assert not any(form in text for form in _forms(SENTINEL)), text
    lines = plain.splitlines()
    assert not any(line.startswith("ACCEPTED") for line in lines), plain
    assert lines[1].startswith("REJECTED at "), plain
    if name == "rich markup":  # printed as the text it is, not as a green verdict
        assert "[green]ACCEPTED[/green]" in plain, plain
