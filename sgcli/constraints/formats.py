"""The `format` values sgcli checks: jsonschema's, plus the OpenAPI Format Registry's numeric and
encoding formats and `media-range`, Kubernetes' `int-or-string`, pydantic's `base64` and
`ipvany{address,interface,network}`, and RFC 3987's `iri` and
`iri-reference` (jsonschema checks those only with `rfc3987`, a GPL package, or `rfc3987-syntax`,
whose import builds a grammar for 0.8 s: CycloneDX's SBOM schemas use them throughout).

Why: schemas written from OpenAPI descriptions (tool calls, Kubernetes resources, cloud APIs) say
`"type": "integer", "format": "int32"` or `"format": "byte"`. jsonschema has no checker for these,
so sgcli's guarantee (a keyword enforced by the grammar, or by its schema checker, or refused)
refused every such schema: a Kubernetes Pod schema had 40 of them. Each has a fixed meaning
(https://spec.openapis.org/registry/format/), so the checker enforces it like any other format, and
the after-the-fact validation judges it too: one checker for both (`format_checker`).

A format applies to the JSON type it describes and passes every other type, as JSON Schema's own
formats do. A format a later draft defines (`uri-reference`, `iri`, `duration`, ...) means the same
in an older draft's schema, where it would be unknown (OpenAPI 3.0's draft-04 schema uses
`uri-reference`): it is checked there too.

A format no one defines (Angular's schematics say `"format": "path"`) is enforced by nothing, so a
schema that uses it is refused unless the user defines it: `--format NAME=REGEX` (ajv's `addFormat`),
a string that `re.search` finds REGEX in, as `pattern` reads its regex. The checker and the
after-the-fact validation both use that definition.
"""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass
from functools import cache

from sgcli.constraints.schema_patterns import is_regex
from sgcli.errors import UserError

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


def _ip_parsing(reader: str):
    """A string `ipaddress.<reader>` reads (IPv4 or IPv6), as pydantic's IPvAny* types validate it."""

    def check(instance) -> bool:
        if not isinstance(instance, str):
            return True
        try:
            getattr(ipaddress, reader)(instance)
        except ValueError:
            return False
        return True

    return check


def _anything(instance) -> bool:
    return True


@cache
def _compiled(regex: str) -> re.Pattern:
    return re.compile(regex)


def _ranges(*pairs: tuple[int, int]) -> str:
    return "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in pairs)


# RFC 3987 section 2.2: RFC 3986's grammar with `ucschar` among the unreserved characters and `iprivate`
# in the query. Every repetition is separated by a character the one inside cannot take: no backtracking blowup.
_UCSCHAR = _ranges((0xA0, 0xD7FF), (0xF900, 0xFDCF), (0xFDF0, 0xFFEF), (0xE1000, 0xEFFFD)) + _ranges(
    *((plane << 16, plane << 16 | 0xFFFD) for plane in range(1, 14))
)
_IPRIVATE = _ranges((0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD))
_PLAIN = rf"A-Za-z0-9\-._~{_UCSCHAR}!$&'()*+,;="  # iunreserved and sub-delims
_PCT = "%[0-9A-Fa-f]{2}"
_PCHAR = rf"(?:[{_PLAIN}:@]|{_PCT})"
_LITERAL = r"\[(?:(?P<v6>[0-9A-Fa-f:.]+)|v[0-9A-Fa-f]+\.[A-Za-z0-9\-._~!$&'()*+,;=:]+)\]"
_AUTHORITY = rf"(?:(?:[{_PLAIN}:]|{_PCT})*@)?(?:{_LITERAL}|(?:[{_PLAIN}]|{_PCT})*)(?::[0-9]*)?"
_PATHS = rf"//{_AUTHORITY}(?:/{_PCHAR}*)*|/(?:{_PCHAR}+(?:/{_PCHAR}*)*)?"
_TAIL = rf"(?:\?(?:{_PCHAR}|[{_IPRIVATE}/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"
_IRI = rf"[A-Za-z][A-Za-z0-9+\-.]*:(?:{_PATHS}|{_PCHAR}+(?:/{_PCHAR}*)*)?{_TAIL}"
_IRELATIVE = rf"(?:{_PATHS}|(?:[{_PLAIN}@]|{_PCT})+(?:/{_PCHAR}*)*)?{_TAIL}"


