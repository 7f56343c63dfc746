"""A reader for Lark grammars, llguidance's dialect included, that keeps positions.

Handles plain Lark (rules, TERMINALS, `?`/`!` prefixes, priorities, `-> alias`,
`[optional]`, `~ n..m`, `"a".."z"`, `/regex/flags`, `%ignore`, `%import`, `%declare`,
`%override`, `%extend`) and llguidance's extensions: `{m,n}` repetition, `#` comments,
`-` in names, `%json {...}` and `%regex {...}` bodies, `@subgrammar`, special tokens
`<|name|>` / `<[ids]>`, rule attributes `name[lazy, stop="x"]:`, `&`/`~` in terminals,
`%llguidance {...}` options and parametric rules (`name::_`, `%if cond`). What it
cannot see into (`%json`, `@name`, special tokens) becomes an Opaque node, so no rule
guesses about it.
"""

from __future__ import annotations

import json
import re

from sgcli.constraints.regex_dialects import RUST
from sgcli.constraints.spec import TooDeep, loads_within_depth
from sgcli.dialects.grammar_model import (
    MAX_STACKED,
    Alt,
    Chars,
    Grammar,
    Lit,
    Node,
    NotReadAsWritten,
    Opaque,
    ParseError,
    Ref,
    Rep,
    Rule,
    Seq,
    repetition,
    stacked_error,
)
from sgcli.dialects.reader import LARK_ESCAPES, Reader
from sgcli.dialects.regex_parse import parse_regex

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_HEADER = re.compile(r"!?\??([A-Za-z_][A-Za-z0-9_-]*)(::\S+?)?(\{[^}\n]*\})?(\[[^\]\n]*\])?(\.-?\d+)?[ \t]*:(?!:)")
_BRACES = re.compile(r"\{\s*(\d*)\s*(,?)\s*(\d*)\s*\}")
_TILDE = re.compile(r"~\s*(\d+)(?:\s*\.\.\s*(\d+))?")
_BLANKS = re.compile(r"[ \t]*")
_DIRECTIVE = re.compile(r"%([a-z_]+)")
_GBNF_RULE = re.compile(r"([A-Za-z0-9_.-]+)[ \t]*::=")  # `name ::=`: GBNF pasted into a Lark file


def is_terminal_name(name: str) -> bool:
    stripped = name.lstrip("_")
    return bool(stripped) and stripped[0].isupper()


def parse_lark(text: str, root: str = "start") -> Grammar:
    """The grammar in `text`; raises ParseError at the first thing it cannot read."""
    return _LarkReader(text).read(root)


