"""The grammar text llguidance is given for a constraint: a `--schema` as a `json_schema` grammar with
sgcli's layout and reading folded into `x-guidance`, a Lark grammar's inline `%json` schemas likewise.
Plain text and JSON, no llguidance import: the backend compiles what these build.
"""

from __future__ import annotations

import json

from sgcli.backends.draft_reading import as_its_draft_reads
from sgcli.backends.json_layout import json_overrides
from sgcli.backends.listed_properties import shaped
from sgcli.backends.pattern_gaps import PatternGap, with_patterns
from sgcli.constraints.dialect import dialect_of
from sgcli.constraints.spec import ConstraintSpec
from sgcli.dialects.embedded import embedded_schemas


def schema_entry(spec: ConstraintSpec, schema=None, *, lenient: bool = False, ready: bool = False) -> dict:
    """One `{"json_schema": ...}` grammar with the layout options folded in as `x-guidance`
    (`schema`: the spec's parsed schema, when the caller has it; left unchanged; `ready`: already read
    as its draft reads and `shaped`).

    `lenient`: keywords llguidance does not implement (uniqueItems, not, if/then/else, contains,
    unknown formats, ...) are dropped with a warning instead of refusing the schema, so its grammar
    accepts a superset; only where sgcli's schema checker takes over what was dropped (a top-level
    `--schema`: keyword_coverage declares the gaps), never for a Lark grammar's `%json`/`@name`."""
    if schema is None:
        schema = spec.schema()
    if isinstance(schema, bool):
        # `false` (nothing is valid) as the one keyword llguidance does not implement: refused, never dropped
        schema, lenient = ({}, lenient) if schema else ({"not": {}}, False)
    if not ready:  # the keywords its draft ignores left out (llguidance reads them all), then shaped
        schema = shaped(as_its_draft_reads(schema), spec.json_options)
    schema = dict(schema)
    dialect = dialect_of(schema)
    if dialect.note:  # llguidance would try to fetch the URI and refuse: the draft sgcli reads instead
        schema["$schema"] = dialect.uri
    schema["x-guidance"] = {**(schema.get("x-guidance") or {}), **json_overrides(spec, schema)}
    if lenient:
        schema["x-guidance"]["lenient"] = True
    return {"json_schema": schema}


def inline_json_options(spec: ConstraintSpec) -> str:
    """A Lark grammar's text with each inline `%json` schema compiled as a `--sub` schema is: in the
    spec's JSON layout (compact when generating: llguidance's own flexible whitespace let the default
    model write newlines between every token), its listed objects closed and its strings narrowed
    (`json_layout.UNIQUE_ESCAPES`: `x{"\\u0061": "x"}` passed `%json{"properties": {"a":
    {"type": "integer"}}}`) when generating. An `x-guidance` the user wrote wins."""
    if "%json" not in spec.text:
        return spec.text
    text = spec.text
    inline = [e for e in embedded_schemas(spec) if e.label.startswith("%json")]  # its own, not a sub-grammar's
    for found in sorted(inline, key=lambda e: e.start, reverse=True):
        schema = json.loads(found.spec.text)
        options = schema.get("x-guidance") if isinstance(schema, dict) else None
        if not isinstance(schema, dict) or not isinstance(options, (dict, type(None))):
            continue  # a boolean schema has no layout; a malformed x-guidance is llguidance's to report
        schema = dict(shaped(schema, spec.json_options))
        schema["x-guidance"] = json_overrides(spec, schema) | (options or {})
        end = found.start + len(found.spec.text)
        text = text[: found.start] + _in_place(json.dumps(schema), found.spec.text) + text[end:]
    return text


def _in_place(new: str, old: str) -> str:
    """The JSON `new` over as many lines as `old` took, its last line as long: an error llguidance reports
    after it names the user's line:col (a 4-line schema put `rest: "b" nope` at 3:7, not 6:11)."""
    breaks = old.count("\n")
    if not breaks:
        return new
    last = len(old) - old.rfind("\n") - 1
    return new[:-1] + "\n" * breaks + " " * max(last - 1, 0) + new[-1]


def schema_grammar(
    spec: ConstraintSpec, schema, unmatchable: list[PatternGap] | tuple = (), *, as_written: bool = True
) -> str:
    """The top-level grammar JSON of a `--schema` (lenient, see `schema_entry`), with each pattern of
    `unmatchable` replaced as it says. Where only `x-guidance` is added to the schema as written
    (`as_written`: `schema` is the spec's text parsed, not a rewritten copy), it goes into the schema's
    own text instead of encoding the parsed schema again (2 ms of a 240 KB schema's 20 ms compile);
    the text was parsed strictly, so llguidance reads the same value."""
    if unmatchable:  # a rewritten copy: encoded
        return json.dumps({"grammars": [schema_entry(spec, with_patterns(schema, unmatchable), lenient=True)]})
    ready = shaped(as_its_draft_reads(schema, spec.text), spec.json_options) if isinstance(schema, dict) else schema
    if (
        as_written
        and isinstance(schema, dict)
        and schema
        and ready is schema
        and "x-guidance" not in schema
        and not dialect_of(schema).note
    ):
        body = spec.text.rstrip()
        if body.endswith("}"):
            options = json.dumps({**json_overrides(spec, schema), "lenient": True})
            return '{"grammars":[{"json_schema":' + body[:-1] + ',"x-guidance":' + options + "}}]}"
    return json.dumps({"grammars": [schema_entry(spec, ready, lenient=True, ready=isinstance(schema, dict))]})
