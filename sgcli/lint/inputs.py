"""What lint reads before any backend runs: the file's own problems (S003, S004), which are the checks
`generate` refuses with exit 2, and sgcli's model of a grammar for the structure rules."""

from __future__ import annotations

from sgcli.constraints.sources import check_nesting, check_schema
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.dialects.grammar_model import Grammar, ParseError, Rule
from sgcli.errors import UserError
from sgcli.lint.diagnostic import Diagnostic, at_offset


def input_problem(spec: ConstraintSpec) -> Diagnostic | None:
    """S003 when a schema is not JSON, not a valid JSON Schema or admits no value at all; S004 when a
    grammar or regex is nested past sgcli's depth limit. The same checks `generate` refuses with exit 2."""
    code, check = ("S003", _schema_checks) if spec.kind is Kind.JSON_SCHEMA else ("S004", check_nesting)
    try:
        check(spec)
    except UserError as exc:
        loc = exc.location
        return Diagnostic(
            code, exc.message, spec.name, loc.line if loc else None, loc.col if loc else None, hint=exc.hint
        )
    return None


def _schema_checks(spec: ConstraintSpec) -> None:
    from sgcli.constraints.schema_empty import check_admits_a_value

    check_schema(spec)
    check_admits_a_value(spec)


def read_grammar(spec: ConstraintSpec):
    """(grammar, regex features, S004 diagnostic or None) for a GBNF, Lark or regex file."""
    try:
        if spec.kind is Kind.EBNF:
            from sgcli.dialects.gbnf import parse_gbnf

            return parse_gbnf(spec.text), [], None
        if spec.kind is Kind.LARK:
            from sgcli.dialects.lark import parse_lark

            grammar = parse_lark(spec.text)
            return grammar, grammar.regex_features, None
        from sgcli.dialects.regex_parse import parse_regex

        parsed = parse_regex(spec.text)
        return Grammar("regex", "regex", [Rule("regex", parsed.node, 0)]), parsed.features, None
    except ParseError as exc:
        return (
            None,
            [],
            at_offset(
                "S004",
                spec.text,
                spec.name,
                exc.pos,
                None,
                f"sgcli's reader cannot parse this ({exc.message}); the G, W and R rules did not run",
                hint="if a backend accepts the file, this is sgcli's limitation: --ignore S004",
            ),
        )
