"""What an LLM answers: a rationale and the full new source of the module, decoded with msgspec
from JSON (structured output), or, where the endpoint ignores the schema, from the first JSON
object in the text or a fenced Python block. Anything else is a `BadAnswer`: a failed proposal,
never a failed search."""

from __future__ import annotations

import re

import msgspec


class Rewrite(msgspec.Struct, forbid_unknown_fields=False):
    rationale: str
    source: str


SCHEMA = {
    "type": "object",
    "properties": {
        "rationale": {
            "type": "string",
            "description": "the one change made and why it should be faster",
        },
        "source": {
            "type": "string",
            "description": "the complete new Python module: every import, the kernel, its launcher and everything else of the file",
        },
    },
    "required": ["rationale", "source"],
    "additionalProperties": False,
}

_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.S)


class BadAnswer(Exception):
    pass


def decode(text: str, finish_reason: str | None = None) -> Rewrite:
    if finish_reason == "length":
        raise BadAnswer("the answer was cut off at the completion-token limit")
    text = text.strip()
    if not text:
        raise BadAnswer("the answer was empty")
    for candidate in _json_candidates(text):
        try:
            rewrite = msgspec.json.decode(candidate, type=Rewrite)
        except msgspec.DecodeError:
            continue
        if rewrite.source.strip():
            return rewrite
    fences = _FENCE.findall(text)
    if fences:
        code = max(fences, key=len)
        rationale = _FENCE.sub("", text).strip()[:2000] or "(no rationale given)"
        return Rewrite(rationale, code)
    raise BadAnswer(f"the answer is neither the JSON asked for nor a Python block: {text[:200]!r}")


MAX_OBJECT_STARTS = 8  # where a JSON object may begin in a chatty answer: the first few braces


def _json_candidates(text: str):
    yield text
    start, tried = text.find("{"), 0
    while start != -1 and tried < MAX_OBJECT_STARTS:
        tried += 1
        depth, in_str, esc = 0, False, False
        for i in range(start, len(text)):
            ch = text[i]
            if in_str:
                if esc:
                    esc = False
                elif ch == "\\":
                    esc = True
                elif ch == '"':
                    in_str = False
            elif ch == '"':
                in_str = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    yield text[start : i + 1]
                    break
        start = text.find("{", start + 1)