def _iri_matching(*regexes: str):
    """Compiled at the first check, not at import: the two IRI regexes (their Unicode ranges) cost
    ~40 ms to compile, which every `lint` and `generate` would pay at start-up."""

    def check(instance) -> bool:
        if not isinstance(instance, str):
            return True
        for regex in regexes:
            m = _compiled(regex).fullmatch(instance)
            if m:
                v6 = m.group("v6")
                try:
                    return v6 is None or bool(ipaddress.IPv6Address(v6))
                except ValueError:
                    return False
        return False

    return check


# RFC 9110 section 12.5.1: type "/" subtype, then `;` parameters (a token or a quoted string each)
_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_QUOTED = r'"(?:[\t \x21\x23-\x5b\x5d-\x7e\x80-\xff]|\\[\t \x21-\x7e\x80-\xff])*"'
_MEDIA_RANGE = re.compile(rf"{_TOKEN}/{_TOKEN}(?:[ \t]*;[ \t]*(?:{_TOKEN}=(?:{_TOKEN}|{_QUOTED}))?)*")


# RFC 5321 section 4.1.2 (and RFC 5322's obsolete quoted characters, which grammars take): a dot-atom or
# a quoted local part, `@`, a domain name or an address literal. jsonschema's `email` is `"@" in value`,
# so `" b @"` was `valid: true` from outlines-core, which enforces no email (2026-12-06).
_ATEXT = r"A-Za-z0-9!#$%&'*+/=?^_`{|}~\-"
_QUOTED_LOCAL = r'"(?:[\x01-\x08\x0b\x0c\x0e-\x21\x23-\x5b\x5d-\x7f]|\\[\x01-\x7f])*"'
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_EMAIL = re.compile(
    rf"(?:[{_ATEXT}]+(?:\.[{_ATEXT}]+)*|{_QUOTED_LOCAL})@(?:{_LABEL}(?:\.{_LABEL})*|\[(?P<literal>[^\]]*)\])"
)
# RFC 6531: the same with any non-ASCII character among atext and a domain's labels (U-labels)
_U = "\u0080-\U0010ffff"
_IDN_LABEL = rf"[A-Za-z0-9{_U}](?:[A-Za-z0-9{_U}-]*[A-Za-z0-9{_U}])?"
_IDN_EMAIL = re.compile(
    rf"(?:[{_ATEXT}{_U}]+(?:\.[{_ATEXT}{_U}]+)*|{_QUOTED_LOCAL})@"
    rf"(?:{_IDN_LABEL}(?:\.{_IDN_LABEL})*|\[(?P<literal>[^\]]*)\])"
)
# draft-handrews-relative-json-pointer: a non-negative integer (ASCII digits, no leading zero), then
# `#` or a JSON pointer. jsonschema's check took `"٣"` (str.isdigit) and refused `"100"`.
_RELATIVE_POINTER = re.compile(r"(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^~/]|~[01])*)*)")


def _email_matching(pattern: re.Pattern):
    def check(instance) -> bool:
        if not isinstance(instance, str):
            return True
        m = pattern.fullmatch(instance)
        if m is None:
            return False
        literal = m.group("literal")
        if literal is None:
            return True
        try:  # `[192.0.2.1]` or `[IPv6:2001:db8::1]`
            if literal.startswith("IPv6:"):
                return bool(ipaddress.IPv6Address(literal[5:]))
            return bool(ipaddress.IPv4Address(literal))
        except ValueError:
            return False

    return check


# Where jsonschema's own check is looser than the format's definition, sgcli's replaces it.
STRICTER = {
    "email": _email_matching(_EMAIL),
    "idn-email": _email_matching(_IDN_EMAIL),
    "relative-json-pointer": _string_matching(_RELATIVE_POINTER),
    "regex": is_regex,  # with ECMA-262's syntax, as JSON Schema names it, not Python's `re` alone
}


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
    "media-range": _string_matching(_MEDIA_RANGE),
    # pydantic's own names (`Base64Bytes`, `IPvAnyAddress`, ...): schemas written by `model_json_schema()`
    "base64": _string_matching(_BASE64),
    "ipvanyaddress": _ip_parsing("ip_address"),
    "ipvanyinterface": _ip_parsing("ip_interface"),
    "ipvanynetwork": _ip_parsing("ip_network"),
    "iri": _iri_matching(_IRI),
    "iri-reference": _iri_matching(_IRI, _IRELATIVE),
}


