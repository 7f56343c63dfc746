"""A Lark or GBNF grammar rewritten into Lark the `lark` library reads, for the output check
(`lark_check`): GBNF through the project's GBNF -> Lark converter, and llguidance's extensions
of Lark, so that its grammars get a verdict too:
- `@name` sub-grammars and inline `%json {...}` schemas become rules of the same parse: a JSON
  sub-grammar is parsed as any JSON value, its text cut out of the parse tree and validated
  against its schema with `jsonschema` (the verdict's `validated_by` then says
  `lark+jsonschema`); Lark, GBNF, regex and choice sub-grammars are imported under their own
  namespace (a Lark sub-grammar's `%ignore`, which llguidance applies after each of its lexemes,
  is dropped by the import: an output that does not parse without it is `Unchecked`);
- rule attributes `name[max_tokens=N, temperature=T, capture]` are dropped: a token budget and a
  sampling temperature do not change the text a rule stands for; `stop=...` and the other
  attributes that change the text are `Unchecked`. A `[lazy]` rule is one lexeme that llguidance
  ends at its first match (`body[lazy]: /.+/` is one character): it becomes a terminal of its own
  (`Prepared.lazy`), and the check refuses a reading where that terminal's text goes past the
  first prefix it matches (the language without it is wider than both backends');
- `%llguidance {...}` options (JSON, possibly over several lines) are dropped; `x{m,n}`
  repetition becomes lark's `x ~ m..n`; `#` comments and `-` in names are rewritten.

What the lark library still cannot read (`%regex`, `<|special|>`) raises `Unchecked`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.validation.verdict import Unchecked

# rule attributes that leave the rule's text alone (see the module docstring); `lazy` is read apart
_TEXT_NEUTRAL_ATTRIBUTES = {"max_tokens", "temperature", "capture"}

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
    ignoring: list[str] = field(default_factory=list)  # sub-grammars with an %ignore the import drops
    lazy: dict[str, str] = field(default_factory=dict)  # terminal standing for a `[lazy]` rule -> the rule


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
    """Rewrite llguidance's extensions (`@name`, `%json {...}`, rule attributes, `%llguidance`,
    `{m,n}`, `#` comments, `-` in names) into Lark the lark library can parse."""
    prepared = Prepared("")
    subs = dict(spec.subgrammars)
    out: list[str] = []
    text = _without_attributes(_without_options(lark_text(spec)), prepared.lazy)
    text, empty_terminals = _nonempty_terminals(text)
    groups: list[int] = []  # where each open '(' sits in `out`
    last = 0  # where the last complete element starts in `out` (for `{n,}`)
    i = 0
    while i < len(text):
        if text.startswith("#", i):  # llguidance's comment
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        end = _skip_literal(text, i)
        ranged = _range(text, i, end) if end > i and text[i] == '"' else None
        if ranged is not None:  # "^".."a": the lark library wrote [^-a], a negated class
            last = len(out)
            out.append(ranged[0])
            i = ranged[1]
            continue
        if end > i:
            if not text.startswith("//", i):
                last = len(out)
            literal = text[i:end]
            out.append(
                _nonempty_inline(_greedy(literal)) if text[i] == "/" and not text.startswith("//", i) else literal
            )
            i = end
            continue
        m = re.compile(r"@([A-Za-z_][A-Za-z0-9_]*)").match(text, i)
        if m:
            last = len(out)
            out.append(_sub_rule(m.group(1), subs, prepared))
            i = m.end()
            continue
        m = _NAME.match(text, i)
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            name = _plain_name(m.group(0))
            is_reference = m.group(0) in empty_terminals and not re.match(r"\s*:", text[m.end() :])
            last = len(out)
            out.append(f"({name}?)" if is_reference else name)
            i = m.end()
            continue
        m = re.compile(r"%json\s*").match(text, i)
        if m:
            try:
                schema, end = json.JSONDecoder().raw_decode(text, m.end())
            except json.JSONDecodeError as exc:
                raise Unchecked(f"cannot read the %json schema: {exc.msg}") from None
            name = f"sginline_json{sum(k.startswith('sginline_json') for k in prepared.schemas)}"  # `%json #n`
            prepared.schemas[name] = schema
            last = len(out)
            out.append(name)
            i = end
            continue
        m = _BRACES.match(text, i)
        if m and (m.group(1) or m.group(3)):
            out.append(_tilde(m, "".join(out[last:])))
            i = m.end()
            continue
        for what, pattern in _UNREADABLE:
            if re.compile(pattern).match(text, i):
                raise Unchecked(
                    f"the grammar uses {what}, which only llguidance reads; no independent parser checks it"
                )
        if text[i] == "(":
            groups.append(len(out))
        elif text[i] == ")" and groups:
            last = groups.pop()
        out.append(text[i])
        i += 1
    prepared.extra += [f"{name}: sgjson_value" for name in prepared.schemas]
    json_rules = _JSON_RULES if prepared.schemas else ""
    prepared.text = "".join(out) + "\n" + "\n".join(dict.fromkeys(prepared.extra)) + "\n" + json_rules
    return prepared


_BRACES = re.compile(r"\{\s*(\d*)\s*(,?)\s*(\d*)\s*\}")
_UNREADABLE = (
    ("%regex {...}", r"%regex\b"),
    ("a special token <|...|> or <[...]>", r"<(?:\||\[)"),
)


def _tilde(m: re.Match, element: str) -> str:
    """llguidance's `x{m,n}` as lark's `x ~ m..n` (`{n,}`: `x ~ n x*`)."""
    lo = int(m.group(1) or 0)
    if not m.group(2):
        return f" ~ {lo}"
    if m.group(3) == "":
        return f" ~ {lo} {element}*" if lo else "*"
    return f" ~ {lo}..{int(m.group(3))}"


def _plain_name(name: str) -> str:
    """llguidance allows `-` in names, lark does not."""
    if "-" not in name:
        return name
    return name.replace("-", "_DASH_" if name.lstrip("_")[:1].isupper() else "_dash_")


def _without_options(text: str) -> str:
    """Drop `%llguidance {...}` directives (their JSON may span lines): options of llguidance's
    matcher, not of the language."""
    out, i = [], 0
    for m in re.finditer(r"^[ \t]*%llguidance[ \t]*", text, flags=re.M):
        if m.start() < i:
            continue
        try:
            _, end = json.JSONDecoder().raw_decode(text, m.end())
        except json.JSONDecodeError as exc:
            raise Unchecked(f"cannot read the %llguidance options: {exc.msg}") from None
        out.append(text[i : m.start()])
        i = end
    return "".join(out) + text[i:]


_ATTRIBUTES = re.compile(
    r"^([ \t]*[?!]?[A-Za-z_][A-Za-z0-9_-]*(?:\{[^}\n]*\})?)\[([^\]\n]*)\](?=[ \t]*(?:\.-?\d+)?[ \t]*:(?!:))", re.M
)


def _without_attributes(text: str, lazy: dict[str, str]) -> str:
    """`name[max_tokens=64]: ...` -> `name: ...`; attributes that change the text are Unchecked.
    `name[lazy]: BODY` -> `name: SGLAZYn` and `SGLAZYn: BODY`, recorded in `lazy`: llguidance reads a
    lazy rule as one lexeme (its body may name terminals only), so its body is a terminal's too."""

    def drop(m: re.Match) -> str:
        head = m.group(1)
        name = head.strip().lstrip("?!")
        keys = re.findall(r"([A-Za-z_]+)\s*(?:=\s*(?:\"(?:[^\"\\]|\\.)*\"|[^,\]]*))?", m.group(2))
        for key in keys:
            if key not in _TEXT_NEUTRAL_ATTRIBUTES | {"lazy"}:
                raise Unchecked(
                    f"rule `{name}` has the llguidance attribute `{key}`, which changes the text the rule stands "
                    "for; no independent parser reads it"
                )
        if "lazy" not in keys:
            return head
        if "{" in name:
            raise Unchecked(f"rule `{name}` is a lazy template rule, which no independent parser reads")
        terminal = f"SGLAZY{len(lazy)}"
        lazy[terminal] = name
        return f"{head}: {terminal}\n{terminal}"

    return _ATTRIBUTES.sub(drop, text)


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:-[A-Za-z0-9_]+)*")
# a whole regex that is one atom under a quantifier that allows zero repetitions
_OPTIONAL_ATOM = re.compile(r"^(\[(?:\\.|[^\]\\])*\]|\\.|\((?:[^()\\]|\\.)*\)|[^\\()\[\]|])(\*|\?|\{0,(\d*)\})$")


