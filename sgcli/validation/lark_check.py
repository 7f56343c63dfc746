"""Re-parsing grammar outputs with the `lark` library, apart from the backend that generated them.

A backend's own matcher saying "complete" is the generator agreeing with itself; here the
output is parsed again by a different implementation (lark's Earley parser). GBNF goes
through the project's GBNF -> Lark converter first.

llguidance's extensions of Lark (`@name` sub-grammars, inline `%json`, rule attributes,
`%llguidance` options, `{m,n}`) are rewritten first (`lark_prepare`), so its grammars get a verdict
too: a JSON sub-grammar is parsed as any JSON value, its text cut out of the parse tree and
validated against its schema with `jsonschema` (`validated_by` then says `lark+jsonschema`).
A grammar the lark library still cannot read (`&`, `~`, `<|special|>`, `%regex`) raises
`Unchecked`: no verdict, never a guess. So does one past `MAX_RULES` rules: lark's Earley
parser is quadratic or worse in the rules (measured: 1,000 rules took 12 s to build and 19 s
to parse three characters; 10,000 did not finish in 5 minutes).

Every check is bounded in time: lark's Earley parser asks a terminal's regex for a match at each
position, and a terminal like `/(a|aa)+b/` backtracks exponentially on `aaaa...` (36 characters
took 32 s). Each of those calls shares one deadline (`CHECK_TIMEOUT_S` for the whole check);
past it the verdict is `Unchecked`, never a hang.
"""

from __future__ import annotations

import re
import time
from contextvars import ContextVar
from functools import lru_cache

from sgcli.constraints.spec import ConstraintSpec
from sgcli.validation.lark_prepare import prepare
from sgcli.validation.verdict import Unchecked, json_verdict

COMPLETE_LEXER_MAX_CHARS = 4000  # lark's exhaustive lexer is quadratic or worse; past this, no verdict
MAX_RULES = 500  # measured: 500 rules 2.7 s to build lark's parser, 3.4 s to parse; past this, no verdict
CHECK_TIMEOUT_S = 10.0  # one whole check: every parse and regex match in it
_deadline: ContextVar[float] = ContextVar("lark_check_deadline", default=float("inf"))


@lru_cache(maxsize=16)
def _parser(text: str, modules: tuple[tuple[str, str], ...], lexer: str, ambiguity: str = "resolve"):
    import lark

    found = dict(modules)

    def loader(_base, path):
        name = path.rsplit("/", 1)[-1].removesuffix(".lark")
        if name not in found:
            raise OSError(f"no module {name}")
        return path, found[name]

    try:
        parser = lark.Lark(
            text,
            parser="earley",
            lexer=lexer,
            regex=True,
            propagate_positions=True,
            import_paths=[loader],
            ambiguity=ambiguity,
        )
    except Exception as exc:  # lark raises GrammarError, UnexpectedInput, ... for syntax it lacks
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise Unchecked(
            f"the lark library cannot read this grammar ({first}); llguidance-only syntax (`&`, `~`, "
            "`<|special|>`, %regex, ...) has no independent parser"
        ) from None
    _bound(parser)
    return parser


def _bound(parser) -> None:
    """Make every terminal match of `parser` honour the check's deadline. Earley's dynamic lexer
    keeps its compiled terminals in the matcher behind `term_matcher` (lark 1.2 and 1.3)."""
    matcher = getattr(getattr(parser.parser.parser, "term_matcher", None), "__self__", None)
    regexps = getattr(matcher, "regexps", None)
    if not isinstance(regexps, dict):
        raise Unchecked("this version of the lark library keeps its terminals where sgcli cannot bound them")
    for name, pattern in regexps.items():
        regexps[name] = _DeadlinePattern(pattern)


class _DeadlinePattern:
    """A compiled terminal whose matches stop at the check's deadline (the `regex` package's timeout)."""

    def __init__(self, pattern):
        self.pattern = pattern

    def match(self, text, pos=0):
        return self.pattern.match(text, pos, timeout=_time_left())


def _time_left() -> float:
    left = _deadline.get() - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def rule_count(text: str) -> int:
    """How many rules a Lark text defines (lark's Earley parser is quadratic or worse in them: `MAX_RULES`)."""
    return len(re.findall(r"^[ \t]*[?!]?[A-Za-z_][A-Za-z0-9_]*(?:\.-?\d+)?[ \t]*:(?!:)", text, flags=re.M))


