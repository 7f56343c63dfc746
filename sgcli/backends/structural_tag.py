"""SGLang's two structural-tag shapes, read once, handed to each backend in its own terms.

Old shape:  {"structures": [{"begin", "schema", "end"}], "triggers": [...]}
New shape:  {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers",
             "tags": [{"begin", "content", "end"}], "at_least_one", "stop_after_first"}}

xgrammar takes the new shape natively (`compile_structural_tag`); the old one is rewritten
into it. llguidance gets an equivalent Lark grammar: text outside tags is free but cannot
contain a trigger, a trigger must continue into one of its tags, and a tag's content is
held to its schema. The semantics follow xgrammar's: `at_least_one` means the output starts
with a tag, `stop_after_first` means it ends after the first one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sgcli.constraints.spec import ConstraintSpec, parse_json
from sgcli.errors import Location, UserError

_SHAPES_HINT = (
    'use SGLang\'s old shape {"structures": [{"begin", "schema", "end"}], "triggers": [...]} or its new '
    'shape {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers", "tags": [...]}}'
)


@dataclass(frozen=True)
class Tag:
    begin: str
    content: dict  # an xgrammar format, e.g. {"type": "json_schema", "json_schema": {...}}
    ends: tuple[str, ...]
    path: tuple  # where the tag is in the file, for error positions


@dataclass(frozen=True)
class TriggeredTags:
    triggers: tuple[str, ...]
    tags: tuple[Tag, ...]
    at_least_one: bool = False
    stop_after_first: bool = False


def _error(spec: ConstraintSpec, message: str, path: tuple = (), hint: str | None = None) -> UserError:
    from sgcli.constraints.jsonpos import locate

    line, col = locate(spec.text, path) or (None, None)
    return UserError(f"structural tag: {message}", location=Location(spec.origin, line, col), hint=hint)


def _strings(spec, value, path, what) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise _error(spec, f"{what} must be a non-empty list of non-empty strings", path)
    return tuple(value)


def _string(spec, obj: dict, key: str, path: tuple) -> str:
    if not isinstance(obj.get(key), str):
        raise _error(spec, f"'{key}' must be a string", path + (key,) if key in obj else path)
    return obj[key]


def _old_shape(spec: ConstraintSpec, doc: dict) -> TriggeredTags:
    triggers = _strings(spec, doc.get("triggers"), ("triggers",), "'triggers'")
    structures = doc["structures"]
    if not isinstance(structures, list) or not structures:
        raise _error(spec, "'structures' must be a non-empty list", ("structures",))
    tags = []
    for i, s in enumerate(structures):
        path = ("structures", i)
        if not isinstance(s, dict) or "schema" not in s:
            raise _error(spec, "each structure needs 'begin', 'schema' and 'end'", path)
        schema = s["schema"]
        if isinstance(schema, str):  # SGLang also accepts the schema as a JSON string
            schema = parse_json(schema, spec.origin)
        if not isinstance(schema, (dict, bool)):
            raise _error(spec, "'schema' must be a JSON Schema object", path + ("schema",))
        tags.append(
            Tag(
                _string(spec, s, "begin", path),
                {"type": "json_schema", "json_schema": schema},
                (_string(spec, s, "end", path),),
                path,
            )
        )
    return TriggeredTags(triggers, tuple(tags))


def _new_shape(spec: ConstraintSpec, fmt: dict) -> TriggeredTags:
    base = ("format",)
    triggers = _strings(spec, fmt.get("triggers"), base + ("triggers",), "'triggers'")
    if not isinstance(fmt.get("tags"), list) or not fmt["tags"]:
        raise _error(spec, "'tags' must be a non-empty list", base + ("tags",))
    tags = []
    for i, t in enumerate(fmt["tags"]):
        path = base + ("tags", i)
        if not isinstance(t, dict) or not isinstance(t.get("content"), dict):
            raise _error(spec, "each tag needs 'begin', 'content' (a format object) and 'end'", path)
        end = t.get("end")
        ends = (end,) if isinstance(end, str) else end
        if not isinstance(ends, (list, tuple)) or not ends or not all(isinstance(e, str) for e in ends):
            raise _error(spec, "'end' must be a string or a list of strings", path + ("end",) if "end" in t else path)
        tags.append(Tag(_string(spec, t, "begin", path), t["content"], tuple(ends), path))
    return TriggeredTags(
        triggers, tuple(tags), bool(fmt.get("at_least_one", False)), bool(fmt.get("stop_after_first", False))
    )


def _check_triggers(spec: ConstraintSpec, tt: TriggeredTags) -> None:
    for tag in tt.tags:
        if not any(tag.begin.startswith(t) for t in tt.triggers):
            raise _error(
                spec,
                f"the begin {tag.begin!r} starts with none of the triggers {list(tt.triggers)}",
                tag.path + ("begin",),
                hint="every tag's begin must start with one of the triggers",
            )


def parse(spec: ConstraintSpec) -> tuple[dict, TriggeredTags | None]:
    """(the structural tag in xgrammar's form, the triggered-tags reading or None for other formats)."""
    doc = parse_json(spec.text, spec.origin)
    if not isinstance(doc, dict):
        raise _error(spec, "the file must hold a JSON object", hint=_SHAPES_HINT)
    if "structures" in doc:
        tt = _old_shape(spec, doc)
        _check_triggers(spec, tt)
        return to_xgrammar(tt), tt
    fmt = doc.get("format")
    if not isinstance(fmt, dict):
        raise _error(spec, "neither 'structures' nor 'format' found", hint=_SHAPES_HINT)
    native = dict(doc, type=doc.get("type", "structural_tag"))
    if fmt.get("type") != "triggered_tags":
        return native, None
    tt = _new_shape(spec, fmt)
    _check_triggers(spec, tt)
    return native, tt


def to_xgrammar(tt: TriggeredTags) -> dict:
    return {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": list(tt.triggers),
            "tags": [
                {
                    "type": "tag",
                    "begin": t.begin,
                    "content": t.content,
                    "end": t.ends[0] if len(t.ends) == 1 else list(t.ends),
                }
                for t in tt.tags
            ],
            "at_least_one": tt.at_least_one,
            "stop_after_first": tt.stop_after_first,
        },
    }


# ---- llguidance Lark ----


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
        return "%json " + json.dumps(c.get("json_schema", {}), separators=(",", ":"))
    if kind == "const_string" and isinstance(c.get("value"), str):
        return _lit(c["value"])
    if kind == "regex" and isinstance(c.get("pattern"), str):
        from llguidance import regex_to_lark

        return "/" + regex_to_lark(c["pattern"]) + "/"
    if kind == "any_text" and not c.get("excludes") and c.get("max_tokens") is None and c.get("max_chars") is None:
        stop = "|".join(_regex_literal(e) for e in tag.ends)
        return f"/(.|\\n)*/ & ~/(.|\\n)*({stop})(.|\\n)*/"
    what = kind if kind != "json_schema" else f"json_schema with style {c.get('style')!r}"
    raise _error(
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
