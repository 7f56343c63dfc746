"""Structural tags of every composable format, checked without the backend: where can each part end?

xgrammar's structural tags nest formats (`sequence`, `or`, `tag`, `tags_with_separator`, `optional`,
`plus`, `star`, `repeat`) around leaves (`const_string`, `json_schema`, `regex`, `any_text`). This
reads the output the way a regex engine does: for a format and a start offset, the set of offsets
where it can end (memoized per format and offset, so the work is bounded by parts x offsets), and the
output matches when the whole format can end at its last character. Each JSON part is decoded and
validated with jsonschema, each regex with the `regex` package; the reason kept for a mismatch is the
one that got furthest into the output. Formats with no independent reading here (`grammar`, token
formats, XML styles of JSON, `dispatch`) are Unchecked, never guessed.
"""

from __future__ import annotations

import json

from sgcli.constraints.spec import NotJsonNumber, json_int
from sgcli.constraints.structural_tag import Tag, TriggeredTags, flag
from sgcli.validation.verdict import Unchecked, schema_errors, unreadable_integer

_MAX_CHARS = 8_000  # offsets x parts stays small; a longer output is reported unchecked, not slow
_WHITESPACE = " \t\n\r"


def format_errors(fmt: dict, output: str, dialect: str) -> list[str]:
    """Errors of `output` against the structural-tag format `fmt` ([] when it matches)."""
    if len(output) > _MAX_CHARS:
        raise Unchecked(f"the output is longer than {_MAX_CHARS:,} characters, which the tag check reads at most")
    reader = _Reader(output, dialect)
    if len(output) in reader.ends(fmt, 0):
        return []
    at, why = reader.furthest
    return [f"the output does not match the structural tag at offset {at}: {why}"]


class _Reader:
    def __init__(self, text: str, dialect: str):
        self.text, self.dialect = text, dialect
        self.memo: dict[tuple[int, int], frozenset[int]] = {}
        self.bounded: dict[int, dict] = {}  # a tag's any_text content with the tag's end excluded, one per tag
        self.furthest: tuple[int, str] = (0, "nothing matched")

    def fail(self, at: int, why: str) -> frozenset[int]:
        if at >= self.furthest[0]:
            self.furthest = (at, why)
        return frozenset()

    def ends(self, fmt, pos: int) -> frozenset[int]:
        key = (id(fmt), pos)
        if key not in self.memo:
            self.memo[key] = frozenset()  # a format reached again at the same offset (left recursion) ends nowhere
            self.memo[key] = self._ends(fmt, pos)
        return self.memo[key]

    def _ends(self, fmt, pos: int) -> frozenset[int]:
        if not isinstance(fmt, dict):
            raise Unchecked(f"a structural-tag format must be an object, not {type(fmt).__name__}")
        kind = fmt.get("type", "tag" if "begin" in fmt else None)  # a tag's own type may go unsaid (xgrammar's default)
        leaf = getattr(self, f"_{kind}", None) if isinstance(kind, str) else None
        if leaf is None:
            raise Unchecked(f"no independent checker for structural-tag format {kind!r}")
        return leaf(fmt, pos)

    # ---- leaves ----

    def _const_string(self, fmt: dict, pos: int) -> frozenset[int]:
        value = fmt.get("value", "")
        if self.text.startswith(value, pos):
            return frozenset({pos + len(value)})
        return self.fail(pos, f"expected {value!r}, found {self.text[pos : pos + len(value) + 5]!r}")

    def _json_schema(self, fmt: dict, pos: int) -> frozenset[int]:
        if fmt.get("style", "json") != "json":
            raise Unchecked(f"no independent checker for JSON in the {fmt['style']!r} style")
        start = pos
        while start < len(self.text) and self.text[start] in _WHITESPACE:
            start += 1
        try:
            value, end = json.JSONDecoder(parse_int=json_int).raw_decode(self.text, start)
        except NotJsonNumber as exc:
            raise unreadable_integer(exc) from None
        except ValueError as exc:
            return self.fail(start, f"not JSON: {exc}")
        errors = schema_errors(fmt.get("json_schema", {}), value)
        if errors:
            return self.fail(start, "; ".join(errors[:3]))
        ends = {end}
        while end < len(self.text) and self.text[end] in _WHITESPACE:
            end += 1
            ends.add(end)
        return frozenset(ends)

    def _regex(self, fmt: dict, pos: int) -> frozenset[int]:
        from sgcli.constraints.regex_dialects import DialectError, fullmatch

        pattern = fmt.get("pattern", "")
        try:
            ends = frozenset(
                e for e in range(pos, len(self.text) + 1) if fullmatch(pattern, self.text[pos:e], self.dialect)
            )
        except DialectError as exc:
            raise Unchecked(f"the regex package cannot read the tag pattern {pattern!r}: {exc}") from None
        return ends or self.fail(pos, f"nothing here matches {pattern!r}")

    def _any_text(self, fmt: dict, pos: int) -> frozenset[int]:
        if fmt.get("max_tokens") is not None:
            raise Unchecked("any_text with max_tokens counts tokens, which the tag check does not see")
        last = len(self.text)
        for excluded in (e for e in fmt.get("excludes", []) if e):  # the text may stop short of each one
            at = self.text.find(excluded, pos)
            if at >= 0:
                last = min(last, at + len(excluded) - 1)
        most = fmt.get("max_chars")
        if most is not None:
            last = min(last, pos + most)
        return frozenset(range(pos, last + 1))

    # ---- composites ----

    def _sequence(self, fmt: dict, pos: int) -> frozenset[int]:
        here = frozenset({pos})
        for element in fmt.get("elements", []):
            here = frozenset(e for p in here for e in self.ends(element, p))
            if not here:
                return here
        return here

    def _or(self, fmt: dict, pos: int) -> frozenset[int]:
        return frozenset(e for element in fmt.get("elements", []) for e in self.ends(element, pos))

    def _tag(self, fmt: dict, pos: int) -> frozenset[int]:
        begin, end = fmt.get("begin"), fmt.get("end")
        if not isinstance(begin, str) or not isinstance(end, (str, list)):
            raise Unchecked("a tag that begins or ends with a token is not checked apart from the backend")
        ends = [end] if isinstance(end, str) else end
        if not self.text.startswith(begin, pos):
            return self.fail(pos, f"expected the tag {begin!r}")
        content = fmt.get("content", {})
        if isinstance(content, dict) and content.get("type") == "any_text":  # free text ends at the tag's end:
            # `<think>a</think>b</think>` is not one think tag (the backends refuse it; this read took it)
            key = id(fmt)
            if key not in self.bounded:
                self.bounded[key] = {**content, "excludes": [*content.get("excludes", []), *ends]}
            content = self.bounded[key]
        found = set()
        for inner in self.ends(content, pos + len(begin)):
            closed = {inner + len(e) for e in ends if self.text.startswith(e, inner)}
            if not closed:
                self.fail(inner, f"the tag {begin!r} must end with one of {ends}")
            found |= closed
        return frozenset(found)

    def _tags_with_separator(self, fmt: dict, pos: int) -> frozenset[int]:
        tags = {"type": "or", "elements": fmt.get("tags", [])}
        first = self.ends(tags, pos)
        at_least_one, stop_after_first = _flags(fmt)
        out = set(first) if at_least_one else {pos, *first}
        if stop_after_first:
            return frozenset(out)
        frontier, separator = set(first), fmt.get("separator", "")
        while frontier:
            after = {p + len(separator) for p in frontier if self.text.startswith(separator, p)}
            frontier = {e for p in after for e in self.ends(tags, p)} - out
            out |= frontier
        return frozenset(out)

    def _optional(self, fmt: dict, pos: int) -> frozenset[int]:
        return frozenset({pos}) | self.ends(fmt.get("content", {}), pos)

    def _star(self, fmt: dict, pos: int) -> frozenset[int]:
        return self._repeat({"min": 0, "max": None, "content": fmt.get("content", {})}, pos)

    def _plus(self, fmt: dict, pos: int) -> frozenset[int]:
        return self._repeat({"min": 1, "max": None, "content": fmt.get("content", {})}, pos)

    def _repeat(self, fmt: dict, pos: int) -> frozenset[int]:
        least, most, content = fmt.get("min", 0), fmt.get("max"), fmt.get("content", {})
        out = {pos} if least <= 0 else set()
        frontier, count = {pos}, 0
        while frontier and (most is None or count < most):
            count += 1
            nxt = {e for p in frontier for e in self.ends(content, p) if e > p}  # an empty round adds nothing
            if count >= least:
                nxt -= out
                out |= nxt
            frontier = nxt
        return frozenset(out)

    def _triggered_tags(self, fmt: dict, pos: int) -> frozenset[int]:
        tt = _read_triggered(fmt)
        return frozenset(e for e in range(pos, len(self.text) + 1) if not triggered(tt, self.text[pos:e], self.dialect))


