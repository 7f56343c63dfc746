"""Which lexemes a lexer may have to choose between at one place of a grammar.

A Lark print of a character-level grammar (GBNF, a regex) makes each literal and each character
class a lexeme, and llguidance lexes greedily among the lexemes its parser allows at a place: a
literal that another allowed lexeme could end inside is one it cannot stop in, so the converter
prints such a literal a character at a time. Which lexemes are allowed together is a question of
place: after a given lexeme the parser allows a subset of what may follow it anywhere, and at the
start a subset of what may begin the root. These sets (FIRST of the root, FOLLOW of each lexeme,
computed over the grammar model as for an LL(1) table) over-approximate every set the parser can
allow, so a literal with no prefix-matching rival in any of them can be printed whole.
"""

from __future__ import annotations

from sgcli.dialects.grammar_model import Alt, Chars, Grammar, Lit, Node, Opaque, Ref, Rep, Seq, rule_fixpoint, walk

_NOTHING: frozenset = frozenset()


def lexeme_key(node: Node):
    """What makes two occurrences the same lexeme: a literal's text, a class's characters."""
    if isinstance(node, Lit):
        return ("lit", node.text)
    return ("chars", tuple(node.ranges), node.negated)


def rival_sets(grammar: Grammar) -> list[frozenset] | None:
    """Every set of lexeme keys the parser may allow at one place (FIRST of the root, FOLLOW of each
    lexeme); None where the grammar holds something these sets cannot account for (an opaque node:
    a special token, a lookaround), so that the caller stays with its place-blind rule."""
    defs = grammar.definitions()
    bodies = [rule.body for rule in defs.values()]
    if any(isinstance(n, Opaque) for body in bodies for n in walk(body)):
        return None
    summary = rule_fixpoint(
        defs, lambda name, read: _summary(defs[name].body, read, {}), (False, _NOTHING), merge=_merged
    )
    info: dict[int, tuple[bool, frozenset]] = {}
    for body in bodies:
        _summary(body, lambda name: summary.get(name, (False, _NOTHING)), info)
    follow: dict[object, set] = {}
    rule_follow: dict[str, set] = {name: set() for name in defs}
    ends_in: list[tuple[object, str]] = []  # (lexeme key, rule): the lexeme can end that rule
    rule_ends_in: list[tuple[str, str]] = []  # (rule a, rule b): a can end b, so FOLLOW(b) is in FOLLOW(a)
    for name, rule in defs.items():
        _place(rule.body, name, info, follow, rule_follow, ends_in, rule_ends_in)
    ended_by: dict[str, list[str]] = {}  # FOLLOW of a rule that ends another takes that one's
    for inner, outer in rule_ends_in:
        ended_by.setdefault(outer, []).append(inner)
    work = list(ended_by)
    while work:  # a worklist: a chain of 10,000 rules costs one pass, not one per link
        outer = work.pop()
        for inner in ended_by[outer]:
            if not rule_follow[outer] <= rule_follow[inner]:
                rule_follow[inner] |= rule_follow[outer]
                if inner in ended_by:
                    work.append(inner)
    for key, name in ends_in:
        follow.setdefault(key, set()).update(rule_follow[name])
    root = defs.get(grammar.root)
    starts = info[id(root.body)][1] if root is not None else _NOTHING
    return [starts, *(frozenset(s) for s in follow.values())]


def _merged(old, new):
    return (old[0] or new[0], old[1] | new[1])


def _summary(body: Node, read, info: dict) -> tuple[bool, frozenset]:
    """(nullable, FIRST lexeme keys) of `body`, with every node's own pair stored in `info` by id;
    post-order over an explicit stack, so no nesting exhausts Python's."""
    stack = [(body, False)]
    while stack:
        node, done = stack.pop()
        kids = _children(node)
        if not done and kids:
            stack.append((node, True))
            stack.extend((kid, False) for kid in kids)
            continue
        if isinstance(node, Lit):
            value = (True, _NOTHING) if not node.text else (False, frozenset([lexeme_key(node)]))
        elif isinstance(node, Chars):
            value = (False, frozenset([lexeme_key(node)]))
        elif isinstance(node, Ref):
            value = read(node.name)
        elif isinstance(node, Seq):
            nullable, first = True, set()
            for item in node.items:
                item_nullable, item_first = info[id(item)]
                first |= item_first
                if not item_nullable:
                    nullable = False
                    break
            value = (nullable, frozenset(first))
        elif isinstance(node, Alt):
            pairs = [info[id(alt)] for alt in node.alts]
            value = (any(p[0] for p in pairs), frozenset().union(*(p[1] for p in pairs)))
        elif isinstance(node, Rep):
            nullable, first = info[id(node.body)]
            value = (nullable or node.min == 0, first)
        else:
            value = (True, _NOTHING)
        info[id(node)] = value
    return info[id(body)]


def _children(node: Node) -> list[Node]:
    if isinstance(node, Seq):
        return node.items
    if isinstance(node, Alt):
        return node.alts
    if isinstance(node, Rep):
        return [node.body]
    return []


def _place(body, rule, info, follow, rule_follow, ends_in, rule_ends_in) -> None:
    """Record, for each lexeme and rule reference in `body`, the lexemes that may come right after it
    inside the rule, and whether the rule's end may come right after it."""
    stack = [(body, _NOTHING, True)]  # (node, FIRST of what follows it in the rule, whether the end may)
    while stack:
        node, after, at_end = stack.pop()
        if isinstance(node, (Lit, Chars)):
            if isinstance(node, Chars) or node.text:
                key = lexeme_key(node)
                follow.setdefault(key, set()).update(after)
                if at_end:
                    ends_in.append((key, rule))
        elif isinstance(node, Ref):
            if node.name in rule_follow:
                rule_follow[node.name].update(after)
                if at_end:
                    rule_ends_in.append((node.name, rule))
        elif isinstance(node, Seq):
            for item in reversed(node.items):
                stack.append((item, after, at_end))
                item_nullable, item_first = info[id(item)]
                after = item_first if not item_nullable else after | item_first
                at_end = at_end and item_nullable
        elif isinstance(node, Alt):
            stack.extend((alt, after, at_end) for alt in node.alts)
        elif isinstance(node, Rep):
            again = node.max is None or node.max > 1
            stack.append((node.body, after | info[id(node.body)][1] if again else after, at_end))


def rivals_inside(sets: list[frozenset]) -> set[str]:
    """The texts of the multi-character literals that share a set with a lexeme matching a proper
    prefix of them: another literal, or a class holding their first character."""
    out: set[str] = set()
    for rivals in sets:
        texts = {key[1] for key in rivals if key[0] == "lit"}
        classes = [Chars(0, list(key[1]), key[2]) for key in rivals if key[0] == "chars"]
        for text in texts:
            if len(text) > 1 and text not in out:
                if any(text[:k] in texts for k in range(1, len(text))) or any(
                    c.contains(ord(text[0])) for c in classes
                ):
                    out.add(text)
    return out
