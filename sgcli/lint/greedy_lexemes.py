"""G012: a Lark lexeme that can go on with the first character of what must follow it.

llguidance lexes Lark greedily: it ends a lexeme only where the next character cannot continue it.
In `start: NUMBER "."` with `NUMBER: /[0-9]+(\\.[0-9]+)?/` the `.` after `1` is read as more of
NUMBER, never as the `"."` the grammar allows there, so `1.` is refused; `"<a>" TEXT "</a>"` with
`TEXT: /[^\\n]*/` accepts no text at all (TEXT takes the `<`, and only a newline would end it).
xgrammar reads terminals as rules of characters and takes both.

For each lexeme that can end somewhere in a parser rule, the characters that continue it after a
complete match are compared with the first characters of the lexemes that may come right after it
there (FIRST/LAST of the parser rules, a fixpoint). The lexer's state after a text is a set of
positions (Glushkov's automaton: a lexeme's characters and classes, bounded repetitions written
out), so the continuations are read per state of its subset construction: `x: "a" | "ab"` both ends
and goes on after `a`.
"""

from __future__ import annotations

import bisect
import json
import re
from collections import deque
from dataclasses import replace

from sgcli.dialects.grammar_model import MAX_CODE_POINT, Alt, Chars, Lit, Node, Opaque, Ref, Rep, Seq, rule_fixpoint
from sgcli.dialects.shortest import pick_char
from sgcli.lint.diagnostic import Diagnostic, at_offset, short

_MAX_POSITIONS = 4096  # a lexeme's automaton past this many positions is not judged
_UNROLL = 256  # `x{m,n}` is written out while its copies hold at most this many positions
_MAX_INLINE = 64  # terminals defined through terminals, this deep at most
_MAX_STATES = 2048  # nor one whose deterministic automaton has more states
_MAX_FINDINGS = 20

Ranges = tuple[tuple[int, int], ...]  # sorted, disjoint, inclusive code point ranges


class _Unknown(Exception):
    """The lexeme holds something not modelled (a lookaround, a flag, `%json`): not judged."""