def _nonempty_terminals(text: str) -> tuple[str, set[str]]:
    """lark's dynamic Earley lexer refuses terminals that match the empty string (llguidance takes
    them). `T: /X{0,n}/` becomes `T: /X{1,n}/` (and `X*` -> `X+`, `X?` -> `X`), with every use of
    T made optional by the caller; other empty-matching terminals are left for lark to refuse."""
    changed: set[str] = set()

    def fix(m: re.Match) -> str:
        name, flags = m.group(1), m.group(3)
        new = _nonempty(m.group(2))
        if new is None:
            return m.group(0)
        changed.add(name)
        return f"{name}: /{new}/{flags}"

    fixed = re.sub(r"^([A-Z_][A-Z0-9_]*)[ \t]*:[ \t]*/((?:\\.|[^/\\\n])*)/([imslux]*)[ \t]*$", fix, text, flags=re.M)
    return fixed, changed


def _nonempty_inline(literal: str) -> str:
    """A `/regex/` written in a rule that matches the empty string, as `_nonempty_terminals` rewrites a named
    one: `/[^<]*/` -> `(/[^<]+/)?`. A reasoning rule `thought[max_tokens=40]: /[^<]*/` left the whole
    grammar unchecked ("zero-width regexps"), where the same regex as a terminal was checked."""
    new = _nonempty(literal[1:-1])
    return literal if new is None else f"(/{new}/)?"


