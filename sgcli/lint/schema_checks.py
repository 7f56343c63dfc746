"""JSON Schema rules that run against each backend's matcher: J001 and W002.

Both feed whole JSON texts, token by token (`Vocab.encode`), through a fresh matcher of
the compiled schema, accepting every token and then asking `can_stop()`. The text is
laid out the first way the backend accepts the *valid* instance (`", "`/`": "`,
compact, indented), so that a rejection later is about the keyword, not the layout.
"""

from __future__ import annotations

import json

from sgcli.backends.base import Compiled
from sgcli.backends.keyword_coverage import Gap
from sgcli.backends.matching import feed
from sgcli.backends.schema_doc import SchemaDoc, escape_pointer
from sgcli.backends.schema_warnings import iter_subschemas
from sgcli.constraints.jsonpos import SchemaText, pointer_of
from sgcli.dialects.grammar_model import ParseError
from sgcli.dialects.regex_parse import RegexFeature, parse_regex
from sgcli.lint.diagnostic import Diagnostic, at_offset
from sgcli.lint.schema_instances import validator
from sgcli.lint.schema_probes import Probe

_LAYOUTS = [
    {"separators": (", ", ": ")},
    {"separators": (",", ":")},
    {"indent": 2},
    {"indent": 4},
]
RUNAWAY_SPACES = 64


def dumps(value, layout: dict) -> str:
    return json.dumps(value, ensure_ascii=False, **layout)


def accepts(compiled: Compiled, text: str) -> bool:
    """Whether the backend's matcher takes `text` (tokenized by the vocabulary) to a stop."""
    vocab = compiled.vocab
    if vocab.encode is None:
        return False
    return feed(compiled, list(vocab.encode(text))).accepted


def layouts_for(compiled: Compiled, valid_instance) -> list[dict]:
    """Every layout in which the backend accepts the valid instance (several can: `[0]` reads
    the same with `", "` and `","`, while `[0, 0]` does not)."""
    return [layout for layout in _LAYOUTS if accepts(compiled, dumps(valid_instance, layout))]


