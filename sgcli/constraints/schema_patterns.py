"""JSON Schema's regexes (`pattern`, `patternProperties`, `format: regex`) read with the ECMA-262 syntax the
specification names, wherever jsonschema reads them: in meta-validation and in every check.

Why: jsonschema reads them with Python's `re`, which refuses `\\p{L}`, `(?<name>...)`, `\\u{1F600}` and
`\\cJ`: 270 of 1,898 CloudFormation resource schemas were "invalid JSON Schema", and a `\\p{Lu}` pattern
was a keyword nothing could check. Here a regex `re` reads is read by `re`, as jsonschema always has
(its `\\w` is not the `regex` package's), and one it cannot by `regex_dialects` (the `regex` package, its
`SCHEMA` reading: that syntax too), so a schema meta-validation lets through is one the checks can read.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache

from sgcli.constraints.regex_dialects import SCHEMA, DialectError, TooDeep, compiled, search


@lru_cache(maxsize=256)
def _by_re(pattern: str) -> re.Pattern | None:
    """`pattern` as Python's `re` reads it, or None where it cannot (then the `regex` package reads it)."""
    try:
        return re.compile(pattern)
    except (re.error, RecursionError, OverflowError, ValueError):
        return None


def finds(pattern: str, text: str) -> bool:
    """JSON Schema's `pattern`: whether `pattern` is found in `text` (DialectError: it cannot be read)."""
    by_re = _by_re(pattern)
    return by_re.search(text) is not None if by_re is not None else search(pattern, text, SCHEMA)


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
    """jsonschema's validator class `cls` with `pattern` and `patternProperties` read here; its name
    stays the draft's (`Draft7Validator`), which the draft readings key on."""
    from jsonschema import validators

    extended = validators.extend(cls, {"pattern": _pattern, "patternProperties": _pattern_properties})
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
