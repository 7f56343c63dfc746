"""The `format` values sgcli checks: jsonschema's, plus the OpenAPI Format Registry's numeric and
encoding formats and Kubernetes' `int-or-string`.

Why: schemas written from OpenAPI descriptions (tool calls, Kubernetes resources, cloud APIs) say
`"type": "integer", "format": "int32"` or `"format": "byte"`. jsonschema has no checker for these,
so sgcli's guarantee (a keyword enforced by the grammar, or by its schema checker, or refused)
refused every such schema: a Kubernetes Pod schema had 40 of them. Each has a fixed meaning
(https://spec.openapis.org/registry/format/), so the checker enforces it like any other format, and
the after-the-fact validation judges it too: one checker for both (`format_checker`).

A format applies to the JSON type it describes and passes every other type, as JSON Schema's own
formats do.
"""

from __future__ import annotations

import math
import re
from functools import cache

_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
_BASE64URL = re.compile(r"(?:[A-Za-z0-9_-]{4})*(?:[A-Za-z0-9_-]{2}(?:==)?|[A-Za-z0-9_-]{3}=?)?")
FLOAT_MAX = 3.4028234663852886e38  # the largest finite IEEE 754 single


def _number(instance) -> bool:
    return isinstance(instance, (int, float)) and not isinstance(instance, bool)


def _integer_in(low: int, high: int):
    def check(instance) -> bool:
        if not _number(instance):
            return True
        if isinstance(instance, float) and not (math.isfinite(instance) and instance.is_integer()):
            return False
        return low <= instance <= high

    return check


def _float_within(limit: float):
    def check(instance) -> bool:
        return not _number(instance) or (math.isfinite(instance) and abs(instance) <= limit)

    return check


def _string_matching(pattern: re.Pattern):
    def check(instance) -> bool:
        return not isinstance(instance, str) or pattern.fullmatch(instance) is not None

    return check


def _int_or_string(instance) -> bool:
    """Kubernetes' IntOrString: an integer or a string, nothing else."""
    if isinstance(instance, str):
        return True
    if isinstance(instance, float):
        return math.isfinite(instance) and instance.is_integer()
    return isinstance(instance, int) and not isinstance(instance, bool)


def _anything(instance) -> bool:
    return True


EXTRA = {
    **{f"int{bits}": _integer_in(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) for bits in (8, 16, 32, 64)},
    **{f"uint{bits}": _integer_in(0, 2**bits - 1) for bits in (8, 16, 32, 64)},
    "float": _float_within(FLOAT_MAX),
    "double": _float_within(math.inf),
    "byte": _string_matching(_BASE64),  # base64 (RFC 4648 section 4), padded
    "base64url": _string_matching(_BASE64URL),  # RFC 4648 section 5, padding optional
    "binary": _anything,  # any octets: as a JSON string, any string
    "password": _anything,  # a hint to hide the input; no constraint on the value
    "int-or-string": _int_or_string,
}


@cache
def format_checker(cls):
    """jsonschema's format checker of validator class `cls`, with the formats of `EXTRA` added where
    jsonschema has none of that name."""
    from jsonschema import FormatChecker

    checker = FormatChecker(formats=())
    checker.checkers = dict(cls.FORMAT_CHECKER.checkers)
    for name, function in EXTRA.items():
        checker.checkers.setdefault(name, (function, ()))
    return checker
