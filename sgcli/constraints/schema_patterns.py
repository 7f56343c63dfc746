"""JSON Schema's regexes (`pattern`, `patternProperties`, `format: regex`) read with the ECMA-262 syntax the
specification names, wherever jsonschema reads them: in meta-validation and in every check.

Why: jsonschema reads them with Python's `re`, which refuses `\\p{L}`, `(?<name>...)`, `\\u{1F600}` and
`\\cJ`: 270 of 1,898 CloudFormation resource schemas were "invalid JSON Schema", and a `\\p{Lu}` pattern
was a keyword nothing could check. Here a regex `re` reads is read by `re`, as jsonschema always has
(its `\\w` is not the `regex` package's), and one it cannot by `regex_dialects` (the `regex` package, its
`SCHEMA` reading: that syntax too), so a schema meta-validation lets through is one the checks can read.
One reading departs from `re` in both: `$` is the end of the text, as in ECMA-262 and in every backend's
grammar (`re`'s `$` also matched before a last newline, and a server's `{"p": "abc\n"}` passed
`^[a-z]+$` as valid). jsonschema's own `additionalProperties` still joins `patternProperties` for `re`.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache

from sgcli.constraints.regex_dialects import (
    MATCH_TIMEOUT_S,
    SCHEMA,
    DialectError,
    TooDeep,
    bounded_match,
    compiled,
    end_of_text,
    search,
)


@lru_cache(maxsize=256)
def _by_re(pattern: str) -> re.Pattern | None:
    """`pattern` as Python's `re` reads it, but for `$`, the end of the text as ECMA-262 reads it
    (`end_of_text`), or None where it cannot (then the `regex` package reads it)."""
    try:
        return re.compile(end_of_text(pattern))
    except (re.error, RecursionError, OverflowError, ValueError):
        return None


def finds(pattern: str, text: str) -> bool:
    """JSON Schema's `pattern`: whether `pattern` is found in `text` (DialectError: it cannot be read, or
    matching took longer than MATCH_TIMEOUT_S).

    Python's `re` has no timeout, and `^(a|aa)+$` on 40 a's and a `!` backtracks for hours (found in the
    decode loop's checker and the output check, 2026-12-07). A pattern that can backtrack that way (a
    repeat holding a repeat or an alternation, or three unbounded repeats) is matched with a bound: on
    a text both packages read alike (ASCII but the separators U+001C-U+001F, which only `re`'s `\\s`
    takes) by the `regex` package, whose matching has a timeout; on any other text by `re` in a
    bounded child process."""
    by_re = _by_re(pattern)
    if by_re is None:
        return search(pattern, text, SCHEMA)
    if not _may_backtrack(pattern) or len(text) < _SHORT:
        return by_re.search(text) is not None
    if _PLAIN.fullmatch(text):
        return bounded_match(_as_regex(pattern).search, text)
    return _bounded_search(by_re, text)


_SHORT = 8  # no pattern backtracks for long on fewer characters than this
_PLAIN = re.compile(r"[\x00-\x1b\x20-\x7f]*")  # where `re`'s and the regex package's classes agree


@lru_cache(maxsize=256)
def _may_backtrack(pattern: str) -> bool:
    """Whether `pattern` has the shape of exponential or high-polynomial backtracking: a repeat whose
    body holds another repeat or an alternation, or three unbounded repeats. Conservative: `([a-z]+-)*`
    is counted though it cannot blow up (the separator decides), which costs only the bounded match."""
    from re import _constants as c  # Python's own reading of the pattern it will run
    from re import _parser

    try:
        tree = _parser.parse(pattern)
    except Exception:  # noqa: BLE001 - `re` compiled it, so this does not happen; bound it if it does
        return True
    unbounded = 0
    stack = [(tree, False)]
    while stack:
        items, in_repeat = stack.pop()
        for op, av in items:
            if op in (c.MAX_REPEAT, c.MIN_REPEAT):
                lo, hi, body = av
                if in_repeat and hi > 1:
                    return True
                unbounded += hi == c.MAXREPEAT
                stack.append((body, in_repeat or hi > 1))
            elif op is c.BRANCH:
                if in_repeat:
                    return True
                stack.extend((branch, in_repeat) for branch in av[1])
            elif op is c.SUBPATTERN:
                stack.append((av[-1], in_repeat))
            elif op in (c.ASSERT, c.ASSERT_NOT):
                stack.append((av[1], in_repeat))
            elif op is c.GROUPREF_EXISTS:
                stack.extend((part, in_repeat) for part in av[1:] if part is not None)
            elif op is c.ATOMIC_GROUP:
                stack.append((av, in_repeat))
    return unbounded >= 3


@lru_cache(maxsize=256)
def _as_regex(pattern: str):
    """`pattern` for the regex package, read as `re` reads it (VERSION0 is its `re`-compatible mode)."""
    import regex

    try:
        return regex.compile(end_of_text(pattern), flags=regex.VERSION0)
    except Exception as exc:  # noqa: BLE001 - regex refuses what re reads: no bounded reading of it
        raise DialectError(f"the regex package cannot read it to bound the match ({exc})") from None


def _bounded_search(by_re: re.Pattern, text: str) -> bool:
    from sgcli.limits import LimitHit, run_bounded

    try:
        return bool(run_bounded(lambda: by_re.search(text) is not None, timeout_s=MATCH_TIMEOUT_S, memory_mb=1024))
    except LimitHit as hit:
        raise DialectError(f"matching stopped ({hit.kind}): it took longer than {MATCH_TIMEOUT_S:g} s") from None


def regex_error(pattern: str) -> str | None:
    """Why the checks cannot read `pattern` (None: they can)."""
    try:
        _by_re(pattern) or compiled(pattern, SCHEMA)
    except DialectError as exc:
        return str(exc)
    return None


def is_regex(instance) -> bool:
    """`format: regex`: a string the checks read as a regex (any other type passes)."""
    return not isinstance(instance, str) or regex_error(instance) is None


def _readable(instance) -> bool:
    """`is_regex` for meta-validation, whose error carries the reason (the DialectError); a pattern
    nested too deep to compile is a RecursionError, which `meta_validate` places at the deepest one."""
    if isinstance(instance, str) and _by_re(instance) is None:
        try:
            compiled(instance, SCHEMA)
        except TooDeep:
            raise RecursionError from None
    return True


@cache
def meta_format_checker(cls: type):
    """`cls`'s own format checker for meta-validation, its `regex` read as the checks read it."""
    from jsonschema import FormatChecker

    checker = FormatChecker(formats=())
    checker.checkers = {**cls.FORMAT_CHECKER.checkers, "regex": (_readable, (DialectError,))}
    return checker


@cache
def pattern_validator(cls: type) -> type:
    """jsonschema's validator class `cls` with `pattern` and `patternProperties` read here, and
    `multipleOf` in exact arithmetic (`exact_numbers`); its name stays the draft's (`Draft7Validator`),
    which the draft readings key on."""
    from jsonschema import validators

    from sgcli.constraints.exact_numbers import multiple_of

    keywords = {"pattern": _pattern, "patternProperties": _pattern_properties, "multipleOf": multiple_of}
    extended = validators.extend(cls, keywords)
    extended.__name__ = extended.__qualname__ = cls.__name__
    return extended


def _pattern(validator, pattern, instance, schema):
    from jsonschema import ValidationError

    if validator.is_type(instance, "string") and not finds(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator, pattern_properties, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for key, value in instance.items():
            if finds(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)
