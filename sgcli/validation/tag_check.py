"""Structural tags (tool calls), checked without the backend: the file read once (`constraints.structural_tag`),
the output read against it by `tag_formats` (triggered tags, sequences, tags with a separator, ...): JSON
against its schema (`jsonschema`), a regex with the `regex` package, a constant by equality."""

from __future__ import annotations

from sgcli.constraints.spec import ConstraintSpec
from sgcli.constraints.structural_tag import parse
from sgcli.validation.tag_formats import format_errors, triggered


def tag_errors(spec: ConstraintSpec, output: str, dialect: str) -> list[str]:
    """Errors of `output` against the structural tag `spec`: triggered tags here, every other format by
    `tag_formats` (Unchecked for the formats nothing here reads)."""
    native, tt = parse(spec)
    if tt is None:
        return format_errors(native["format"], output, dialect)
    return triggered(tt, output, dialect)
