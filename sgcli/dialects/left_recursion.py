"""Direct left recursion rewritten as repetition, for a GBNF print.

Lark grammars use left recursion as their idiom for lists and left-associative operators
(`?sum: sum "+" product | product`); llama.cpp's GBNF parser refuses any rule that reaches itself
without consuming input (lint G004), and `convert --to gbnf` printed such rules as they stood. A rule
`A: A a1 | A a2 | b1 | b2` matches exactly `(b1 | b2) (a1 | a2)*`, which every GBNF reader takes.
Left recursion through other rules is left as it is (the conversion's check names it).
"""

from __future__ import annotations

from sgcli.dialects.grammar_model import Alt, Grammar, Node, Ref, Rep, Seq


def unfold_direct(grammar: Grammar) -> list[str]:
    """Rewrite every rule whose alternatives start with the rule itself; returns the names rewritten."""
    done = []
    for rule in grammar.rules:
        alternatives = rule.body.alts if isinstance(rule.body, Alt) else [rule.body]
        tails, bases = [], []
        for alt in alternatives:
            tail = _after_self(alt, rule.name)
            if tail is None:
                bases.append(alt)
            elif tail is not _NOTHING:  # `A: A` alone matches nothing more: dropped
                tails.append(tail)
        if not tails or not bases:  # no left recursion, or no way out of it (G011 says so)
            continue
        pos = rule.body.pos
        base = bases[0] if len(bases) == 1 else Alt(pos, bases)
        tail = tails[0] if len(tails) == 1 else Alt(pos, tails)
        rule.body = Seq(pos, [base, Rep(pos, tail, 0, None)])
        done.append(rule.name)
    return done


_NOTHING = Seq(0, [])


def _after_self(alt: Node, name: str) -> Node | None:
    """What follows `name` at the start of `alt` (`_NOTHING` where nothing does), or None where `alt` does
    not start with it."""
    items = alt.items if isinstance(alt, Seq) else [alt]
    if not items or not isinstance(items[0], Ref) or items[0].name != name or items[0].args:
        return None
    rest = items[1:]
    if not rest:
        return _NOTHING
    return rest[0] if len(rest) == 1 else Seq(rest[0].pos, rest)