class _LarkReader(Reader):
    unclosed_string = NotReadAsWritten

    def __init__(self, text: str):
        super().__init__(text, ("//", "#"), LARK_ESCAPES)
        self.grammar = Grammar("lark", "start")
        self.insensitive = False  # the last string literal had the `i` flag

    def read(self, root: str) -> Grammar:
        grammar = self.grammar
        grammar.root = root
        self.skip_space()
        while not self.eof():
            if self.peek() == "%":
                self.directive(grammar)
            else:
                self.definition(grammar)
            self.skip_space()
        return grammar

    def definition(self, grammar: Grammar, mode: str = "define") -> None:
        m = _HEADER.match(self.text, self.pos)
        if not m and (gbnf := _GBNF_RULE.match(self.text, self.pos)):  # llguidance: "Expected token '_'"
            raise NotReadAsWritten(
                f"`{gbnf[1]} ::=` is a GBNF rule, not Lark: a Lark rule is `{gbnf[1]}: ...`",
                self.pos,
                hint="if the file is GBNF, rename it to .gbnf or pass it with --ebnf (lint: --kind ebnf)",
            )
        if not m:
            raise self.error("expected a rule or terminal definition like `name: ...`")
        name = m.group(1)
        name_pos = m.start(1)
        if m.group(5):
            grammar.priority_spans.append(m.span(5))
        self.pos = m.end()
        params = tuple(p.strip() for p in (m.group(3) or "{}")[1:-1].split(",") if p.strip())
        grammar.external.update(params)  # template parameters: names local to the body, defined by each use
        body = self.expansions()
        attributes = (m.group(4) or "")[1:-1]
        rule = Rule(name, body, name_pos, terminal=is_terminal_name(name), attributes=attributes, params=params)
        existing = next((r for r in grammar.rules if r.name == name), None)
        if mode == "extend" and existing is not None:
            existing.body = Alt(existing.body.pos, [existing.body, body])
        elif mode == "override" and existing is not None:
            existing.body = body
        else:
            grammar.rules.append(rule)

    def directive(self, grammar: Grammar) -> None:
        start = self.pos
        m = _DIRECTIVE.match(self.text, self.pos)
        if not m:
            raise self.error("expected a directive after '%'")
        word = m.group(1)
        self.pos = m.end()
        self.skip_space(newlines=False)
        if word == "ignore":
            grammar.ignores.append(self.expansions())
        elif word == "import":
            imported = self.import_names()
            grammar.external.update(imported)
            grammar.imports.update(imported)
        elif word == "declare":
            while (n := _NAME.match(self.text, self.pos)) and not self.at_new_definition():
                grammar.external.add(n.group())
                self.pos = n.end()
                self.skip_space(newlines=False)
        elif word in ("override", "extend"):
            self.definition(grammar, mode=word)
        elif word == "llguidance":
            start_json = self.pos
            self.json_object()
            try:
                options = loads_within_depth(self.text[start_json : self.pos])
            except TooDeep as exc:
                raise self.error(f"%llguidance: {exc}", start_json) from None
            except ValueError:
                raise self.error("%llguidance needs a JSON object", start_json) from None
            if isinstance(options, dict):
                grammar.options.update(options)
        else:
            raise self.error(f"unknown directive %{word}", start)

    def import_names(self) -> dict[str, str]:
        """Local name -> imported name: `%import common.WS` ({"WS": "common.WS"}), `%import common.WS ->
        SPACE` ({"SPACE": "common.WS"}), `%import common (WS, NUMBER)`."""
        line_end = self.text.find("\n", self.pos)
        line_end = len(self.text) if line_end < 0 else line_end
        spec = self.text[self.pos : line_end].split("//")[0].split("#")[0].strip()
        self.pos = line_end
        if "->" in spec:
            source, local = (part.strip() for part in spec.split("->", 1))
            return {local: source}
        if "(" in spec:
            module = spec[: spec.index("(")].strip()
            inside = spec[spec.index("(") + 1 : spec.rindex(")")] if ")" in spec else ""
            return {n.strip(): f"{module}.{n.strip()}" for n in inside.split(",") if n.strip()}
        return {spec.rsplit(".", 1)[-1]: spec} if spec else {}

    def at_new_definition(self) -> bool:
        """A definition or directive starts here (only at the start of a line)."""
        if not self.at_line_start(self.pos):
            return False
        if self.peek() == "%":
            return not any(self.startswith(w) for w in ("%json", "%regex", "%if"))
        return bool(_HEADER.match(self.text, self.pos) or _GBNF_RULE.match(self.text, self.pos))

    def expansions(self) -> Node:
        start = self.pos
        alts = [self.alias()]
        while True:
            self.skip_space()
            if self.peek() != "|" or self.eof():
                break
            self.pos += 1
            alts.append(self.alias())
        return alts[0] if len(alts) == 1 else Alt(start, alts)

    def alias(self) -> Node:
        self.skip_space()
        start = self.pos
        parts = [self.expansion()]
        while self.peek() == "&":
            self.pos += 1
            parts.append(self.expansion())
        node = parts[0] if len(parts) == 1 else Opaque(start, "intersection (&)", nullable=None, children=parts)
        self.skip_space()
        if self.startswith("%if"):  # parametric condition: the alternative may be switched off
            self.pos += 3
            self.skip_space(newlines=False)
            self.balanced_call()
            node = Opaque(start, "conditional alternative", nullable=None, children=[node])
            self.skip_space()
        if self.startswith("->"):
            self.pos += 2
            self.skip_space(newlines=False)
            m = _NAME.match(self.text, self.pos)
            if not m:
                raise self.error("expected an alias name after '->'")
            self.pos = m.end()
        return node

    def expansion(self) -> Node:
        self.skip_space()
        start = self.pos
        items: list[Node] = []
        while True:
            self.skip_space()
            if (
                self.eof()
                or self.peek() in "|)]&"
                or self.startswith("->")
                or self.startswith("%if")
                or self.at_new_definition()
            ):
                break
            element_start = self.pos
            items.append(self.postfix(self.atom(), element_start))
        if not items:
            return Lit(start, "")
        return items[0] if len(items) == 1 else Seq(start, items)

    def postfix(self, node: Node, start: int) -> Node:
        """Repetition operators; a repetition is located where its element's source starts.
        Blanks may stand before `*`, `+`, `?` and `~ n..m` (Lark, llguidance and xgrammar allow
        them, and sgcli's printer writes `x ~ 1..40`)."""
        for _ in range(MAX_STACKED + 1):
            blanks = _BLANKS.match(self.text, self.pos).end()
            if self.text[blanks : blanks + 1] in ("*", "+", "?") or _TILDE.match(self.text, blanks):
                self.pos = blanks
            op = self.pos
            found = repetition(self.text, self.pos, _BRACES)
            if found is not None:
                lo, hi, self.pos = found
            elif self.peek() == "~" and (m := _TILDE.match(self.text, self.pos)):
                self.pos = m.end()
                lo = int(m.group(1))
                hi = int(m.group(2) or m.group(1))
                if hi < lo:  # Lark refuses it; printed as `{3,1}` it reads back nowhere
                    raise self.error(f"repetition ~ {lo}..{hi} has its maximum below its minimum", op)
            else:
                node.span = (start, self.pos)
                return node
            node = Rep(start, node, lo, hi, op, self.pos, lark=True)
        raise stacked_error(start)

    def atom(self) -> Node:
        start = self.pos
        ch = self.peek()
        if ch == "(":
            self.pos += 1
            self.open_group(start)
            inner = self.expansions()
            self.skip_space()
            self.expect(")", "')'")
            self.close_group()
            return inner
        if ch == "[":
            self.pos += 1
            self.open_group(start)
            inner = self.expansions()
            self.skip_space()
            self.expect("]", "']'")
            self.close_group()
            return Rep(start, inner, 0, 1, start, self.pos)
        if ch == '"':
            lit = Lit(start, self.string())
            if self.insensitive:  # `"select"i`: which characters match which differs by engine (ſ for s): opaque
                return Opaque(start, f"literal {json.dumps(lit.text)}i", nullable=not lit.text, sample=lit.text)
            self.skip_space(newlines=False)
            if self.startswith(".."):
                self.pos += 2
                self.skip_space(newlines=False)
                hi = self.string()
                if len(lit.text) != 1 or len(hi) != 1:
                    raise self.error('a range needs one-character strings: "a".."z"', start)
                if ord(hi) < ord(lit.text):
                    raise self.error(f"character range {lit.text!r}..{hi!r} is backwards", start)
                return Chars(start, [(ord(lit.text), ord(hi))])
            return lit
        if ch == "/":
            return self.regex()
        if ch == "~":  # llguidance: negation of a terminal expression
            self.pos += 1
            inner = self.atom()
            return Opaque(start, "negation (~)", nullable=None, children=[inner])
        if ch == "@":
            m = _NAME.match(self.text, self.pos + 1)
            if not m:
                raise self.error("expected a grammar name after '@'")
            self.pos = m.end()
            return Opaque(start, f"@{m.group()}", nullable=None)
        if ch == "<":
            end = self.text.find(">", self.pos)
            if end < 0 or "\n" in self.text[self.pos : end]:
                raise self.error("unclosed special token '<...>'")
            self.pos = end + 1
            return Opaque(start, f"special token {self.text[start : end + 1]}", nullable=False)
        if self.startswith("%json") or self.startswith("%regex"):
            word = "%json" if self.startswith("%json") else "%regex"
            self.pos += len(word)
            self.skip_space()
            self.json_object()
            return Opaque(start, word, nullable=False if word == "%json" else None)
        m = _NAME.match(self.text, self.pos)
        if m:
            self.pos = m.end()
            if self.startswith("::"):  # parametric reference: name::expr
                self.pos += 2
                self.balanced_call()
            elif self.peek() == "{" and not _BRACES.match(self.text, self.pos):  # template usage
                return Ref(start, m.group(), args=self.template_args())
            return Ref(start, m.group())
        raise self.error(f"unexpected {ch!r}")

    def template_args(self) -> list[Node] | None:
        """The arguments of a template use, `_sep{WORD, ","}`: names, strings, regexes, ranges or other uses, as
        Lark writes them. None, the braces skipped, where they are something else (no backend reads templates)."""
        start, depth = self.pos, self.depth
        args: list[Node] = []
        try:
            self.open_group(start)  # uses nest in arguments: bounded like groups
            self.pos += 1
            while True:
                self.skip_space()
                args.append(self.atom())
                self.skip_space()
                if self.peek() == "}":
                    self.pos += 1
                    self.depth = depth
                    return args
                self.expect(",", "',' or '}' after a template argument")
        except NotReadAsWritten:
            raise
        except ParseError:
            self.pos, self.depth = start, depth
            self.skip_balanced("{", "}")
            return None

    def string(self) -> str:
        start = self.pos
        text = super().string()
        self.grammar.string_spans.append((start, self.pos))
        self.insensitive = self.peek() == "i"  # the case-insensitive flag: `"select"i`
        if self.insensitive:
            self.pos += 1
        return text

    def regex(self) -> Node:
        start = self.pos
        i = self.pos + 1
        while i < len(self.text) and self.text[i] != "/":
            if self.text[i] == "\n":
                raise self.error("unterminated regex /.../", start)
            i += 2 if self.text[i] == "\\" else 1
        if i >= len(self.text):
            raise self.error("unterminated regex /.../", start)
        body_start = start + 1
        self.grammar.regex_spans.append((body_start, i))
        self.pos = i + 1
        flags = ""
        while not self.eof() and self.peek() in "imslux":
            flags += self.peek()
            self.pos += 1
        try:
            parsed = parse_regex(self.text[body_start:i], lambda k: body_start + k, RUST)
        except NotReadAsWritten:  # read, and refused: no backend reads it as written
            raise
        except ParseError as exc:  # the backends may read it; a conversion cannot, and says why (`unread_regexes`)
            self.grammar.unread_regexes.append(exc)
            return Opaque(start, "regex", nullable=None)
        if flags.replace("u", ""):  # `/[a-z]+/i`, `/./s`, `/^x/m`: a language the reader does not model
            self.grammar.regex_features.extend(parsed.features)
            return Opaque(start, f"regex with flags {flags}", nullable=None)
        if parsed.flags:  # `/(?i)abc/`: the same, written inside
            self.grammar.regex_features.extend(parsed.features)
            return Opaque(start, f"regex with inline flags {parsed.flags[0].source}", nullable=None)
        self.grammar.regex_features.extend(parsed.features)
        return parsed.node

    def json_object(self) -> None:
        if self.peek() != "{":
            raise self.error("expected a JSON object '{...}'")
        self.skip_balanced("{", "}")

    def skip_balanced(self, open_: str, close: str) -> None:
        """Skip a bracketed block, honouring JSON/Lark strings inside it."""
        start = self.pos
        depth = 0
        while not self.eof():
            ch = self.peek()
            if ch == '"':
                self.string_raw()
                continue
            self.pos += 1
            if ch == open_:
                depth += 1
            elif ch == close:
                depth -= 1
                if depth == 0:
                    return
        raise self.error(f"unclosed '{open_}'", start)

    def string_raw(self) -> None:
        start = self.pos
        self.pos += 1
        while not self.eof() and self.peek() != '"':
            self.pos += 2 if self.peek() == "\\" else 1
        if self.eof():
            raise self.error("unterminated string", start)
        self.pos += 1

    def balanced_call(self) -> None:
        """A parameter or condition expression: a name, number or `fn(args...)`."""
        m = re.compile(r"[A-Za-z0-9_]+").match(self.text, self.pos)
        if not m:
            raise self.error("expected a parameter expression")
        self.pos = m.end()
        if self.peek() == "(":
            self.skip_balanced("(", ")")
