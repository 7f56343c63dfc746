"""Lone surrogates in a prompt: refused before the tokenizer sees them, naming where they came from."""

from __future__ import annotations

import json
from typing import Any

from sgcli.errors import UserError


def check_utf8(text: str | None, messages: list[dict], *, origin: str = "the template", **inputs: Any) -> None:
    """Refuse a prompt holding a lone surrogate (what a JSON `"\\ud800"` escape parses to: no tokenizer
    encodes it), naming the input it came from: a message, `inputs` (tools=, template_kwargs=,
    special_tokens=) or else the template. `text` None checks the inputs alone."""
    if text is not None and _is_utf8(text):
        return
    for i, message in enumerate(messages):
        if not _is_utf8(message):
            raise _surrogate_error(f"messages[{i}]")
    for name, value in inputs.items():
        if not _is_utf8(value):
            raise _surrogate_error(_INPUT_NAMES.get(name, name))
    if text is not None:
        raise _surrogate_error(origin, "the prompt it rendered")


_INPUT_NAMES = {
    "tools": "the tools",
    "template_kwargs": "--chat-template-kwargs",
    "special_tokens": "the tokenizer's special tokens",
}


def _is_utf8(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _surrogate_error(source: str, what: str = "") -> UserError:
    return UserError(
        f"{source} {'puts' if what else 'holds'} a lone surrogate{' in ' + what if what else ''} "
        '(half a UTF-16 pair, as the JSON escape "\\ud800" gives), which is not text',
        hint="escape the whole character (a surrogate pair, e.g. \\ud83d\\ude00) or write it as it is",
    )
