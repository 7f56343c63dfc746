"""Grammar text from one dialect to another: GBNF <-> Lark, and regex to either.

Every conversion reads the source with sgcli's one reader per dialect (positions kept) into
the grammar model and prints it (`dialects/printers.py`). A grammar whose names do not resolve
(`dialects/resolve.py`) is refused at the name, as every backend would refuse it. JSON Schema
sources need a backend's translator first (`grammar_dev/convert.py`); the round-trip check that
compares both grammars on real matchers lives there too.
"""

from __future__ import annotations

import copy
import re

from sgcli.constraints.regex_dialects import ECMA, RUST
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.dialects.gbnf import parse_gbnf
from sgcli.dialects.grammar_model import Alt, Chars, Grammar, Lit, Opaque, ParseError, Ref, Rep, Rule, Seq, walk
from sgcli.dialects.lark import parse_lark
from sgcli.dialects.lark_common import imported_definitions
from sgcli.dialects.lark_templates import expand_templates
from sgcli.dialects.left_recursion import unfold_direct
from sgcli.dialects.lexeme_follow import rival_sets, rivals_inside
from sgcli.dialects.printers import Printer
from sgcli.dialects.regex_parse import parse_regex
from sgcli.dialects.resolve import unresolved
from sgcli.errors import Location, UserError, did_you_mean, offset_to_line_col

TARGETS = {"lark": "lark", "gbnf": "gbnf", "ebnf": "gbnf"}
_KINDS = {"lark": Kind.LARK, "gbnf": Kind.EBNF}


def to_lark(text: str, dialect: str = "gbnf", origin: str | None = None) -> str:
    """Lark text for a grammar in `dialect` ("gbnf"/"ebnf", "regex"); the Lark library can load it.

    The public entry point for re-parsing outputs with an independent parser (lark).
    Raises a positioned UserError for what Lark cannot express."""
    kind = {"gbnf": Kind.EBNF, "ebnf": Kind.EBNF, "regex": Kind.REGEX}.get(dialect)
    if kind is None:
        raise UserError(f"to_lark: unknown source dialect '{dialect}'", hint="gbnf, ebnf or regex")
    return convert_grammar(ConstraintSpec(kind, text, origin), "lark").text


def target_of(spec: ConstraintSpec, to: str) -> str:
    """The printer's dialect for `--to`; exit 2 for an unknown target or a conversion to itself."""
    target = TARGETS.get(to.lower())
    if target is None:
        raise UserError(f"cannot convert to '{to}'." + did_you_mean(to, TARGETS), hint="--to lark or --to gbnf")
    if spec.kind is Kind.LARK and target == "lark":
        raise UserError(f"{spec.name} is Lark already", hint="--to gbnf")
    return target


def convert_grammar(spec: ConstraintSpec, to: str) -> ConstraintSpec:
    """The converted grammar as a spec of the target kind (read with positions, printed from the model)."""
    target = target_of(spec, to)
    return print_model(spec, read_model(spec), target)


def print_model(spec: ConstraintSpec, model: tuple, target: str) -> ConstraintSpec:
    """Print a `read_model` result in `target`, after refusing names that do not resolve."""
    grammar, text, origin = model
    refuse_unresolved(grammar, text, origin)
    if target == "lark":  # from characters (GBNF, regex) to lexemes
        split_prefixed_literals(grammar)
    else:  # Lark's left-recursive lists and operators, which llama.cpp's GBNF refuses (G004)
        unfold_direct(grammar)
    printed = Printer(grammar, target, text, origin).grammar()
    return ConstraintSpec(_KINDS[target], printed, f"{spec.name} (as {_KINDS[target].label})")


def read_otherwise(spec: ConstraintSpec) -> bool:
    """Whether a regex source means other strings in ECMAScript's reading (xgrammar's) than in Rust's,
    which a conversion follows (`\\d`, `\\w` Unicode's there, ASCII's in ECMAScript; `\\s`, `.`):
    a backend of the other reading compiles another language from the same text."""
    if spec.kind not in (Kind.REGEX, Kind.CHOICE):
        return False
    text = spec.as_regex()
    try:
        return (
            Printer(_regex_grammar(text, ECMA), "gbnf", text, None).grammar()
            != Printer(_regex_grammar(text, RUST), "gbnf", text, None).grammar()
        )
    except (ParseError, UserError):
        return False


def _regex_grammar(text: str, dialect: str) -> Grammar:
    return Grammar("regex", "root", [Rule("root", parse_regex(text, dialect=dialect).node, 0)])


