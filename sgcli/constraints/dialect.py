"""Which JSON Schema draft a schema is read under: one answer for sgcli's validation, its schema checker,
lint and what the backends are given.

Real schemas often name their draft a little wrong: `https://` for a draft whose URI is `http://`, no
trailing `#`, `http://` for 2019-09. jsonschema knows only the exact URIs and reads anything else as the
latest draft, which for a draft-04 schema (`"exclusiveMaximum": true`, `items` as a list) means other
rules, or a meta-validation error on a valid schema. llguidance tries to fetch any URI it does not know
and refuses the whole schema (every Snowplow schema: a self-describing meta-schema). Measured on the
JSON Schema Store sample: 25 of 496 schemas name a URI neither knows, 15 of them a near miss of a draft.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from sgcli.constraints.schema_patterns import pattern_validator

LATEST_URI = "https://json-schema.org/draft/2020-12/schema"


@dataclass(frozen=True)
class Dialect:
    """The draft a schema is read under."""

    cls: type  # jsonschema's validator class for it, its regexes read by `schema_patterns`
    uri: str  # the draft's own `$schema` URI
    note: str | None = None  # why, where `$schema` is not that URI (None: as written, or absent)
    near_miss: bool = False  # `$schema` is a draft's URI written a little wrong (else: no draft, or exact)


def dialect_of(schema) -> Dialect:
    """The draft `schema` names in `$schema`: exactly, as a near miss of a draft's URI, or no draft at all
    (then 2020-12, the latest, as jsonschema reads it)."""
    import jsonschema
    from jsonschema.validators import validator_for

    written = schema.get("$schema") if isinstance(schema, dict) else None
    if not isinstance(written, str):
        return Dialect(pattern_validator(jsonschema.Draft202012Validator), LATEST_URI)
    exact = validator_for({"$schema": written}, default=None)
    if exact is not None:
        return Dialect(pattern_validator(exact), written)
    near = _drafts().get(_plain(written))
    if near is not None:
        cls, uri = near
        name = cls.__name__.removesuffix("Validator").replace("Draft", "draft ")
        return Dialect(
            pattern_validator(cls),
            uri,
            f"$schema {written!r} is not {name}'s URI ({uri}): read as {name}",
            near_miss=True,
        )
    return Dialect(
        pattern_validator(jsonschema.Draft202012Validator),
        LATEST_URI,
        f"$schema {written!r} names no JSON Schema draft: read as draft 2020-12, the latest",
    )


@cache
def _drafts() -> dict[str, tuple[type, str]]:
    """{URI without scheme, `www.` or trailing `#`/`/`: (validator class, the draft's own URI)}."""
    import jsonschema

    out = {}
    for cls in (
        jsonschema.Draft3Validator,
        jsonschema.Draft4Validator,
        jsonschema.Draft6Validator,
        jsonschema.Draft7Validator,
        jsonschema.Draft201909Validator,
        jsonschema.Draft202012Validator,
    ):
        uri = cls.META_SCHEMA.get("$id") or cls.META_SCHEMA["id"]
        out[_plain(uri)] = (cls, uri)
    return out


def _plain(uri: str) -> str:
    text = uri.strip().lower().rstrip("#").rstrip("/")
    for prefix in ("https://", "http://"):
        text = text.removeprefix(prefix)
    return text.removeprefix("www.")


def meta_schema(uri: str) -> tuple[str, dict] | None:
    """(the draft's own URI, its meta-schema as jsonschema ships it) for a draft's meta-schema URI
    (near misses too, as `dialect_of` reads them); None for any other URI."""
    found = _drafts().get(_plain(uri))
    return None if found is None else (found[1], found[0].META_SCHEMA)
