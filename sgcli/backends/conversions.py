"""JSON Schema -> grammar text, borrowed from the one grammar library that prints it.

xgrammar turns a JSON Schema into its EBNF (`str(Grammar.from_json_schema(...))`);
llguidance and outlines-core compile schemas without printing a grammar. This module is
the only place sgcli calls that translator, keeping grammar libraries inside `backends/`.
"""

from __future__ import annotations

from sgcli.backends.diagnostics import grammar_error
from sgcli.backends.native_stderr import capture_fd2
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.errors import UserError

TRANSLATOR = "xgrammar"


def _xgrammar():
    try:
        import xgrammar
    except ImportError as exc:
        raise UserError(
            f"converting a JSON Schema to a grammar needs xgrammar, which cannot be imported ({exc})",
            hint="pip install 'sgcli[xgrammar]'",
        ) from None
    return xgrammar


def json_schema_to_ebnf(spec: ConstraintSpec) -> str:
    """The EBNF xgrammar compiles for `spec`, honouring its JSON layout options."""
    assert spec.kind is Kind.JSON_SCHEMA
    xgr = _xgrammar()
    spec.schema()  # positioned error for malformed JSON first
    from sgcli.backends.xgrammar_backend import json_format_kwargs

    with capture_fd2():
        try:
            grammar = xgr.Grammar.from_json_schema(spec.text, **json_format_kwargs(spec.json_options))
        except RuntimeError as exc:
            raise grammar_error(TRANSLATOR, spec, str(exc)) from None
    return str(grammar)