def _nonempty(body: str) -> str | None:
    """`X{0,n}`, `X*`, `X?` (one atom X, the whole regex) as `X{1,n}`, `X+`, `X`; None for a regex that
    cannot match the empty string, or one of another shape (lark then refuses it, and says why)."""
    import regex

    atom = _OPTIONAL_ATOM.match(body)
    try:
        if atom is None or regex.fullmatch(body, "") is None:
            return None
    except regex.error:
        return None
    op = atom.group(2)
    return atom.group(1) + ("+" if op == "*" else "" if op == "?" else "{1," + atom.group(3) + "}")


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


_RANGE_DOTS = re.compile(r"\s*\.\.\s*")


def _range(text: str, i: int, end: int) -> tuple[str, int] | None:
    """A range literal `"a".."z"` starting at `i` (its first string ending at `end`) as a regex of two
    escaped code points, and where the range ends; None for any other string. The lark library
    builds `[%s-%s]` from the characters as they are: `"^".."a"` became `[^-a]` (everything but `-`
    and `a`), where llguidance and xgrammar read the code points from `^` to `a`."""
    import ast

    dots = _RANGE_DOTS.match(text, end)
    if dots is None or not text.startswith('"', dots.end()):
        return None
    stop = _skip_literal(text, dots.end())
    try:
        low, high = ast.literal_eval(text[i:end]), ast.literal_eval(text[dots.end() : stop])
    except (ValueError, SyntaxError):
        return None
    if not (isinstance(low, str) and isinstance(high, str) and len(low) == len(high) == 1):
        return None
    return f"/[{_class_char(low)}-{_class_char(high)}]/", stop


def _class_char(c: str) -> str:
    """`c` inside a class of a Lark regex literal (whose `\\xHH` the lark library turns back into the
    character before the regex is built: the special ones are escaped as themselves)."""
    if c in "\\]^-[/":
        return "\\" + c
    return c if c.isprintable() else f"\\u{ord(c):04x}"


_COUNTED = re.compile(r"\{(?:\d+(?:,\d*)?|,\d+)\}")


def _greedy(regex_literal: str) -> str:
    """A /regex/ terminal with its lazy quantifiers (`*?`, `+?`, `??`, `{m,n}?`) made greedy. Both
    backends read a terminal as a language, where lazy and greedy are one; the lark library's lexer
    takes a lazy terminal's shortest match only, and refused honest outputs (`A: /[a-z]+?/` then
    `.`). Lark's own `%import common.C_COMMENT` is not written here, so it keeps its shortest match,
    which is how both backends' built-in C_COMMENT reads too (it ends at the first `*/`)."""
    if "?" not in regex_literal:
        return regex_literal
    out: list[str] = []
    i, in_class, quantified = 0, False, False
    while i < len(regex_literal):
        ch = regex_literal[i]
        if ch == "\\":
            out.append(regex_literal[i : i + 2])
            i, quantified = i + 2, False
            continue
        if in_class:
            in_class = ch != "]"
            quantified = False
        elif ch == "[":
            in_class = True
            if regex_literal[i + 1 : i + 2] == "^":  # a leading ']' (or '^]') is a literal, not the end
                out.append(ch)
                i += 1
                ch = "^"
            if regex_literal[i + 1 : i + 2] == "]":
                out.append(ch)
                i += 1
                ch = "]"
        elif ch == "?" and quantified:  # the lazy mark after a quantifier: dropped
            i, quantified = i + 1, False
            continue
        elif ch in "*+?":
            quantified = True
        elif ch == "{" and (m := _COUNTED.match(regex_literal, i)):
            out.append(m.group(0))
            i, quantified = m.end(), True
            continue
        else:
            quantified = False
        out.append(ch)
        i += 1
    return "".join(out)


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
        if re.search(r"^[ \t]*%ignore\b", inner.text, flags=re.M):
            prepared.ignoring.append(f"@{name}")
        prepared.extra.append(f"%import {rule}.start -> {rule}")
        return rule
    elif sub.kind in (Kind.REGEX, Kind.CHOICE):
        from sgcli.constraints.regex_dialects import RUST, RUST_FLAGS, translate

        # `(?V1)(?-f)`: read with Rust's nested classes and simple case folding, as regex_dialects reads it
        body = RUST_FLAGS + translate(sub.as_regex(), RUST).replace("/", "\\/")
        prepared.extra.append(f"{rule}: {_greedy(f'/{body}/')}")
    else:
        raise Unchecked(f"sub-grammar @{name} is a {sub.kind.label}, which the lark library cannot check")
    return rule
