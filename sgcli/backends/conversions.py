"""Grammar-to-grammar conversions that borrow a grammar library's own translator.

xgrammar turns a regex or a JSON Schema into its EBNF (`str(Grammar.from_...)`); this
module is the only place sgcli calls those translators, keeping grammar libraries
inside `backends/`.
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
            f"converting to EBNF needs xgrammar, which cannot be imported ({exc})", hint="pip install 'sgcli[xgrammar]'"
        ) from None
    return xgrammar


def regex_to_ebnf(spec: ConstraintSpec) -> str:
    xgr = _xgrammar()
    with capture_fd2():
        try:
            return str(xgr.Grammar.from_regex(spec.as_regex()))
        except RuntimeError as exc:
            raise grammar_error(TRANSLATOR, spec, str(exc)) from None


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
