"""Batch input: one request per JSONL line. A bad line becomes an error record, never a lost batch."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

from sgcli import RECORD_SCHEMA_VERSION
from sgcli.engine.session import Request  # noqa: F401  (re-exported for the CLI)
from sgcli.errors import Location


@dataclass
class BadLine:
    id: object
    location: Location
    message: str

    def record(self) -> dict:
        return {
            "schema_version": RECORD_SCHEMA_VERSION,
            "id": self.id,
            "prompt": None,
            "output": None,
            "parsed": None,
            "valid": False,
            "validated_by": None,
            "unchecked": None,
            "errors": [f"{self.location}: {self.message}"],
            "finish_reason": "error",
            "backend": None,
            "fallbacks": [],
            "weakened": [],
            "warnings": [],
            "model": None,
            "usage": {"prompt_tokens": None, "completion_tokens": None, "forced_tokens": None, "forward_passes": None},
            "timings": {
                "load_s": None,
                "threads": None,
                "compile_s": None,
                "first_token_s": None,
                "tokens_per_s": None,
                "mask_ms_p50": None,
                "mask_ms_p99": None,
            },
        }


def read_requests(text: str, origin: str) -> Iterator[Request | BadLine]:
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        loc = Location(origin, n, 1)
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            yield BadLine(f"line-{n}", Location(origin, n, exc.colno), f"invalid JSON: {exc.msg}")
            continue
        if not isinstance(obj, dict):
            yield BadLine(f"line-{n}", loc, "each line must be a JSON object with 'prompt' or 'messages'")
            continue
        rid = obj.get("id", f"line-{n}")
        prompt, messages = obj.get("prompt"), obj.get("messages")
        if (prompt is None) == (messages is None):
            yield BadLine(rid, loc, "give exactly one of 'prompt' (a string) or 'messages' (a list)")
        elif prompt is not None and not isinstance(prompt, str):
            yield BadLine(rid, loc, "'prompt' must be a string")
        elif messages is not None and not (
            isinstance(messages, list)
            and all(isinstance(m, dict) and isinstance(m.get("role"), str) and "content" in m for m in messages)
        ):
            yield BadLine(rid, loc, "'messages' must be a list of {role, content} objects")
        else:
            yield Request(rid, prompt, messages)