def _read_triggered(fmt: dict) -> TriggeredTags:
    """A triggered_tags format met inside another format (read leniently: the file was checked as a
    whole before anything ran)."""
    try:
        tags = tuple(
            Tag(t["begin"], t["content"], (t["end"],) if isinstance(t["end"], str) else tuple(t["end"]), ())
            for t in fmt["tags"]
        )
        return TriggeredTags(tuple(fmt["triggers"]), tags, *_flags(fmt))
    except (KeyError, TypeError) as exc:
        raise Unchecked(f"a triggered_tags format the tag check cannot read ({exc})") from None


def _flags(fmt: dict) -> tuple[bool, bool]:
    """`at_least_one` and `stop_after_first`, read as the file's reader reads them (never by truthiness)."""
    flags = (flag(fmt, "at_least_one"), flag(fmt, "stop_after_first"))
    if None in flags:
        raise Unchecked("'at_least_one' and 'stop_after_first' must be true or false")
    return flags


def triggered(tt: TriggeredTags, output: str, dialect: str) -> list[str]:
    """Errors of `output` against triggered tags: text outside tags is free but holds no trigger, a trigger
    continues into one of its tags, `at_least_one` starts with a tag, `stop_after_first` ends after one."""
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
                errors = format_errors(tag.content, output[start:cut], dialect)
                if not errors:
                    return cut + len(end), []
                problems += [f"tag {tag.begin!r} at offset {at}: {e}" for e in errors]
                cut = output.find(end, cut + 1)
        if not problems:
            problems.append(f"tag {tag.begin!r} at offset {at} never ends (expected one of {list(tag.ends)})")
    if not problems:
        problems.append(f"trigger {trigger!r} at offset {at} does not continue into any of its tags")
    return None, problems[:3]
