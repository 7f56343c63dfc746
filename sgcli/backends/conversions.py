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


def json_schema_to_ebnf(spec: ConstraintSpec) -> tuple[str, list]:
    """The EBNF the translating backend compiles for `spec`, honouring its JSON layout options, and the
    keywords that text does not enforce (`keyword_coverage` Gaps: the declared ones and those its own
    warnings point at, as lint counts them): a grammar file carries no schema checker, so all are lost."""
    from sgcli.backends import get_backend, unsupported_reason
    from sgcli.backends.keyword_coverage import warned_gaps

    assert spec.kind is Kind.JSON_SCHEMA
    name = translator()
    backend = get_backend(name)
    reason = backend.unavailable_reason()
    if reason:
        raise UserError(f"converting a JSON Schema to a grammar needs {name}, which is unavailable: {reason}")
    lacks = unsupported_reason(backend, spec)
    if lacks:  # a layout flag it would drop: exit 2, as compile says, never a looser grammar
        raise UserError(
            f"{name}'s translator, which prints a JSON Schema as grammar text, does not support {lacks}",
            hint="drop that flag (--json-whitespace, --indent and --max-whitespace it takes)",
        )
    text, warnings = backend.schema_grammar(spec)
    return text, warned_gaps(spec, name, warnings)
