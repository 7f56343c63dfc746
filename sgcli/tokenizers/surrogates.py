"""Lone surrogates in a prompt: refused before the tokenizer sees them, naming where they came from."""

from __future__ import annotations

from typing import Any

from sgcli.errors import UserError
from sgcli.lone_surrogates import LONE_SURROGATE_HINT, lone_surrogate_in


def check_utf8(text: str | None, messages: list[dict], *, origin: str = "the template", **inputs: Any) -> None:
    """Refuse a prompt holding a lone surrogate (what a JSON `"\\ud800"` escape parses to: no tokenizer
    encodes it), naming the input it came from: a message, `inputs` (tools=, template_kwargs=,
    special_tokens=) or else the template. `text` None checks the inputs alone."""
    if text is not None and lone_surrogate_in(text) is None:
        return
    for i, message in enumerate(messages):
        if lone_surrogate_in(message) is not None:
            raise _surrogate_error(f"messages[{i}]")
    for name, value in inputs.items():
        if lone_surrogate_in(value) is not None:
            raise _surrogate_error(_INPUT_NAMES.get(name, name))
    if text is not None:
        raise _surrogate_error(origin, "the prompt it rendered")


_INPUT_NAMES = {
    "tools": "the tools",
    "template_kwargs": "--chat-template-kwargs",
    "special_tokens": "the tokenizer's special tokens",
}


def _surrogate_error(source: str, what: str = "") -> UserError:
    return UserError(
        f"{source} {'puts' if what else 'holds'} a lone surrogate{' in ' + what if what else ''} "
        '(half a UTF-16 pair, as the JSON escape "\\ud800" gives), which is not text',
        hint=LONE_SURROGATE_HINT,
    )
