"""Structural tags (tool calls), checked without the backend: find each tag, check its content.

The rules are xgrammar's triggered tags (the reference the backends follow): text outside
tags is free but holds no trigger; a trigger must continue into one of its tags
(begin, content, end); `at_least_one` means the output starts with a tag; `stop_after_first`
means nothing follows the first tag. A tag's content is checked by its type: JSON against
its schema (`jsonschema`), a regex with the `regex` package, a constant by equality.
"""

from __future__ import annotations

from sgcli.constraints.spec import ConstraintSpec
from sgcli.constraints.structural_tag import parse
from sgcli.validation.verdict import Unchecked, json_verdict


def tag_errors(spec: ConstraintSpec, output: str, dialect: str) -> list[str]:
    """Errors of `output` against the structural tag `spec`; Unchecked for formats other than triggered tags."""
    _, tt = parse(spec)
    if tt is None:
        raise Unchecked("only triggered_tags structural tags can be checked apart from the backend")
    pos, seen = 0, 0
    while True:
        hits = [(output.find(t, pos), t) for t in tt.triggers if output.find(t, pos) >= 0]
        if not hits:
            break
        at, trigger = min(hits)
        if tt.at_least_one and seen == 0 and at != 0:
            return [f"output must start with a tag (at_least_one), but starts with {output[:20]!r}"]
        end, problems = _one_tag(tt, output, at, trigger, dialect)
        if end is None:
            return problems
        seen, pos = seen + 1, end
        if tt.stop_after_first and output[pos:]:
            return [f"text follows the first tag (stop_after_first): {output[pos : pos + 20]!r}"]
    if tt.at_least_one and seen == 0:
        return ["output holds no tag, but at_least_one asks for one"]
    return []


def _one_tag(tt, output: str, at: int, trigger: str, dialect: str) -> tuple[int | None, list[str]]:
    """(end of the tag starting at `at`, []) or (None, why no tag fits there)."""
    problems = []
    for tag in tt.tags:
        if not output.startswith(tag.begin, at):
            continue
        start = at + len(tag.begin)
        for end in tag.ends:
            cut = output.find(end, start)
            while cut >= 0:
                errors = content_errors(tag.content, output[start:cut], dialect)
                if not errors:
                    return cut + len(end), []
                problems += [f"tag {tag.begin!r} at offset {at}: {e}" for e in errors]
                cut = output.find(end, cut + 1)
        if not problems:
            problems.append(f"tag {tag.begin!r} at offset {at} never ends (expected one of {list(tag.ends)})")
    if not problems:
        problems.append(f"trigger {trigger!r} at offset {at} does not continue into any of its tags")
    return None, problems[:3]


def content_errors(content: dict, text: str, dialect: str) -> list[str]:
    kind = content.get("type")
    if kind == "json_schema" and content.get("style", "json") == "json":
        return json_verdict(content.get("json_schema", {}), text).errors
    if kind == "const_string":
        return [] if text == content.get("value") else [f"content is not {content.get('value')!r}"]
    if kind == "regex" and isinstance(content.get("pattern"), str):
        from sgcli.validation.regex_check import DialectError, fullmatch

        try:
            return (
                []
                if fullmatch(content["pattern"], text, dialect)
                else [f"content does not match {content['pattern']!r}"]
            )
        except DialectError as exc:
            raise Unchecked(f"the regex package cannot read the tag pattern {content['pattern']!r}: {exc}") from None
    if kind == "any_text" and not content.get("excludes") and content.get("max_chars") is None:
        return []
    raise Unchecked(f"no independent checker for tag content of type {kind!r}")