def read_model(spec: ConstraintSpec, text: str | None = None, origin: str | None = None):
    """(grammar model, the text its positions refer to, that text's name) for a GBNF, Lark, regex or
    choice spec; `text`/`origin` read other GBNF text in the spec's place (a translated schema)."""
    text, origin = (spec.text, spec.origin) if text is None else (text, origin)
    try:
        if spec.kind is Kind.EBNF or spec.kind is Kind.JSON_SCHEMA:
            grammar = parse_gbnf(text)
        elif spec.kind is Kind.LARK:
            grammar = parse_lark(text)
            if grammar.unread_regexes:  # its reason and place, not "regex has no equivalent in GBNF"
                raise grammar.unread_regexes[0]
            expand_templates(grammar, text, origin)
            _inline_common(grammar, text)
            _refuse_lark_only(grammar, text, origin)
        elif spec.kind in (Kind.REGEX, Kind.CHOICE):
            text = spec.as_regex()
            parsed = parse_regex(text, dialect=RUST)  # as llguidance and outlines-core read it
            _refuse_features(parsed.features + parsed.flags, text, origin)
            grammar = Grammar("regex", "root", [Rule("root", parsed.node, 0)])
        else:
            raise UserError(f"no conversion from {spec.kind.label}", hint="convert GBNF, Lark, regex or JSON Schema")
    except ParseError as exc:
        raise UserError(
            f"cannot read this {spec.kind.label}: {exc.message}", location=_at(text, exc.pos, origin), hint=exc.hint
        ) from None
    return grammar, text, origin


def _at(text: str, pos: int, origin: str | None) -> Location:
    return Location(origin, *offset_to_line_col(text, pos))


def refuse_unresolved(grammar, text: str, origin: str | None) -> None:
    """Exit 2 at the first name that does not resolve: such a grammar prints into nothing usable."""
    found = unresolved(grammar, text)
    if found:
        u = found[0]
        line, col = offset_to_line_col(text, u.start)
        raise UserError(f"{u.message} ({u.code})", location=Location(origin, line, col), hint=u.hint)


def _refuse_features(features, text: str, origin: str | None) -> None:
    """Exit 2 at the first regex feature (lookaround, backreference, ...) or inline flag: inline flags
    change the language (case, `.`, anchors, verbose syntax) in ways a grammar spells out character by
    character (`(?s)a.b` was printed `"a" [^\\n] "b"` without a word, 2026-12-06)."""
    if not features:
        return
    f = features[0]
    if f.what == "inline flags":
        what, hint = f"the regex's inline flags {f.source}", "spell out what the flag means: [aA] for (?i)a, ..."
    else:
        what, hint = f"a regex {f.what} ({f.source})", "spell the alternatives out without it"
    raise UserError(f"{what} has no equivalent in a grammar", location=_at(text, f.pos, origin), hint=hint)


def _inline_common(grammar: Grammar, text: str) -> None:
    """`%import common.X` as common.lark's definitions, printed with the grammar: GBNF has no imports,
    and NUMBER, WS, CNAME are what Lark grammars import most (refused until 2026-12-07). Each node sits
    at the import that brought it in, so an error about one names that line."""
    found = imported_definitions(grammar.imports)
    wanted = [local for local in grammar.imports if local in found and local in grammar.external]
    reached, stack = set(), list(wanted)
    while stack:  # the imported names and the common.lark definitions they use, nothing else
        name = stack.pop()
        if name not in reached and name in found:
            reached.add(name)
            stack.extend(node.name for node in walk(found[name].body) if isinstance(node, Ref))
    first = text.find("%import")
    for name in [*wanted, *sorted(reached - set(wanted))]:
        at = _directive_at(text, name) if name in wanted else first
        body = copy.deepcopy(found[name].body)
        for node in walk(body):
            node.pos = at
        grammar.rules.append(Rule(name, body, at, terminal=True))
        grammar.external.discard(name)


def _directive_at(text: str, local: str) -> int:
    """Where the `%import` (or `%declare`) line that names `local` starts."""
    m = re.search(rf"^[ \t]*(%(?:import|declare)\b[^\n]*\b{re.escape(local)}\b)", text, re.M)
    return m.start(1) if m else max(text.find("%import"), text.find("%declare"), 0)


def _refuse_lark_only(grammar, text: str, origin: str | None) -> None:
    """Lark's lexer directives have no GBNF equivalent: say so at the directive."""
    _refuse_features(grammar.regex_features, text, origin)
    attributed = next((rule for rule in grammar.rules if rule.attributes), None)
    if attributed is not None:  # `text[stop="END"]:` printed as `text ::= ...` took `x END!` (2026-12-06)
        raise UserError(
            f"llguidance's rule attributes [{attributed.attributes}] (on `{attributed.name}`) have no equivalent "
            "in GBNF",
            location=_at(text, attributed.pos, origin),
            hint="keep the Lark grammar for llguidance, or write the rule without them",
        )
    if grammar.options:
        raise UserError(
            "%llguidance options have no equivalent in GBNF",
            location=_at(text, max(text.find("%llguidance"), 0), origin),
            hint="keep the Lark grammar for llguidance, or drop the options",
        )
    if grammar.ignores:
        raise UserError(
            "%ignore (tokens skipped between all others) has no equivalent in GBNF",
            location=_at(text, text.find("%ignore"), origin),
            hint="write the whitespace into the rules where it may appear",
        )
    if grammar.external:  # templates are expanded: what is left was imported or declared
        name = sorted(grammar.external)[0]
        where = _directive_at(text, name)
        directive = text[where:].split(maxsplit=1)[0] if text.startswith("%", where) else "%import/%declare"
        raise UserError(
            f"`{name}` comes from {directive}, which GBNF has no equivalent for",
            location=_at(text, where, origin),
            hint=f"define `{name}` in the grammar itself",
        )