def _printable(text: str) -> str:
    """One line: control characters in keys (a property named "a\nb") shown escaped."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode() for ch in text)


def _short(text: str, limit: int = 70) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def unprobed(path: str, why: str, backend: str | None = None) -> Diagnostic:
    """J003: the keyword probes (J001, W002) could not run, so silence is not a clean bill."""
    return Diagnostic(
        "J003",
        f"keyword enforcement was not checked: {why}",
        path,
        1,
        1,
        hint="validate outputs after generation; simplify the schema, or check it with `sgcli test` cases",
        backend=backend,
    )


def unenforced(
    compiled: Compiled,
    layouts: list[dict],
    probes: list[Probe],
    schema,
    stext: SchemaText,
    path: str,
    dropped: list[tuple] = (),
    checked=None,
) -> list[Diagnostic]:
    """J001: keywords whose single-keyword violation the backend's matcher still accepts (in any
    layout it accepts the valid instance in). A probe's value may break a keyword written elsewhere
    (an `additionalProperties` value whose `$ref` holds a `oneOf`): the finding then names the keyword
    jsonschema finds broken, where it is written. `checked(path)`: whether sgcli's schema checker
    enforces the keyword at that schema path anyway (then no finding)."""
    out = []
    failing = _FailingKeyword(schema)
    for probe in probes:
        if not any(accepts(compiled, dumps(probe.instance, layout)) for layout in layouts):
            continue
        value = _short(json.dumps(probe.value, ensure_ascii=False))
        at = _printable(pointer_of(probe.path[:-1])) or "/"
        keyword, key_path, found_by = probe.keyword, probe.path, ""
        deeper, own = failing.pointer(probe.instance), pointer_of(probe.path)
        if deeper is not None and deeper != own and not deeper.startswith(own + "/"):  # written elsewhere
            key_path = stext.path_of(deeper)
            keyword = str(key_path[-1])
            found_by = f"; found by breaking `{probe.keyword}` at {_printable(pointer_of(probe.path))}"
        if checked is not None and checked(tuple(map(str, key_path))):
            continue
        span = stext.key_span(key_path) or (0, None)
        what = "only this keyword" if not found_by else f"`{keyword}` at {_printable(pointer_of(key_path))}"
        out.append(
            at_offset(
                "J001",
                stext.text,
                path,
                span[0],
                span[1],
                f"`{keyword}` is silently ignored by {compiled.backend}: its matcher accepts an instance that "
                f"breaks {what} (value {value} at {at}{found_by})" + _after_dropping(dropped),
                hint="validate outputs against the schema after generation, or choose a backend that enforces it",
                backend=compiled.backend,
            )
        )
    return out


class _FailingKeyword:
    """The JSON pointer of the keyword jsonschema reports broken by an instance (the deepest error,
    followed through `$ref`; a failing anyOf/oneOf is the keyword itself, not one of its branches)."""

    def __init__(self, schema):
        try:
            self._validator = validator(schema)
            self._where = {id(node): pointer for pointer, node in SchemaDoc(schema).nodes.items()}
        except Exception:  # a schema shape the reader does not know: no attribution rather than a guess
            self._validator = None

    def pointer(self, instance) -> str | None:
        if self._validator is None:
            return None
        try:
            errors = list(self._validator.iter_errors(instance))
        except Exception:  # an unresolvable $ref, ...: no attribution
            return None
        if not errors:
            return None
        deepest = max(errors, key=lambda e: len(e.absolute_schema_path))
        node = self._where.get(id(deepest.schema))
        return None if node is None else f"{node}/{escape_pointer(deepest.validator)}"


def runaway_whitespace(
    compiled: Compiled, layout: dict, valid_instance, bounded_flags: list[str], path: str
) -> list[Diagnostic]:
    """W002: the backend accepts RUNAWAY_SPACES spaces after the first JSON token."""
    text = dumps(valid_instance, layout)
    cut = 1 if text[:1] in "[{" else 0
    padded = text[:cut] + " " * RUNAWAY_SPACES + text[cut:]
    if not accepts(compiled, padded):
        return []
    flags = " or ".join(bounded_flags) if bounded_flags else "a backend with a whitespace bound"
    return [
        Diagnostic(
            "W002",
            f"{compiled.backend} accepts {RUNAWAY_SPACES} spaces between JSON tokens (no bound on whitespace): "
            f"a model can emit whitespace until it runs out of tokens",
            path,
            1,
            1,
            hint=f"generate with {flags}",
            backend=compiled.backend,
        )
    ]


BOUNDED_FLAGS = {"max_whitespace": "--max-whitespace 4", "compact": "--json-whitespace compact", "indent": "--indent 2"}


def pattern_features(schema, stext: SchemaText) -> list[RegexFeature]:
    """Regex features (lookaround, backreferences, ...) inside `pattern` values, at their
    positions in the file."""

    found = []
    for path, node in iter_subschemas(schema):
        if isinstance(node.get("pattern"), str):
            chars = stext.string_chars(path + ("pattern",))
            if chars is not None:
                decoded, where = chars
                try:
                    found += parse_regex(decoded, lambda i, where=where: where[i]).features
                except ParseError:
                    pass
    return found


def _after_dropping(dropped) -> str:
    if not dropped:
        return ""
    return " (found with the keywords it refuses removed: " + ", ".join(pointer_of(d) for d in dropped) + ")"


def guarantee_findings(
    gaps: list[Gap], stext: SchemaText | None, path: str, backend: str, why_chosen: str
) -> list[Diagnostic]:
    """J004 for each keyword the chosen backend leaves to sgcli's schema checker, J005 for each that nothing
    enforces, each at the keyword's own key in the file (`stext`, the schema's; a schema inside a grammar
    is positioned in the file that holds it)."""
    out = []
    for gap in gaps:
        if gap.embedded is not None:
            text, path = gap.embedded.text, gap.embedded.spec.origin or path
            span = gap.embedded.key_span(gap.pointer) or (0, None)
            where = f"{_printable(gap.pointer or '/')} in {gap.embedded.label}"
        else:
            text = stext.text
            span = stext.key_span(stext.path_of(gap.pointer)) or (0, None)
            where = _printable(gap.pointer)
        detail = "" if gap.reason == "not enforced" else f" ({gap.reason})"
        if gap.checker:
            out.append(
                at_offset(
                    "J004",
                    text,
                    path,
                    span[0],
                    span[1],
                    f"`{gap.keyword}` at {where} is left to sgcli's schema checker: {backend}'s grammar does not "
                    f"enforce it{detail}{why_chosen}",
                    hint="the checker enforces it while decoding; a backend whose grammar does is cheaper per token",
                    backend=backend,
                )
            )
        else:
            out.append(
                at_offset(
                    "J005",
                    text,
                    path,
                    span[0],
                    span[1],
                    f"`{gap.keyword}` at {where} is enforced by nothing: {backend}'s grammar does not{detail} "
                    f"and sgcli's schema checker cannot ({gap.why_not_checked}){why_chosen}",
                    hint="generate refuses it (exit 2) unless --allow-unenforced; rewrite or drop the keyword, or "
                    "choose a backend that enforces it",
                    backend=backend,
                )
            )
    return out


def dialect_check(schema, stext: SchemaText, path: str) -> list[Diagnostic]:
    """J007 where `$schema` is not a draft's own URI: how sgcli reads it, which other tools may not."""
    from sgcli.constraints.dialect import dialect_of

    dialect = dialect_of(schema)
    if dialect.note is None or not dialect.near_miss and "json-schema.org" not in str(schema.get("$schema")):
        return []  # a vendor's own meta-schema (Snowplow's) is chosen on purpose: the compile note says the rest
    span = stext.key_span(("$schema",)) or (0, None)
    hint = f'write "$schema": "{dialect.uri}"' if dialect.near_miss else "name the schema's draft by its own URI"
    return [at_offset("J007", stext.text, path, span[0], span[1], dialect.note, hint=hint)]
