"""JSON Schema -> grammar text, borrowed from a backend that prints one.

xgrammar turns a JSON Schema into its EBNF; llguidance and outlines-core compile schemas
without printing a grammar. Which backend prints is its capability (`prints_schema`), so
this module names none: it is the one place that asks for the translation, keeping grammar
libraries inside `backends/`.
"""

from __future__ import annotations

from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.errors import UserError


def translator() -> str:
    """The first backend, in registry order, that prints a JSON Schema as grammar text."""
    from sgcli.backends import backend_names, get_backend

    return next(name for name in backend_names() if get_backend(name).capabilities.prints_schema)


def printed_by(spec: ConstraintSpec) -> str | None:
    """The backend whose translator turns `spec` into grammar text first (None: sgcli's own readers)."""
    return translator() if spec.kind is Kind.JSON_SCHEMA else None


def json_schema_to_ebnf(spec: ConstraintSpec) -> str:
    """The EBNF the translating backend compiles for `spec`, honouring its JSON layout options."""
    from sgcli.backends import get_backend

    assert spec.kind is Kind.JSON_SCHEMA
    name = translator()
    backend = get_backend(name)
    reason = backend.unavailable_reason()
    if reason:
        raise UserError(f"converting a JSON Schema to a grammar needs {name}, which is unavailable: {reason}")
    return backend.schema_grammar(spec)