def check(spec: ConstraintSpec, output: str) -> list[str]:
    """Errors of `output` against a Lark/GBNF `spec` (empty when it parses and every sub-grammar's
    JSON validates); raises Unchecked when no independent verdict is possible."""
    return checked(spec, output)[0]


def checked(spec: ConstraintSpec, output: str) -> tuple[list[str], str]:
    """(errors, what checked them): "lark", or "lark+jsonschema" where sub-grammar JSON was validated."""
    token = _deadline.set(time.monotonic() + CHECK_TIMEOUT_S)
    try:
        return _checked(spec, output)
    except TimeoutError:
        raise Unchecked(
            f"the lark check took longer than {CHECK_TIMEOUT_S:g} s (a terminal's regex backtracks, or the "
            "grammar is very ambiguous)"
        ) from None
    finally:
        _deadline.reset(token)


def _checked(spec: ConstraintSpec, output: str) -> tuple[list[str], str]:
    import lark

    prepared = prepare(spec)
    rules = rule_count(prepared.text)
    if rules > MAX_RULES:
        raise Unchecked(
            f"the grammar has {rules:,} rules; the lark library's Earley parser takes minutes past {MAX_RULES} "
            "(quadratic or worse in the rules)"
        )
    modules = tuple(sorted(prepared.modules.items()))
    lexers = ["dynamic"] + (["dynamic_complete"] if len(output) <= COMPLETE_LEXER_MAX_CHARS else [])
    error = None
    for lexer in lexers:
        try:
            tree = _parser(prepared.text, modules, lexer).parse(output)
        except lark.exceptions.UnexpectedInput as exc:
            error = exc
            continue
        by = "lark+jsonschema" if prepared.schemas else "lark"
        judge = _Judge(_parser(prepared.text, modules, lexer), output, prepared)
        errors = _sub_errors(tree, judge)
        if errors:  # some other reading may pass: every tokenization where a lazy rule may end earlier
            complete = prepared.lazy and len(output) <= COMPLETE_LEXER_MAX_CHARS
            if _some_reading_valid(
                _parser(prepared.text, modules, "dynamic_complete" if complete else lexer, "forest"), judge
            ):
                return [], by
        return errors, by
    if len(lexers) == 1:
        raise Unchecked(f"the output is longer than {COMPLETE_LEXER_MAX_CHARS} characters for lark's complete lexer")
    if prepared.ignoring:  # parsing without the ignore reads a subset of the backends' language: a pass is
        # a pass, a failure may be only the ignored text
        raise Unchecked(
            f"sub-grammar {', '.join(prepared.ignoring)} has %ignore, which llguidance applies after each of "
            "its lexemes and lark's %import drops; the output does not parse without it"
        )
    if _ends_early(_parser(prepared.text, modules, lexers[-1]), error, output):
        line, col = output.count("\n") + 1, len(output) - output.rfind("\n")
        return [
            "output is not a sentence of the grammar: the text ends before the grammar is complete "
            f"(at line {line} column {col}, lark parser)"
        ], "lark"
    line, col = getattr(error, "line", -1), getattr(error, "column", -1)
    return [f"output is not a sentence of the grammar: the lark parser stops at line {line} column {col}"], "lark"


def _ends_early(parser, error, output: str) -> bool:
    """Whether the parse ran out of text rather than met a wrong character. Earley's dynamic lexer
    matches whole terminals, so `The answer` against `"The answer is " number` fails at column 1
    (UnexpectedCharacters) though the text is a prefix of a sentence: the rest of the text being
    the start of a terminal the parser expected there is the same end of input."""
    import lark
    import regex

    if isinstance(error, lark.exceptions.UnexpectedEOF) or getattr(error, "line", -1) in (None, -1):
        return True
    rest = output[getattr(error, "pos_in_stream", len(output)) :]
    expected = getattr(error, "allowed", None) or set()
    return any(
        regex.fullmatch(t.pattern.to_regexp(), rest, partial=True, timeout=_time_left()) is not None
        for t in parser.terminals
        if t.name in expected
    )


