"""Re-parsing grammar outputs with the `lark` library, apart from the backend that generated them.

A backend's own matcher saying "complete" is the generator agreeing with itself; here the
output is parsed again by a different implementation (lark's Earley parser). GBNF goes
through the project's GBNF -> Lark converter first. `@name` sub-grammars and inline
`%json {...}` schemas become rules of the same parse: a JSON sub-grammar is parsed as any
JSON value, its text cut out of the parse tree and validated against its schema with
`jsonschema`; Lark, GBNF, regex and choice sub-grammars are imported under their own
namespace. A grammar the lark library cannot read (llguidance-only syntax such as `&`,
`~`, `<|special|>`) raises `Unchecked`: no verdict, never a guess.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache

from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.validation.verdict import Unchecked, schema_errors

COMPLETE_LEXER_MAX_CHARS = 4000  # lark's exhaustive lexer is quadratic or worse; past this, no verdict

_JSON_RULES = r"""
sgjson_value: sgjson_object | sgjson_array | SGJSON_STRING | SGJSON_NUMBER | "true" | "false" | "null"
sgjson_object: "{" SGJSON_WS? (sgjson_pair (SGJSON_WS? "," SGJSON_WS? sgjson_pair)*)? SGJSON_WS? "}"
sgjson_pair: SGJSON_STRING SGJSON_WS? ":" SGJSON_WS? sgjson_value
sgjson_array: "[" SGJSON_WS? (sgjson_value (SGJSON_WS? "," SGJSON_WS? sgjson_value)*)? SGJSON_WS? "]"
SGJSON_STRING: /"(?:[^"\\\x00-\x1f]|\\["\\\/bfnrt]|\\u[0-9a-fA-F]{4})*"/
SGJSON_NUMBER: /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/
SGJSON_WS: /[ \t\n\r]+/
"""


@dataclass
class Prepared:
    """A grammar ready for the lark library: text, imported modules, and the JSON schemas to check."""

    text: str
    modules: dict[str, str] = field(default_factory=dict)  # module name -> Lark text
    schemas: dict[str, object] = field(default_factory=dict)  # rule name -> JSON Schema
    extra: list[str] = field(default_factory=list)  # rules and imports for the sub-grammars


def lark_text(spec: ConstraintSpec) -> str:
    """Plain Lark for a Lark or GBNF spec (GBNF through the project's converter)."""
    if spec.kind is Kind.EBNF:
        from sgcli.dialects.convert import convert_grammar
        from sgcli.errors import UserError

        try:
            return convert_grammar(spec, "lark").text
        except UserError as exc:
            raise Unchecked(f"the GBNF -> Lark converter cannot read the grammar: {exc.message}") from None
    return spec.text


def prepare(spec: ConstraintSpec) -> Prepared:
    """Rewrite `@name` and `%json {...}` into rules the lark library can parse."""
    prepared = Prepared("")
    subs = dict(spec.subgrammars)
    out: list[str] = []
    text = re.sub(r"^[ \t]*%llguidance[ \t]*\{[^\n]*\}[ \t]*$", "", lark_text(spec), flags=re.M)
    text, empty_terminals = _nonempty_terminals(text)
    i = 0
    while i < len(text):
        end = _skip_literal(text, i)
        if end > i:
            out.append(text[i:end])
            i = end
            continue
        m = re.compile(r"@([A-Za-z_][A-Za-z0-9_]*)").match(text, i)
        if m:
            out.append(_sub_rule(m.group(1), subs, prepared))
            i = m.end()
            continue
        m = _NAME.match(text, i)
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            is_reference = m.group(0) in empty_terminals and not re.match(r"\s*:", text[m.end() :])
            out.append(f"({m.group(0)}?)" if is_reference else m.group(0))
            i = m.end()
            continue
        m = re.compile(r"%json\s*").match(text, i)
        if m:
            try:
                schema, end = json.JSONDecoder().raw_decode(text, m.end())
            except json.JSONDecodeError as exc:
                raise Unchecked(f"cannot read the %json schema: {exc.msg}") from None
            name = f"sginline_json{len(prepared.schemas)}"
            prepared.schemas[name] = schema
            out.append(name)
            i = end
            continue
        out.append(text[i])
        i += 1
    prepared.extra += [f"{name}: sgjson_value" for name in prepared.schemas]
    json_rules = _JSON_RULES if prepared.schemas else ""
    prepared.text = "".join(out) + "\n" + "\n".join(dict.fromkeys(prepared.extra)) + "\n" + json_rules
    return prepared


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# a whole regex that is one atom under a quantifier that allows zero repetitions
_OPTIONAL_ATOM = re.compile(r"^(\[(?:\\.|[^\]\\])*\]|\\.|\((?:[^()\\]|\\.)*\)|[^\\()\[\]|])(\*|\?|\{0,(\d*)\})$")


def _nonempty_terminals(text: str) -> tuple[str, set[str]]:
    """lark's dynamic Earley lexer refuses terminals that match the empty string (llguidance takes
    them). `T: /X{0,n}/` becomes `T: /X{1,n}/` (and `X*` -> `X+`, `X?` -> `X`), with every use of
    T made optional by the caller; other empty-matching terminals are left for lark to refuse."""
    import regex

    changed: set[str] = set()

    def fix(m: re.Match) -> str:
        name, body, flags = m.group(1), m.group(2), m.group(3)
        atom = _OPTIONAL_ATOM.match(body)
        try:
            empty = regex.fullmatch(body, "") is not None
        except regex.error:
            return m.group(0)
        if not empty or atom is None:
            return m.group(0)
        op = atom.group(2)
        new = atom.group(1) + ("+" if op == "*" else "" if op == "?" else "{1," + atom.group(3) + "}")
        changed.add(name)
        return f"{name}: /{new}/{flags}"

    fixed = re.sub(r"^([A-Z_][A-Z0-9_]*)[ \t]*:[ \t]*/((?:\\.|[^/\\\n])*)/([imslux]*)[ \t]*$", fix, text, flags=re.M)
    return fixed, changed


def _skip_literal(text: str, i: int) -> int:
    """End of a string literal, regex or comment starting at i (i itself when none starts there)."""
    if text.startswith("//", i):
        end = text.find("\n", i)
        return len(text) if end < 0 else end
    if text[i] not in '"/':
        return i
    quote, j = text[i], i + 1
    while j < len(text) and text[j] != quote:
        j += 2 if text[j] == "\\" else 1
    return min(j + 1, len(text))


def _sub_rule(name: str, subs: dict, prepared: Prepared) -> str:
    """The rule that stands for `@name`, registering what it needs."""
    sub = subs.get(name)
    rule = f"sgsub_{name.lower()}"
    if sub is None:
        raise Unchecked(f"@{name} is not a sub-grammar given with --sub, so the lark library cannot check it")
    if sub.kind is Kind.JSON_SCHEMA:
        prepared.schemas[rule] = sub.schema()
    elif sub.kind in (Kind.LARK, Kind.EBNF):
        inner = prepare(sub)
        if inner.schemas or inner.modules:
            raise Unchecked(f"sub-grammar @{name} has sub-grammars of its own")
        prepared.modules[rule] = inner.text
        prepared.extra.append(f"%import {rule}.start -> {rule}")
        return rule
    elif sub.kind in (Kind.REGEX, Kind.CHOICE):
        from sgcli.validation.regex_check import RUST, translate

        body = translate(sub.as_regex(), RUST).replace("/", "\\/")
        prepared.extra.append(f"{rule}: /{body}/")
    else:
        raise Unchecked(f"sub-grammar @{name} is a {sub.kind.label}, which the lark library cannot check")
    return rule


@lru_cache(maxsize=16)
def _parser(text: str, modules: tuple[tuple[str, str], ...], lexer: str):
    import lark

    found = dict(modules)

    def loader(_base, path):
        name = path.rsplit("/", 1)[-1].removesuffix(".lark")
        if name not in found:
            raise OSError(f"no module {name}")
        return path, found[name]

    try:
        return lark.Lark(
            text, parser="earley", lexer=lexer, regex=True, propagate_positions=True, import_paths=[loader]
        )
    except Exception as exc:  # lark raises GrammarError, UnexpectedInput, ... for syntax it lacks
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Unchecked(
            f"the lark library cannot read this grammar ({first}); llguidance-only syntax (`&`, `~`, "
            "`<|special|>`, %regex, ...) has no independent parser"
        ) from None


def check(spec: ConstraintSpec, output: str) -> list[str]:
    """Errors of `output` against a Lark/GBNF `spec` (empty when it parses and every sub-grammar's
    JSON validates); raises Unchecked when no independent verdict is possible."""
    import lark

    prepared = prepare(spec)
    modules = tuple(sorted(prepared.modules.items()))
    lexers = ["dynamic"] + (["dynamic_complete"] if len(output) <= COMPLETE_LEXER_MAX_CHARS else [])
    error = None
    for lexer in lexers:
        try:
            tree = _parser(prepared.text, modules, lexer).parse(output)
        except lark.exceptions.UnexpectedInput as exc:
            error = exc
            continue
        return _sub_errors(tree, output, prepared.schemas)
    if len(lexers) == 1:
        raise Unchecked(f"the output is longer than {COMPLETE_LEXER_MAX_CHARS} characters for lark's complete lexer")
    line, col = getattr(error, "line", -1), getattr(error, "column", -1)
    if line is None or line < 0:
        return ["output is not a sentence of the grammar: it ends before the grammar is complete (lark parser)"]
    return [f"output is not a sentence of the grammar: the lark parser stops at line {line} column {col}"]


def _sub_errors(tree, output: str, schemas: dict) -> list[str]:
    """Validate every sub-grammar JSON in the parse tree against its schema."""
    errors = []
    for node in tree.iter_subtrees_topdown():
        schema = schemas.get(str(node.data))
        if schema is None or node.meta.empty:
            continue
        piece = output[node.meta.start_pos : node.meta.end_pos]
        name = _label(str(node.data))
        try:
            value = json.loads(piece)
        except json.JSONDecodeError as exc:
            errors.append(f"{name}: not JSON: {exc.msg}")
            continue
        errors += [f"{name}: {e}" for e in schema_errors(schema, value)]
    return errors


def _label(rule: str) -> str:
    """How the user wrote the sub-grammar a rule stands for: `@name` or `%json`."""
    if rule.startswith("sginline_json"):
        return f"%json #{int(rule.removeprefix('sginline_json')) + 1}"
    return "@" + rule.removeprefix("sgsub_")