def one_char_lexemes(spec: ConstraintSpec) -> tuple[str, list[int]]:
    """GBNF printed as Lark whose every lexeme is one character, with each printed line's rule offset.

    GBNF has no lexer: its language is the context-free one over characters (llama.cpp, xgrammar).
    llguidance lexes greedily, so a lexeme that could go on swallows what must follow it, and its
    own GBNF converter makes a lexeme of every literal and terminal-only rule: transformers-CFG's
    `ident ::= [a-z] [a-z0-9_]* ws` ending in `ws ::= [ \t\n]*` before a required `"\n"` became
    one that took the newline, and `a=b\n` could never end (0 of 30 xgrammar samples accepted);
    literals `"a" | "ab"` before `"bc"` refused `abc`. A one-character lexeme cannot go on, so here
    the language is GBNF's. Bounds are llguidance's `x{m,n}` (1.8 refuses `x ~ m..n`). The printed
    rules are the model's, one a line, in order: an error at line N of the Lark is about the rule at
    offset `positions[N - 1]` of the source."""
    grammar, text, origin = read_model(spec)
    refuse_unresolved(grammar, text, origin)
    _split_literals(grammar, lambda lit: True)
    printed = Printer(grammar, "lark", text, origin, braces=True).grammar()
    return printed, [rule.pos for rule in grammar.rules]


def split_prefixed_literals(grammar: Grammar) -> None:
    """Each multi-character literal that another lexeme could end inside, as one-character literals.

    GBNF and regexes read characters; a Lark literal is a lexeme, and llguidance lexes greedily: in
    `"f" | "false" | [a-z]+ ";"` printed as Lark, `fa;` was refused, its lexer having gone on from `f`
    into `false` (2026-12-06). Only lexemes the parser may allow at the same place compete
    (`dialects/lexeme_follow.py`): where none of them (a literal, or a one-character class) matches a
    proper prefix of a literal, no lexer can stop inside it, and it is printed whole: readable
    (`("yes" | "no") " " [ a-z]+` keeps its words). Split literals make new one-character lexemes,
    so this runs until nothing changes. A grammar with opaque parts (special tokens, lookarounds)
    takes the place-blind rule: any such lexeme anywhere."""
    while True:
        sets = rival_sets(grammar)
        if sets is not None:
            texts = rivals_inside(sets)
            which = lambda lit, texts=texts: lit.text in texts  # noqa: E731
        else:
            nodes = [n for rule in grammar.rules for n in walk(rule.body)]
            texts = {n.text for n in nodes if isinstance(n, Lit) and n.text}
            classes = [n for n in nodes if isinstance(n, Chars)]
            which = lambda lit, texts=texts, classes=classes: _prefixed(lit, texts, classes)  # noqa: E731
        if not _split_literals(grammar, which):
            return


def _prefixed(lit: Lit, texts: set[str], classes: list[Chars]) -> bool:
    """Whether one of the literals `texts` or one-character `classes` matches a proper prefix of `lit`."""
    first = ord(lit.text[0])
    return any(lit.text[:k] in texts for k in range(1, len(lit.text))) or any(c.contains(first) for c in classes)


def _split_literals(grammar: Grammar, which) -> bool:
    """Every multi-character literal that `which` picks, as a sequence of one-character ones; whether any was."""
    split = False

    def one(node):
        nonlocal split
        if isinstance(node, Lit) and len(node.text) > 1 and which(node):
            split = True
            return Seq(node.pos, [Lit(node.pos, ch) for ch in node.text])
        return node

    for rule in grammar.rules:
        rule.body = one(rule.body)
        for node in walk(rule.body):
            if isinstance(node, Seq):
                node.items = [one(i) for i in node.items]
            elif isinstance(node, Alt):
                node.alts = [one(a) for a in node.alts]
            elif isinstance(node, Rep):
                node.body = one(node.body)
    return split


def without_lookaheads(node):
    """The node with lookaheads dropped (xgrammar's JSON grammar writes them; they only repeat what follows).
    A sequence left with one item is that item, so `(a | b c) (= x)` prints as the rule's own `a | b c`."""
    if isinstance(node, Opaque) and node.what == "lookahead":
        return Lit(node.pos, "")
    if isinstance(node, Seq):
        node.items = [without_lookaheads(i) for i in node.items]
        kept = [i for i in node.items if not (isinstance(i, Lit) and not i.text)]
        if len(kept) == 1:
            return kept[0]
    elif isinstance(node, Alt):
        node.alts = [without_lookaheads(a) for a in node.alts]
    elif isinstance(node, Rep):
        node.body = without_lookaheads(node.body)
    return node
