"""What lint reads before any backend runs: the file's own problems (S003, S004), which are the checks
`generate` refuses with exit 2, and sgcli's model of a grammar for the structure rules."""

from __future__ import annotations

from dataclasses import replace

from sgcli.constraints.schema_input import check_schema
from sgcli.constraints.sources import check_nesting
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.dialects.grammar_model import Grammar, ParseError, Rule
from sgcli.errors import UserError
from sgcli.lint.diagnostic import Diagnostic, at_offset


def input_problem(spec: ConstraintSpec) -> tuple[ConstraintSpec, Diagnostic | None]:
    """(the spec to lint, S003 when a schema is not JSON, not a valid JSON Schema or admits no value
    at all; S004 when a grammar or regex is nested past sgcli's depth limit). The same checks
    `generate` refuses with exit 2; a schema whose `$ref`s name other files comes back bundled."""
    code, check = ("S003", _schema_checks) if spec.kind is Kind.JSON_SCHEMA else ("S004", _nesting)
    try:
        spec = check(spec)
        if spec.kind in (Kind.LARK, Kind.STRUCTURAL_TAG):  # a schema written inside, as every compile checks it
            from sgcli.dialects.embedded import check_embedded

            code = "S003"
            check_embedded(spec)
        return spec, None
    except UserError as exc:
        from sgcli.dialects.embedded import MissingSub

        loc = exc.location
        path = (loc.path if loc else None) or spec.name
        line, col = (loc.line, loc.col) if loc else (None, None)
        code = "G001" if isinstance(exc, MissingSub) else code  # an `@name` nothing defines
        return spec, Diagnostic(code, exc.message, path, line, col, hint=exc.hint)


def in_their_files(found: list[Diagnostic], spec: ConstraintSpec) -> list[Diagnostic]:
    """Findings placed in a bundled schema's text (`schema_bundle`), moved to the file each part came
    from: a keyword of a referenced file is reported at that file's line:col, and one of the schema's
    own file at its column as written (a rewritten `$ref` before it on its line is longer or shorter)."""
    smap = spec.source_map
    if smap is None:
        return found
    out = []
    for d in found:
        if d.path != spec.name or d.line is None:
            out.append(d)
            continue
        loc = spec.where(d.line, d.col)
        end = spec.where(d.end_line, d.end_col) if d.end_line is not None else None
        same = end is not None and end.path == loc.path
        out.append(
            replace(
                d,
                path=loc.path or d.path,
                line=loc.line,
                col=loc.col,
                end_line=end.line if same else None,
                end_col=end.col if same else None,
            )
        )
    return out


def _nesting(spec: ConstraintSpec) -> ConstraintSpec:
    check_nesting(spec)
    return spec


def _schema_checks(spec: ConstraintSpec) -> ConstraintSpec:
    from sgcli.constraints.schema_empty import check_admits_a_value

    spec = check_schema(spec)
    check_admits_a_value(spec)
    return spec


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
