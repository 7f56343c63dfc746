"""SGLang's two structural-tag shapes, read once into one model (`TriggeredTags`).

Old shape:  {"structures": [{"begin", "schema", "end"}], "triggers": [...]}
New shape:  {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers",
             "tags": [{"begin", "content", "end"}], "at_least_one", "stop_after_first"}}

The semantics follow xgrammar's: `at_least_one` means the output starts with a tag,
`stop_after_first` means it ends after the first one. Each backend turns the model into its
own terms (`backends/structural_tag.py`); the independent check reads it too (`validation/tag_check.py`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sgcli.constraints.jsonpos import locate
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


def tag_error(spec: ConstraintSpec, message: str, path: tuple = (), hint: str | None = None) -> UserError:
    line, col = locate(spec.text, path) or (None, None)
    return UserError(f"structural tag: {message}", location=Location(spec.origin, line, col), hint=hint)


def _strings(spec, value, path, what) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise tag_error(spec, f"{what} must be a non-empty list of non-empty strings", path)
    return tuple(value)


def _string(spec, obj: dict, key: str, path: tuple) -> str:
    if not isinstance(obj.get(key), str):
        raise tag_error(spec, f"'{key}' must be a string", path + (key,) if key in obj else path)
    return obj[key]


def _schema_string(spec: ConstraintSpec, text: str, path: tuple):
    """A schema written as a JSON string, parsed; its errors are placed at the string in the file, their
    line:col (inside the string, not the file) said in words."""
    try:
        return parse_json(text, None)
    except UserError as exc:
        where = exc.location
        inside = f" (line {where.line}, column {where.col} of the string)" if where and where.line else ""
        message = f"the 'schema' string is not valid JSON: {exc.message.removeprefix('invalid JSON: ')}{inside}"
        hint = "fix the JSON inside the string, or write the schema as a JSON object"
        raise tag_error(spec, message, path, hint) from None


def _old_shape(spec: ConstraintSpec, doc: dict) -> TriggeredTags:
    triggers = _strings(spec, doc.get("triggers"), ("triggers",), "'triggers'")
    structures = doc["structures"]
    if not isinstance(structures, list) or not structures:
        raise tag_error(spec, "'structures' must be a non-empty list", ("structures",))
    tags = []
    for i, s in enumerate(structures):
        path = ("structures", i)
        if not isinstance(s, dict) or "schema" not in s:
            raise tag_error(spec, "each structure needs 'begin', 'schema' and 'end'", path)
        schema = s["schema"]
        if isinstance(schema, str):  # SGLang also accepts the schema as a JSON string
            schema = _schema_string(spec, schema, path + ("schema",))
        if not isinstance(schema, (dict, bool)):
            raise tag_error(spec, "'schema' must be a JSON Schema object", path + ("schema",))
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
        raise tag_error(spec, "'tags' must be a non-empty list", base + ("tags",))
    tags = []
    for i, t in enumerate(fmt["tags"]):
        path = base + ("tags", i)
        if not isinstance(t, dict) or not isinstance(t.get("content"), dict):
            raise tag_error(spec, "each tag needs 'begin', 'content' (a format object) and 'end'", path)
        end = t.get("end")
        ends = (end,) if isinstance(end, str) else end
        if not isinstance(ends, (list, tuple)) or not ends or not all(isinstance(e, str) for e in ends):
            where = path + ("end",) if "end" in t else path
            raise tag_error(spec, "'end' must be a string or a list of strings", where)
        tags.append(Tag(_string(spec, t, "begin", path), t["content"], tuple(ends), path))
    flags = []
    for key in ("at_least_one", "stop_after_first"):
        value = flag(fmt, key)
        if value is None:
            raise tag_error(spec, f"'{key}' must be true or false, not {json.dumps(fmt[key])}", base + (key,))
        flags.append(value)
    return TriggeredTags(triggers, tuple(tags), *flags)


def flag(fmt: dict, key: str) -> bool | None:
    """A triggered_tags option: False where absent, None where not a JSON boolean (read by truthiness,
    the string "false" meant true; xgrammar refuses it), for every reader of the format to refuse."""
    value = fmt.get(key, False)
    return value if isinstance(value, bool) else None


def _check_triggers(spec: ConstraintSpec, tt: TriggeredTags) -> None:
    for tag in tt.tags:
        if not any(tag.begin.startswith(t) for t in tt.triggers):
            raise tag_error(
                spec,
                f"the begin {tag.begin!r} starts with none of the triggers {list(tt.triggers)}",
                tag.path + ("begin",),
                hint="every tag's begin must start with one of the triggers",
            )


def parse(spec: ConstraintSpec) -> tuple[dict, TriggeredTags | None]:
    """(the structural tag in xgrammar's form, the triggered-tags reading or None for other formats)."""
    doc = parse_json(spec.text, spec.origin)
    if not isinstance(doc, dict):
        raise tag_error(spec, "the file must hold a JSON object", hint=_SHAPES_HINT)
    if "structures" in doc:
        tt = _old_shape(spec, doc)
        _check_triggers(spec, tt)
        return to_xgrammar(tt), tt
    fmt = doc.get("format")
    if not isinstance(fmt, dict):
        raise tag_error(spec, "neither 'structures' nor 'format' found", hint=_SHAPES_HINT)
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
