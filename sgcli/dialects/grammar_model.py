"""One small grammar model that the GBNF, Lark and regex readers all produce.

The structure rules (undefined, unused, left-recursive, nullable root, nested or
whitespace-only unbounded repetition) and the shortest-sentence computation work on
this model, so each rule is written once for every grammar syntax. Every node keeps
the character offset where it starts in the file, which becomes the diagnostic's
line:col.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_CODE_POINT = 0x10FFFF


@dataclass
class Node:
    pos: int  # character offset in the file text
    # [start, end) of the element's source, operators included, where a reader set it (a sequence's items)
    span: tuple[int, int] | None = field(default=None, kw_only=True, compare=False, repr=False)


@dataclass
class Lit(Node):
    """A literal string ("abc"); the empty string is allowed."""

    text: str


_SCALARS = 0x110000 - 0x800  # Unicode's code points less the surrogates


@dataclass
class Chars(Node):
    """A set of characters: [a-z0-9], [^"], `.` (negated and empty) or \\d, \\s in regexes."""

    ranges: list[tuple[int, int]]  # inclusive code point ranges
    negated: bool = False

    def contains(self, cp: int) -> bool:
        inside = any(lo <= cp <= hi for lo, hi in self.ranges)
        return inside != self.negated

    def holds_text(self) -> bool:
        """Whether some character of text (a Unicode scalar value: no surrogate, which UTF-8 cannot
        write) is in the set: `[^\x00-\U0010ffff]` and `[\ud800-\udfff]` hold none."""
        covered, last = 0, -1
        for lo, hi in sorted(self.ranges):
            lo, hi = max(lo, last + 1), min(hi, 0x10FFFF)
            if lo > hi:
                continue
            covered += hi - lo + 1 - max(0, min(hi, 0xDFFF) - max(lo, 0xD800) + 1)
            last = hi
        return covered < _SCALARS if self.negated else covered > 0

    def members(self, limit: int = 0x110000) -> list[int] | None:
        """The code points, when the set is small and not negated; None otherwise."""
        if self.negated:
            return None
        total = sum(hi - lo + 1 for lo, hi in self.ranges)
        if total > limit:
            return None
        return [cp for lo, hi in self.ranges for cp in range(lo, hi + 1)]


@dataclass
class Ref(Node):
    """A reference to a rule or terminal by name; a use of a Lark template (`_sep{WORD, ","}`) has its
    arguments (None where the reader could not read them)."""

    name: str
    args: list[Node] | None = field(default=None, kw_only=True)


@dataclass
class Seq(Node):
    items: list[Node]


@dataclass
class Alt(Node):
    alts: list[Node]


@dataclass
class Rep(Node):
    """body{min,max}; max None = unbounded (`*`, `+`, `{n,}`)."""

    body: Node
    min: int
    max: int | None
    op_pos: int = -1  # offset of the operator (`*`, `{`)
    end: int = -1  # offset just past the operator
    lark: bool = False  # written in Lark syntax (bounds are `~ n..m`), not GBNF/regex (`{n,m}`)


_OPERATORS = {"*": (0, None), "+": (1, None), "?": (0, 1)}


MAX_COUNT = 1_000_000  # the largest repetition count read: more than any grammar needs, far below 2**32
MAX_STACKED = 100  # repetition operators on one element (`x???...`): each one nests the model a level


def stacked_error(pos: int) -> ParseError:
    return ParseError(f"more than {MAX_STACKED} repetition operators on one element", pos)


def repetition(text: str, pos: int, braces) -> tuple[int, int | None, int] | None:
    """The repetition operator at `pos` as (min, max or None for unbounded, offset past it): `*`, `+`,
    `?`, or braces that the dialect's `braces` pattern matches with groups (min, comma, max), where
    an empty (or xgrammar's -1) max after the comma is unbounded. None when there is none."""
    ch = text[pos : pos + 1]
    if ch and ch in _OPERATORS:
        return (*_OPERATORS[ch], pos + 1)
    m = braces.match(text, pos) if ch == "{" else None
    if not m or not (m.group(1) or m.group(3)):
        return None
    lo = int(m.group(1) or 0)
    hi = None if (m.group(2) and m.group(3) in ("", "-1")) else int(m.group(3) or m.group(1))
    if hi is not None and hi < lo:
        raise ParseError(f"repetition {{{lo},{hi}}} has its maximum below its minimum", pos)
    if max(lo, hi or 0) > MAX_COUNT:
        raise NotReadAsWritten(
            f"repetition count {max(lo, hi or 0):,} is more than {MAX_COUNT:,}: past 2**32 xgrammar wraps it "
            "around (a{4294967297} meant a{1}) and Python's re, llguidance and outlines-core refuse it",
            pos,
        )
    return lo, hi, m.end()


@dataclass
class Opaque(Node):
    """Something the structure rules cannot look into: `%json {...}`, `@sub`, a special
    token `<|x|>`, a lookaround or backreference in a regex, llguidance's `~`/`&`.
    `nullable` None means unknown (analyses then stay silent rather than guess)."""

    what: str
    nullable: bool | None = False
    sample: str | None = None  # a short string it matches, where known
    children: list[Node] = field(default_factory=list)  # e.g. a lookahead's body (for references)


@dataclass
class Rule:
    name: str
    body: Node
    pos: int  # offset of the rule name in its definition
    terminal: bool = False  # Lark terminals (UPPERCASE) are lexemes, not parser rules
    attributes: str = ""  # llguidance Lark `name[lazy, max_tokens=N]:`, the text inside the brackets
    params: tuple[str, ...] = ()  # a Lark template's parameters: `_sep{x, sep}: x (sep x)*`


@dataclass
class Grammar:
    """Rules in file order (duplicates kept, for the duplicate-definition rule)."""

    syntax: str  # "gbnf" | "lark" | "regex"
    root: str
    rules: list[Rule] = field(default_factory=list)
    ignores: list[Node] = field(default_factory=list)  # Lark %ignore
    external: set[str] = field(default_factory=set)  # names defined elsewhere (%import, %declare)
    imports: dict[str, str] = field(default_factory=dict)  # Lark: local name -> what it imports ("common.WS")
    regex_features: list = field(default_factory=list)  # RegexFeature found in regex literals
    regex_spans: list[tuple[int, int]] = field(default_factory=list)  # where each regex literal's body is
    unread_regexes: list = field(default_factory=list)  # Lark: the ParseError of each regex sgcli cannot read
    empty_alternatives: list[int] = field(default_factory=list)  # GBNF: just past the `::=`, `|` or `(` before one
    # GBNF: where a rule's body goes on after a newline outside parentheses (llama.cpp ends the rule there)
    continuations: list[int] = field(default_factory=list)
    priority_spans: list[tuple[int, int]] = field(default_factory=list)  # Lark: each `.N` after a name
    string_spans: list[tuple[int, int]] = field(default_factory=list)  # Lark: each "..." literal, quotes included
    options: dict = field(default_factory=dict)  # llguidance's `%llguidance {...}` options, merged

    def definitions(self) -> dict[str, Rule]:
        """First definition of each name."""
        out: dict[str, Rule] = {}
        for rule in self.rules:
            out.setdefault(rule.name, rule)
        return out

    def reached(self) -> set[str]:
        """The defined names the root reaches (with what %ignore refers to); empty without a root rule."""
        defs = self.definitions()
        if self.root not in defs:
            return set()
        reached = {self.root}
        stack = [defs[self.root].body, *self.ignores]
        while stack:
            for ref in refs(stack.pop()):
                if ref.name not in reached and ref.name in defs:
                    reached.add(ref.name)
                    stack.append(defs[ref.name].body)
        return reached


def walk(node: Node):
    """Every node under `node`, itself first, in source order; iterative, so no nesting exhausts the stack."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, Seq):
            stack.extend(reversed(current.items))
        elif isinstance(current, Alt):
            stack.extend(reversed(current.alts))
        elif isinstance(current, Rep):
            stack.append(current.body)
        elif isinstance(current, Opaque):
            stack.extend(reversed(current.children))
        elif isinstance(current, Ref) and current.args:  # a template's arguments are referenced too
            stack.extend(reversed(current.args))


def refs(node: Node) -> list[Ref]:
    return [n for n in walk(node) if isinstance(n, Ref)]


def rule_fixpoint(keys, evaluate, start, merge=None) -> dict:
    """A value per rule (or per key) as the fixpoint of `evaluate(key, read)`, where `read(other)`
    gives another key's current value. Worklist-driven: a key is evaluated again only when one it
    read has changed, and nothing recurses from rule to rule, so a chain of 10,000 rules costs
    linear time and constant stack. `merge(old, new)` keeps values moving one way (monotone), which
    is what makes it end; `evaluate` sees unknown keys through `read` as `start`."""
    keys = list(dict.fromkeys(keys))
    values = dict.fromkeys(keys, start)
    readers: dict[object, set] = {}
    work, queued = list(reversed(keys)), set(keys)
    while work:
        key = work.pop()
        queued.discard(key)

        def read(other, _key=key):
            readers.setdefault(other, set()).add(_key)
            return values.get(other, start)

        new = evaluate(key, read)
        if merge is not None:
            new = merge(values[key], new)
        if new is not values[key] and new != values[key]:
            values[key] = new
            for waiting in readers.get(key, ()):
                if waiting not in queued:
                    queued.add(waiting)
                    work.append(waiting)
    return values


def shortest_cycle(start: str, edges: dict[str, list[Ref]], members: set[str]) -> list[str] | None:
    """The shortest path along `edges` from `start` back to itself, as rule names (within `members`)."""
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for name in frontier:
            for ref in edges[name]:
                if ref.name == start:
                    path = [name]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return list(reversed(path))
                if ref.name not in parents and ref.name in members:
                    parents[ref.name] = name
                    nxt.append(ref.name)
        frontier = nxt
    return None


def components(names, edges) -> list[list[str]]:
    """Strongly connected components of the graph `name -> edges(name)` (Tarjan's, iterative), each
    in the order of `names`; a rule is recursive when its component has two rules or it reaches itself."""
    order = {name: i for i, name in enumerate(names)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    for root in names:
        if root in index:
            continue
        work = [(root, iter(edges(root)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            name, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in order:
                    continue
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges(child))))
                elif child in on_stack:
                    low[name] = min(low[name], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[name])
            if low[name] == index[name]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == name:
                        break
                out.append(sorted(component, key=order.__getitem__))
    return sorted(out, key=lambda c: order[c[0]])


class ParseError(Exception):
    """sgcli's own reader could not follow the file here (offset into the text)."""

    def __init__(self, message: str, pos: int, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.pos = pos
        self.hint = hint


class NotReadAsWritten(ParseError):
    """A spelling no backend reads as written (a repetition count past MAX_COUNT, an escape past U+10FFFF):
    refused at its place, not guessed at (xgrammar wrapped such a count around; Python's re raised)."""