def _positive(chars: Chars) -> Ranges:
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(chars.ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    if not chars.negated:
        return tuple(merged)
    out, start = [], 0
    for lo, hi in merged:
        if lo > start:
            out.append((start, lo - 1))
        start = max(start, hi + 1)
    if start <= MAX_CODE_POINT:
        out.append((start, MAX_CODE_POINT))
    return tuple(out)


def _union(parts) -> Ranges:
    return _positive(Chars(0, [r for ranges in parts for r in ranges]))


def _intersect(a: Ranges, b: Ranges) -> Ranges:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def _covers(outer: Ranges, inner: Ranges) -> bool:
    return _intersect(outer, inner) == inner


def _char(ranges: Ranges) -> str:
    return pick_char(Chars(0, list(ranges))) or chr(ranges[0][0])


class _Automaton:
    """A lexeme's position automaton: each position one character set, `follow` its successors."""

    def __init__(self, terminals: dict):
        self.terminals = terminals  # terminal name -> Rule, for terminals written with other terminals
        self.labels: list[Ranges] = []
        self.follow: list[set[int]] = []
        self.depth = 0

    def _position(self, ranges: Ranges) -> int:
        if len(self.labels) >= _MAX_POSITIONS:
            raise _Unknown
        self.labels.append(ranges)
        self.follow.append(set())
        return len(self.labels) - 1

    def build(self, node: Node) -> tuple[bool, set[int], set[int]]:
        """(nullable, first positions, last positions) of `node`, its follow edges added."""
        if isinstance(node, Lit):
            ids = [self._position(((ord(c), ord(c)),)) for c in node.text]
            for a, b in zip(ids, ids[1:]):
                self.follow[a].add(b)
            return (True, set(), set()) if not ids else (False, {ids[0]}, {ids[-1]})
        if isinstance(node, Chars):
            ranges = _positive(node)
            if not ranges:
                raise _Unknown
            p = self._position(ranges)
            return False, {p}, {p}
        if isinstance(node, Seq):
            return self._sequence([(item, False) for item in node.items])
        if isinstance(node, Alt):
            parts = [self.build(alt) for alt in node.alts]
            return any(p[0] for p in parts), set().union(*(p[1] for p in parts)), set().union(*(p[2] for p in parts))
        if isinstance(node, Rep):
            return self._repetition(node)
        if isinstance(node, Ref) and not node.args and node.name in self.terminals and self.depth < _MAX_INLINE:
            self.depth += 1
            try:
                return self.build(self.terminals[node.name].body)
            finally:
                self.depth -= 1
        raise _Unknown

    def _sequence(self, items: list[tuple[Node, bool]]) -> tuple[bool, set[int], set[int]]:
        nullable, first, last = True, set(), set()
        for item, optional in items:
            n, f, la = self.build(item)
            n = n or optional
            for p in last:
                self.follow[p] |= f
            if nullable:
                first |= f
            last = (last | la) if n else la
            nullable = nullable and n
        return nullable, first, last

    def _repetition(self, node: Rep) -> tuple[bool, set[int], set[int]]:
        if node.max == 0:
            return True, set(), set()
        before = len(self.labels)
        nullable, first, last = self.build(node.body)
        size = len(self.labels) - before
        if node.max is not None and node.max > 1 and node.max * size <= _UNROLL:  # written out: exact
            del self.labels[before:], self.follow[before:]  # nothing outside the copy points into it yet
            copies = [(node.body, k >= node.min) for k in range(node.max)]
            return self._sequence(copies)
        if node.max is None or node.max > 1:  # a loop: continuing after any complete copy
            for p in last:
                self.follow[p] |= first
        return nullable or node.min == 0, first, last


class _Lexeme:
    """What greedy lexing needs of one lexeme, read off its deterministic automaton (the sets of
    positions one text can reach: `x: "a" | "ab"` is at the end of `"a"` and inside `"ab"` after `a`):
    the characters it can start with and, per state where it may end, those that continue it there."""

    def __init__(self, node: Node, terminals: dict):
        automaton = _Automaton(terminals)
        nullable, first, last = automaton.build(node)
        self.labels, self.follow = automaton.labels, automaton.follow
        self.first = _union(self.labels[p] for p in first)
        self.nullable = nullable
        start: frozenset[int] = frozenset([-1])  # before any character: its successors are `first`
        self.follow.append(set(first))  # position -1, read as the list's last entry
        self.edges: dict[frozenset, list[tuple[Ranges, frozenset]]] = {}
        self.parent: dict[frozenset, tuple[frozenset, str] | None] = {start: None}
        self.goes_on: dict[frozenset, Ranges] = {}  # accepting state -> what continues the lexeme there
        queue = deque([start])
        while queue:
            state = queue.popleft()
            out = self.edges[state] = self._moves(state)
            if state & last or (state == start and nullable):
                self.goes_on[state] = _union(ranges for ranges, _ in out)
            for ranges, target in out:
                if target not in self.parent:
                    if len(self.parent) >= _MAX_STATES:
                        raise _Unknown
                    self.parent[target] = (state, _char(ranges))
                    queue.append(target)
        self.start = start

    def _moves(self, state: frozenset) -> list[tuple[Ranges, frozenset]]:
        """The state's transitions: the alphabet cut where its successors' classes begin and end."""
        successors = sorted({q for p in state for q in self.follow[p]})
        cuts = sorted({b for q in successors for lo, hi in self.labels[q] for b in (lo, hi + 1)})
        moves: dict[frozenset, list[tuple[int, int]]] = {}
        for lo, next_lo in zip(cuts, cuts[1:]):
            target = frozenset(q for q in successors if _intersect(self.labels[q], ((lo, lo),)))
            if target:
                moves.setdefault(target, []).append((lo, next_lo - 1))
        return [(_union([tuple(r)]), target) for target, r in moves.items()]

    def shortest_to(self, state: frozenset) -> str:
        """The shortest text of the lexeme that reaches `state`."""
        path = []
        while self.parent[state] is not None:
            state, char = self.parent[state]
            path.append(char)
        return "".join(reversed(path))

    def shortest_from(self, char: str) -> str:
        """The shortest complete text of the lexeme that begins with `char`."""
        first = next(target for ranges, target in self.edges[self.start] if _intersect(ranges, ((ord(char),) * 2,)))
        parent: dict[frozenset, tuple[frozenset, str] | None] = {first: None}
        queue, end = deque([first]), first
        while queue:
            end = queue.popleft()
            if end in self.goes_on:
                break
            for ranges, target in self.edges[end]:
                if target not in parent:
                    parent[target] = (end, _char(ranges))
                    queue.append(target)
        path = []
        while parent[end] is not None:
            end, c = parent[end]
            path.append(c)
        return char + "".join(reversed(path))


class _Summaries:
    """FIRST and LAST lexemes (and nullability) of every parser rule and parser-rule node."""

    def __init__(self, structure):
        self.s = structure
        self.spans = sorted(structure.g.regex_spans)
        self.lexemes: dict[tuple, Node] = {}  # key -> the node (or terminal body) that defines it
        self.shown: dict[tuple, str] = {}
        parsers = [name for name, rule in structure.defs.items() if not rule.terminal and not rule.params]
        self.rules = rule_fixpoint(
            parsers, lambda name, read: self._of(structure.defs[name].body, read), (False, frozenset(), frozenset())
        )

    def _inline_regex(self, node: Node) -> bool:
        """Whether `node` was read from a `/regex/` written in a parser rule (one lexeme)."""
        i = bisect.bisect_right(self.spans, (node.pos, float("inf"))) - 1
        return i >= 0 and self.spans[i][0] <= node.pos < self.spans[i][1]

    def key(self, node: Node) -> tuple | None:
        """The lexeme `node` is in a parser rule, or None where it is grammar around lexemes."""
        if isinstance(node, Ref):
            rule = self.s.known.get(node.name)
            if rule is not None and rule.terminal and not node.args:
                key = ("terminal", node.name)
                self.lexemes.setdefault(key, rule.body)
                self.shown.setdefault(key, node.name)
                return key
            return None
        if isinstance(node, Opaque):
            return None
        if isinstance(node, Lit) or self._inline_regex(node):
            if isinstance(node, Lit):
                key = ("lit", node.text)
            else:
                key = ("regex", node.pos)
                start, end = self.spans[bisect.bisect_right(self.spans, (node.pos, float("inf"))) - 1]
                self.shown.setdefault(key, short(self.s.text[start:end], 30))
            self.lexemes.setdefault(key, node)
            return key
        return None

    def of(self, node: Node) -> tuple[bool, frozenset, frozenset]:
        return self._of(node, lambda name: self.rules.get(name, (False, frozenset(), frozenset())))

    def _of(self, node: Node, read) -> tuple[bool, frozenset, frozenset]:
        key = self.key(node)
        if key is not None:
            return (
                (True, frozenset(), frozenset())
                if isinstance(node, Lit) and not node.text
                else (
                    False,
                    frozenset([key]),
                    frozenset([key]),
                )
            )
        if isinstance(node, Ref):
            rule = self.s.defs.get(node.name)
            if rule is None or rule.terminal or rule.params or node.args:
                return False, frozenset(), frozenset()  # unknown: judged as text that ends nothing
            return read(node.name)
        if isinstance(node, Seq):
            nullable, first, last = True, frozenset(), frozenset()
            for item in node.items:
                n, f, la = self._of(item, read)
                if nullable:
                    first |= f
                last = (last | la) if n else la
                nullable = nullable and n
            return nullable, first, last
        if isinstance(node, Alt):
            parts = [self._of(alt, read) for alt in node.alts]
            return (
                any(p[0] for p in parts),
                frozenset().union(*(p[1] for p in parts)),
                frozenset().union(*(p[2] for p in parts)),
            )
        if isinstance(node, Rep):
            n, f, la = self._of(node.body, read)
            return n or node.min == 0, f, la
        if isinstance(node, Opaque):
            return node.nullable is True, frozenset(), frozenset()
        return True, frozenset(), frozenset()


def greedy_lexemes(structure, backends: list[str]) -> list[Diagnostic]:
    """G012 for each lexeme of a Lark grammar that can go on with the first character of a lexeme that
    may follow it, as `backends` (those judging the file that lex greedily) read it."""
    if not backends or structure.g.syntax != "lark":
        return []
    summaries = _Summaries(structure)
    terminals = {name: rule for name, rule in structure.known.items() if rule.terminal}
    judged: dict[tuple, _Lexeme | None] = {}

    def lexeme(key: tuple) -> _Lexeme | None:
        if key not in judged:
            try:
                judged[key] = _Lexeme(summaries.lexemes[key], terminals)
            except (_Unknown, RecursionError):
                judged[key] = None
        return judged[key]

    pairs: dict[tuple, Node] = {}  # (lexeme, follower) -> where the lexeme stands before it

    def meet(before: Node, lasts, firsts) -> None:
        for last in lasts:
            for first in firsts:
                pairs.setdefault((last, first), before)

    for rule in structure.defs.values():
        if rule.terminal or rule.params or _lazy(rule):
            continue
        stack = [rule.body]
        while stack:
            node = stack.pop()
            if summaries.key(node) is not None:
                continue
            if isinstance(node, Seq):
                for i, item in enumerate(node.items[:-1]):
                    firsts: set = set()
                    for after in node.items[i + 1 :]:
                        nullable, first, _ = summaries.of(after)
                        firsts |= first
                        if not nullable:
                            break
                    meet(item, summaries.of(item)[2], firsts)
                stack.extend(node.items)
            elif isinstance(node, Alt):
                stack.extend(node.alts)
            elif isinstance(node, Rep):
                if node.max is None or node.max > 1:  # a lexeme after itself merges: the loop takes fewer turns
                    _, first, last = summaries.of(node.body)
                    meet(node.body, last, first - {key for key in last if key in first})
                stack.append(node.body)
    ignored = [lexeme(key) for key in map(summaries.key, structure.g.ignores) if key is not None]
    separators = [i.first for i in ignored if i is not None]
    first: dict[tuple, Diagnostic] = {}  # one finding a lexeme, at its first place; the other followers named
    others: dict[tuple, list[str]] = {}
    for (before, after), where in sorted(pairs.items(), key=lambda kv: kv[1].pos):
        if before in first:
            if _finding(structure, summaries, lexeme(before), lexeme(after), before, after, where, separators):
                others[before].append(_shown(summaries, after))
            continue
        finding = _finding(structure, summaries, lexeme(before), lexeme(after), before, after, where, separators)
        if finding is not None and len(first) < _MAX_FINDINGS:
            first[before], others[before] = finding, []
    out = []
    for key, finding in first.items():
        more = list(dict.fromkeys(others[key]))
        if more:
            shown = ", ".join(more[:4]) + (f" and {len(more) - 4} more" if len(more) > 4 else "")
            finding = replace(finding, message=f"{finding.message} (the same before {shown})")
        out.append(finding)
    return out


def _lazy(rule) -> bool:
    """llguidance's `name[lazy]: ...`: the rule is one lexeme that ends at the first place its text can end,
    so nothing inside it is lexed greedily (`t[lazy]: /.*/ "END"` ends at the first END)."""
    return "lazy" in re.split(r"[\s,=]+", rule.attributes or "")


def _finding(structure, summaries, lexeme, follower, before, after, where, separators) -> Diagnostic | None:
    """G012 for `before` right before `after`, where its lexeme can go on with a character that begins
    the follower's; None where it cannot, or where `%ignore`d text (`separators`: their first characters)
    can end it there: two words of a language with whitespace between them, as any lexer reads them."""
    if lexeme is None or follower is None or not follower.first:
        return None
    clashes = {p: _intersect(goes_on, follower.first) for p, goes_on in lexeme.goes_on.items()}
    clashes = {p: c for p, c in clashes.items() if c}
    if not clashes or any(not _covers(lexeme.goes_on[p], first) for p in clashes for first in separators):
        return None
    never = all(_covers(goes_on, follower.first) for goes_on in lexeme.goes_on.values())
    p = min(clashes, key=lambda q: (len(lexeme.shortest_to(q)), lexeme.shortest_to(q)))
    prefix, char = lexeme.shortest_to(p), _char(clashes[p])
    name, then = _shown(summaries, before), _shown(summaries, after)
    if never:
        consequence = f" and never ends {name} where {_quoted(char)} follows, so {then} can " + (
            "come right after it only where it is empty;" if lexeme.nullable else "never come right after it;"
        )
    else:
        example = _quoted(prefix + follower.shortest_from(char))
        consequence = (
            f", so {example} cannot be read as {name} then {then}: it reads {_quoted(char)} as more of {name};"
        )
    message = (
        f"{name} can go on with {_quoted(char)}, which begins {then}: llguidance lexes greedily{consequence} "
        "xgrammar reads it as written"
    )
    hint = (
        f"end the text with llguidance's stop attribute (`text[stop={json.dumps(after[1])}]: ...` in place of "
        f"{name} {then}), or keep {_quoted(char)} out of {name}"
        if never and after[0] == "lit"
        else f"keep {_quoted(char)} out of {name} where it can end, or write {name} and {then} as one terminal"
    )
    end = where.span[1] if where.span else None
    return at_offset("G012", structure.text, structure.path, where.pos, end, message, hint=hint)


def _quoted(text: str) -> str:
    """`text` in backticks, control characters escaped as JSON writes them."""
    return "`" + json.dumps(text, ensure_ascii=False)[1:-1] + "`"


def _shown(summaries: _Summaries, key: tuple) -> str:
    if key[0] == "terminal":
        return f"`{key[1]}`"
    if key[0] == "lit":
        return f"`{json.dumps(key[1], ensure_ascii=False)}`"
    return f"`/{summaries.shown[key]}/`"
