"""G011: a rule the root reaches that no finite text completes (`root ::= "x" root`: no base case).

Backends compile such a grammar, let the model into the rule and never let it stop: the output runs
to --max-tokens, and xgrammar's jump-forward search grew to 19.6 GB on `root ::= "x" root`. A rule
ends where some way through it reaches only rules that end: a fixpoint over the rules
(`rule_fixpoint`), so a chain of 10,000 rules costs linear time and no stack.
"""

from __future__ import annotations

import operator

from sgcli.dialects.grammar_model import Alt, Chars, Grammar, Node, Ref, Rep, Rule, Seq, rule_fixpoint
from sgcli.errors import offset_to_line_col
from sgcli.lint.diagnostic import Diagnostic, at_offset


def never_ending(grammar: Grammar, known: dict[str, Rule], text: str, path: str) -> list[Diagnostic]:
    """A G011 finding at each rule the root reaches that never ends; `known`: every definition the
    rules may refer to (the file's and what `%import` brings)."""
    defs = grammar.definitions()
    if grammar.root not in defs:
        return []
    ends = rule_fixpoint(list(known), lambda n, read: _can_end(known[n].body, known, read), False, operator.or_)
    out = []
    for name in sorted(grammar.reached(), key=lambda n: defs[n].pos if n in defs else -1):
        rule = defs.get(name)
        if rule is None or ends.get(name, True):
            continue
        what = "the grammar accepts no text at all" if name == grammar.root else "generation that enters it never ends"
        empty = _empty_class(rule.body)
        if empty is not None:
            line, col = offset_to_line_col(text, empty.pos)
            subject = "the regex" if grammar.syntax == "regex" else f"rule `{name}`"
            message = (
                f"{subject} never ends: every way through it needs the character class at {line}:{col}, "
                f"which holds no character: {what}"
            )
            hint = "leave some character in the class (a negated class that leaves out every character holds none)"
        else:
            message = (
                f"rule `{name}` never ends: every way through it reaches a rule that never ends "
                f"(itself, with no alternative that stops): {what}"
            )
            hint = (
                f'give it a base case, an alternative without the recursion (e.g. `{name} ::= "x" {name} | "x"`), '
                "or make the recursion optional"
            )
        out.append(at_offset("G011", text, path, rule.pos, rule.pos + len(name), message, hint=hint))
    return out


def _can_end(node: Node, known: dict[str, Rule], read) -> bool:
    """Whether some finite text matches `node`; what sgcli cannot see into counts as ending."""
    if isinstance(node, Ref):
        return read(node.name) if node.name in known else True
    if isinstance(node, Seq):
        return all(_can_end(i, known, read) for i in node.items)
    if isinstance(node, Alt):
        return any(_can_end(a, known, read) for a in node.alts)
    if isinstance(node, Rep):
        return node.min == 0 or _can_end(node.body, known, read)
    if isinstance(node, Chars):
        return node.holds_text()
    return True  # a literal, an opaque part (`%json`, a special token, a lookaround)


def _empty_class(node: Node) -> Chars | None:
    """The first character class in `node` that holds no character, where every way through needs it."""
    if isinstance(node, Chars):
        return None if node.holds_text() else node
    if isinstance(node, Seq):
        return next(filter(None, (_empty_class(i) for i in node.items)), None)
    if isinstance(node, Alt):
        found = [_empty_class(a) for a in node.alts]
        return found[0] if found and all(found) else None
    if isinstance(node, Rep) and node.min > 0:
        return _empty_class(node.body)
    return None
