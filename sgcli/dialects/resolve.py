"""Names that do not resolve: what makes a grammar unusable on every backend (G001, G003, G007).

One implementation, read by lint (as diagnostics, `lint/structure.py`) and by the converter (as a
refusal, `dialects/convert.py`), so the two can never disagree about what a grammar defines.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from sgcli.dialects.grammar_model import Grammar, Rule, refs


@dataclass(frozen=True)
class Unresolved:
    code: str  # the lint rule: G001 undefined, G003 duplicate, G007 missing root
    start: int  # offset into the grammar text
    end: int | None
    message: str
    hint: str


SUGGESTIONS = 20  # undefined names given a did-you-mean (each compares against every rule: bounded)


def undefined(grammar: Grammar) -> list[Unresolved]:
    defs = grammar.definitions()
    known = set(defs) | grammar.external
    names = sorted(defs)
    bodies = [rule.body for rule in grammar.rules] + list(grammar.ignores)
    out = []
    for body in bodies:
        for ref in refs(body):
            if ref.name not in known:
                close = difflib.get_close_matches(ref.name, names, n=1) if len(out) < SUGGESTIONS else []
                hint = f"did you mean `{close[0]}`?" if close else f"define `{ref.name}`"
                message = f"`{ref.name}` is used but never defined"
                out.append(Unresolved("G001", ref.pos, ref.pos + len(ref.name), message, hint))
    return out


def duplicates(grammar: Grammar, text: str) -> list[Unresolved]:
    out = []
    first: dict[str, Rule] = {}
    for rule in grammar.rules:
        if rule.name in first:
            line = text.count("\n", 0, first[rule.name].pos) + 1
            out.append(
                Unresolved(
                    "G003",
                    rule.pos,
                    rule.pos + len(rule.name),
                    f"`{rule.name}` is defined again (first defined on line {line})",
                    "merge the definitions into one rule with alternatives",
                )
            )
        else:
            first[rule.name] = rule
    return out


def missing_root(grammar: Grammar) -> list[Unresolved]:
    if grammar.root in grammar.definitions() or grammar.root in grammar.external:
        return []
    return [
        Unresolved(
            "G007", 0, None, f"there is no `{grammar.root}` rule to start from", f"name the top rule `{grammar.root}`"
        )
    ]


def unresolved(grammar: Grammar, text: str) -> list[Unresolved]:
    """Every G001, G003 and G007 finding, in text order."""
    return sorted(undefined(grammar) + duplicates(grammar, text) + missing_root(grammar), key=lambda u: u.start)