class _Judge:
    """What the grammar alone does not say about a piece of a parse: a sub-grammar's JSON must
    validate against its schema, and a `[lazy]` rule's text must end at the first prefix its body
    matches (llguidance ends the lexeme there: `body[lazy]: /.+/` is one character)."""

    def __init__(self, parser, output: str, prepared):
        import regex

        self.output, self.schemas, self.lazy = output, prepared.schemas, prepared.lazy
        self.bodies = {t: regex.compile(parser.get_terminal(t).pattern.to_regexp()) for t in prepared.lazy}

    def rule_errors(self, rule: str, start: int, end: int) -> list[str]:
        schema = self.schemas.get(rule)
        if schema is None or start == end:
            return []
        return [f"{_label(rule)}: {e}" for e in json_verdict(schema, self.output[start:end]).errors]  # NaN too

    def token_errors(self, terminal: str, start: int, end: int) -> list[str]:
        body = self.bodies.get(terminal)
        if body is None:
            return []
        for stop in range(start + 1, end):
            if body.fullmatch(self.output, start, stop, timeout=_time_left()):
                line = self.output.count("\n", 0, stop) + 1
                column = stop - self.output.rfind("\n", 0, stop)
                return [
                    f"rule `{self.lazy[terminal]}` is [lazy]: llguidance ends it at its first match, "
                    f"{_excerpt(self.output[start:stop])} (line {line} column {column}); the output goes on to "
                    f"{_excerpt(self.output[start:end])}"
                ]
        return []


def _excerpt(text: str, most: int = 40) -> str:
    import json

    return json.dumps(text if len(text) <= most else text[: most - 1] + "…", ensure_ascii=False)


def _sub_errors(tree, judge: _Judge) -> list[str]:
    """Judge every sub-grammar's JSON and `[lazy]` rule in the parse tree. A `?start` that inlines
    down to one terminal parses to a bare Token (outlines' json.lark on `"abc"`)."""
    from lark import Token

    if isinstance(tree, Token):
        return judge.token_errors(tree.type, tree.start_pos, tree.end_pos)
    errors = []
    for node in tree.iter_subtrees_topdown():
        if not node.meta.empty:
            errors += judge.rule_errors(str(node.data), node.meta.start_pos, node.meta.end_pos)
        for kid in node.children:
            if isinstance(kid, Token):
                errors += judge.token_errors(kid.type, kid.start_pos, kid.end_pos)
    return errors


def _some_reading_valid(parser, judge: _Judge) -> bool:
    """Whether some parse of the output passes every judge (`_Judge`). The one tree lark resolves to
    may not: `(@time | @weather)` parsed any JSON object as the first alternative, and a valid weather
    call was judged against the time schema (found by a tour); lark's dynamic lexer may end a lazy
    rule later than another reading would. The parse forest holds every reading; a node is good where
    its own judge takes its text and one of its derivations is good, each node judged once, so the
    walk is polynomial in the forest."""
    from lark.parsers.earley_forest import PackedNode, SymbolNode, TokenNode

    good: dict[int, bool] = {}
    root = parser.parse(judge.output)
    stack: list[tuple[object, bool]] = [(root, False)]
    on_stack: set[int] = set()
    steps = 0
    while stack:
        node, expanded = stack.pop()
        steps += 1
        if steps % 4096 == 0:
            _time_left()  # raises past the check's deadline: no verdict, never a hang
        key = id(node)
        if key in good:
            continue
        kids = (
            list(node.children)
            if isinstance(node, SymbolNode)
            else [k for k in (node.left, node.right) if k is not None]
            if isinstance(node, PackedNode)
            else []
        )
        if not kids or expanded:
            on_stack.discard(key)
            kid_good = [good.get(id(k), False) for k in kids]  # a node met again on the way down: a cycle, not good
            if isinstance(node, SymbolNode):
                name = None if node.is_intermediate else getattr(node.s, "name", None)
                ok = any(kid_good) and not (name and judge.rule_errors(str(name), node.start, node.end))
            elif isinstance(node, TokenNode):
                token = node.token
                ok = not judge.token_errors(token.type, token.start_pos, token.end_pos)
            else:
                ok = all(kid_good) if isinstance(node, PackedNode) else True
            good[key] = ok
            continue
        on_stack.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in good and id(k) not in on_stack)
    return good.get(id(root), False)


def _label(rule: str) -> str:
    """How the user wrote the sub-grammar a rule stands for: `@name` or `%json`."""
    if rule.startswith("sginline_json"):
        return f"%json #{int(rule.removeprefix('sginline_json')) + 1}"
    return "@" + rule.removeprefix("sgsub_")