def format_checker(cls):
    """jsonschema's format checker of validator class `cls`, with the formats the newest draft defines,
    those of `EXTRA` where it has none of that name, and the user's (`--format`)."""
    return _format_checker(cls, _user_formats)


@cache
def _format_checker(cls, user: tuple[UserFormat, ...]):
    from jsonschema import Draft202012Validator, FormatChecker

    checker = FormatChecker(formats=())
    checker.checkers = {**Draft202012Validator.FORMAT_CHECKER.checkers, **cls.FORMAT_CHECKER.checkers}
    for name, function in EXTRA.items():
        checker.checkers.setdefault(name, (function, ()))
    for name, function in STRICTER.items():
        checker.checkers[name] = (function, ())
    for defined in user:
        checker.checkers.setdefault(defined.name, (_string_searching(re.compile(defined.regex)), ()))
    return checker


def _string_searching(pattern: re.Pattern):
    def check(instance) -> bool:
        return not isinstance(instance, str) or pattern.search(instance) is not None

    return check


@dataclass(frozen=True)
class UserFormat:
    name: str
    regex: str


_user_formats: tuple[UserFormat, ...] = ()


# the names --output-format takes on some command (`sgcli lint --format json` meant one of them)
_OUTPUT_FORMAT_NAMES = frozenset({"json", "jsonl", "json-lines", "text", "concise", "full", "github", "sarif"})


def parse_user_format(value: str) -> UserFormat:
    """`NAME=REGEX` as `--format` and the config file give it; exit 2 naming the value where it is not
    that, REGEX does not compile (at its column), or NAME already means something sgcli checks."""
    name, sep, regex = value.partition("=")
    name = name.strip()
    where = f"--format {value!r}"
    if not sep or not name or not regex:
        # `--format json` is most likely meant as the output's format, which --output-format picks
        output = not sep and value.strip().lower() in _OUTPUT_FORMAT_NAMES
        raise UserError(
            f"{where}: expected NAME=REGEX (--format defines a JSON Schema `format`)",
            hint=f"for the output's format: --output-format {value.strip().lower()}"
            if output
            else "e.g. --format 'path=^[A-Za-z0-9_./-]+$': a string of that format is one REGEX is found in",
        )
    if name in _known_names():
        raise UserError(
            f"{where}: format {name!r} already has its standard meaning, which sgcli checks",
            hint="--format defines formats sgcli does not know (`sgcli lint` names them)",
        )
    try:
        re.compile(regex)
    except re.error as exc:
        at = "" if exc.pos is None else f" at column {exc.pos + 1}"
        raise UserError(f"{where}: REGEX {regex!r} does not compile{at}: {exc.msg}") from None
    except (RecursionError, OverflowError, ValueError) as exc:
        raise UserError(f"{where}: REGEX {regex!r} does not compile: {exc}") from None
    return UserFormat(name, regex)


@cache
def _known_names() -> frozenset[str]:
    from jsonschema import validators

    drafts = (v for v in vars(validators).values() if isinstance(v, type) and hasattr(v, "FORMAT_CHECKER"))
    return frozenset(EXTRA).union(*(d.FORMAT_CHECKER.checkers for d in drafts))


def set_user_formats(formats: tuple[UserFormat, ...]) -> None:
    """The user's formats for this process (the command line or the config file); a name defined twice
    is exit 2, not one definition silently kept."""
    global _user_formats
    names = [defined.name for defined in formats]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise UserError(f"--format defines {', '.join(map(repr, twice))} more than once", hint="keep one definition")
    _user_formats = tuple(formats)


def current_user_formats() -> tuple[UserFormat, ...]:
    return _user_formats


def user_format_regex(name) -> str | None:
    """The REGEX the user defined format `name` by (None: not one of theirs); the checker reads an
    anchored one as it reads an anchored `pattern`, refusing a string that can no longer match."""
    return next((defined.regex for defined in _user_formats if defined.name == name), None)
