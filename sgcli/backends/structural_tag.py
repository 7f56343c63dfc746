"""Structural tags handed to each backend in its own terms (the shapes are read in `constraints/structural_tag.py`).

xgrammar takes the new shape natively (`compile_structural_tag`); the old one is rewritten
into it. llguidance gets an equivalent Lark grammar: text outside tags is free but cannot
contain a trigger, a trigger must continue into one of its tags, and a tag's content is
held to its schema.
"""

from __future__ import annotations

import json

from sgcli.backends.base import CompileWarning
from sgcli.backends.json_layout import json_overrides
from sgcli.constraints.regex_dialects import without_verbose
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.constraints.structural_tag import Tag, TriggeredTags, parse, tag_error, to_xgrammar

__all__ = ["bounded_json_layout", "layout_warnings", "parse", "to_lark", "to_xgrammar"]


def bounded_json_layout(fmt, spec: ConstraintSpec):
    """xgrammar's format tree with the spec's JSON layout on every JSON content that does not set its own:
    left alone, a tag's JSON takes any whitespace between tokens, and a small model (the random-logits
    adversary at once) writes whitespace until --max-tokens. xgrammar has no compact form there, so
    `compact` (generate's default) becomes at most one whitespace character between tokens."""
    o = spec.json_options
    most = o.max_whitespace if o.max_whitespace is not None else 1 if o.whitespace == "compact" else None
    if most is None:
        return fmt
    if isinstance(fmt, list):
        return [bounded_json_layout(f, spec) for f in fmt]
    if not isinstance(fmt, dict):
        return fmt
    out = {k: bounded_json_layout(v, spec) if isinstance(v, (dict, list)) else v for k, v in fmt.items()}
    if out.get("type") == "json_schema" and out.get("style", "json") == "json" and "max_whitespace_cnt" not in out:
        out["max_whitespace_cnt"] = max(1, most)
    return out


def layout_warnings(spec: ConstraintSpec) -> list[CompileWarning]:
    """Where `bounded_json_layout` loosened the layout asked for: compact (or --max-whitespace 0) is at most
    one whitespace character between a tag's JSON tokens on xgrammar, not none. Said, not left to a comment."""
    o = spec.json_options
    asked = o.max_whitespace if o.max_whitespace is not None else 0 if o.whitespace == "compact" else None
    if spec.kind is not Kind.STRUCTURAL_TAG or asked != 0:
        return []
    native = parse(spec)[0]
    if bounded_json_layout(native, spec) == native:  # no JSON content without its own bound
        return []
    layout = "compact" if o.max_whitespace is None else "--max-whitespace 0"
    return [
        CompileWarning(
            f"xgrammar has no {layout} layout for a structural tag's JSON: its content allows one whitespace "
            "character between tokens"
        )
    ]


def _regex_literal(text: str) -> str:
    """`text` as a Rust-regex literal: ASCII punctuation hex-escaped (Rust rejects some `\\<`-style escapes)."""
    return "".join(c if (c.isascii() and c.isalnum()) or not c.isascii() else f"\\x{ord(c):02x}" for c in text)


def _lit(text: str) -> str:
    return json.dumps(text) if text else ""


def _ends(ends: tuple[str, ...]) -> str:
    words = [_lit(e) for e in ends if e]
    if not words:
        return ""
    return f"({' | '.join(words)})" + ("?" if "" in ends else "")


def _content_lark(spec: ConstraintSpec, tag: Tag, backend: str) -> str:
    c = tag.content
    kind = c.get("type")
    if kind == "json_schema" and c.get("style", "json") == "json":
        schema = c.get("json_schema", {})
        if isinstance(schema, dict):  # the spec's JSON layout, as for a --schema (compact under generate)
            schema = dict(
                schema, **{"x-guidance": {**json_overrides(spec, schema), **(schema.get("x-guidance") or {})}}
            )
        return "%json " + json.dumps(schema, separators=(",", ":"))
    if kind == "const_string" and isinstance(c.get("value"), str):
        return _lit(c["value"])
    if kind == "regex" and isinstance(c.get("pattern"), str):
        from llguidance import regex_to_lark

        return "/" + regex_to_lark(without_verbose(c["pattern"])) + "/"
    if kind == "any_text" and not c.get("excludes") and c.get("max_tokens") is None and c.get("max_chars") is None:
        stop = "|".join(_regex_literal(e) for e in tag.ends)
        return f"/(.|\\n)*/ & ~/(.|\\n)*({stop})(.|\\n)*/"
    what = kind if kind != "json_schema" else f"json_schema with style {c.get('style')!r}"
    raise tag_error(
        spec,
        f"content type {what!r} is not supported by the {backend} backend",
        tag.path + ("content",),
        hint="supported there: json_schema, const_string, regex, any_text; xgrammar takes every format "
        "(--backend xgrammar)",
    )


def to_lark(spec: ConstraintSpec, tt: TriggeredTags, backend: str = "llguidance") -> str:
    """An llguidance Lark grammar with the same language as xgrammar's triggered tags."""
    lines = ["%llguidance {}"]
    any_trigger = "|".join(_regex_literal(t) for t in tt.triggers)
    lines.append(f"FREE: /(.|\\n)*/ & ~/(.|\\n)*({any_trigger})(.|\\n)*/")
    seg, first = [], []
    for i, trig in enumerate(tt.triggers):
        bodies = []
        for j, tag in enumerate(tt.tags):
            if not tag.begin.startswith(trig) or any(
                tag.begin.startswith(t) and len(t) > len(trig) for t in tt.triggers
            ):
                continue  # each tag belongs to its longest matching trigger
            content = _content_lark(spec, tag, backend)
            lines.append(f"tag_{j}_content: {content}")
            lines.append(f"tag_{j}: {_lit(tag.begin[len(trig) :])} tag_{j}_content {_ends(tag.ends)}")
            bodies.append(f"tag_{j}")
        if not bodies:
            continue
        lines.append(f"AFTER_{i}: FREE {_lit(trig)}")
        lines.append(f"body_{i}: {' | '.join(bodies)}")
        seg.append(f"AFTER_{i} body_{i}")
        first.append(f"{_lit(trig)} body_{i}")
    lines.append("seg: " + " | ".join(seg))
    lines.append("first: " + " | ".join(first))
    start = {
        (False, False): "seg* FREE",
        (True, False): "first seg* FREE",
        (False, True): "FREE | seg",
        (True, True): "first",
    }[(tt.at_least_one, tt.stop_after_first)]
    lines.insert(1, f"start: {start}")
    return "\n".join(lines) + "\n"
