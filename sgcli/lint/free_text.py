"""G008: free text without a bound, followed by grammar the output still needs (and G010's test of a
token budget's rule).

`/.+/`, `/[^\n]+/` or `.*` match any text, so only the model decides when the free part
ends; a small model often never writes the delimiter, and the run ends at --max-tokens
with the required rest (an answer, a JSON object) missing. A bound makes the backend
force the rest: llguidance's and xgrammar's Lark rule attribute `name[max_tokens=N]: ...`,
or a bounded repetition (`{0,N}`, `~ 0..N`). Free text at the very end is not flagged:
the model may stop there.
"""

from __future__ import annotations

import re

from sgcli.dialects.grammar_model import Alt, Chars, Node, Ref, Rep, Seq, rule_fixpoint, walk
from sgcli.errors import offset_to_line_col
from sgcli.lint.diagnostic import short

# Excluding only these from "any character" still leaves free text (`.`, `[^\n]`, `[^\r\n]`).
_LINE_CHARS = {0, 9, 10, 13}
# A positive class holding all of these reads as "any text" too (`[\s\S]`, `[ -~]`).
_TEXT_SAMPLE = [ord(c) for c in "aZ0 .,'"]


def cut_anywhere(body: Node) -> bool:
    """G010: whether every non-empty prefix of what `body` matches is matched too: a repetition of one
    character set from at most one (`/[^\\n]+/`). A token budget cut anywhere else leaves a prefix."""
    return isinstance(body, Rep) and isinstance(body.body, Chars) and body.min <= 1


def is_free_text(node: Node) -> bool:
    """An unbounded repetition of (nearly) any character."""
    if not isinstance(node, Rep) or node.max is not None or not isinstance(node.body, Chars):
        return False
    chars = node.body
    if chars.negated:
        return sum(hi - lo + 1 for lo, hi in chars.ranges) <= len(_LINE_CHARS) and all(
            cp in _LINE_CHARS for lo, hi in chars.ranges for cp in range(lo, hi + 1)
        )
    return all(chars.contains(cp) for cp in _TEXT_SAMPLE)


def quoted_follower(text: str, rep: Rep, after: Node) -> str:
    """The element that must follow, quoted as written, with its line:col when it stands on another
    line (another rule, where the free text's terminal is used)."""
    start, end = after.span or (after.pos, after.pos + len(text[after.pos :].split("\n", 1)[0]))
    shown = short(text[start:end], 30)
    quoted = f"`` {shown} ``" if "`" in shown else f"`{shown}`"  # Markdown's quoting of a backtick
    line, col = offset_to_line_col(text, start)
    return quoted if line == offset_to_line_col(text, rep.pos)[0] else f"{quoted} (at {line}:{col})"


def bounded_by_attribute(rule) -> bool:
    """llguidance / xgrammar Lark: `name[max_tokens=N]: ...` caps the rule's tokens."""
    return "max_tokens" in rule.attributes


class FreeText:
    """Finds free-text repetitions that can end where required grammar still follows."""

    def __init__(self, structure):
        self.s = structure
        defs = structure.defs
        # per rule, a free-text repetition that can end it: a fixpoint, not a walk from rule to rule
        self._tails = rule_fixpoint(
            list(defs),
            lambda name, read: None if bounded_by_attribute(defs[name]) else self._tail(defs[name].body, read),
            None,
            lambda old, new: old if old is not None else new,
        )

    def tail(self, node: Node) -> Rep | None:
        """A free-text repetition that can be the last thing `node` matches, if any."""
        return self._tail(node, self._tails.__getitem__)

    def _tail(self, node: Node, read) -> Rep | None:
        if is_free_text(node):
            return node
        if isinstance(node, Rep):
            return self._tail(node.body, read)
        if isinstance(node, Alt):
            return next((r for r in (self._tail(a, read) for a in node.alts) if r is not None), None)
        if isinstance(node, Seq):
            for item in reversed(node.items):
                found = self._tail(item, read)
                if found is not None or self.s.nullable(item) is not True:
                    return found
            return None
        if isinstance(node, Ref):
            rule = self.s.defs.get(node.name)
            if rule is None or bounded_by_attribute(rule):
                return None
            return read(node.name)
        return None

    def findings(self) -> list[tuple[Rep, Node]]:
        """(free-text repetition, the required element after it), each repetition once."""
        out: dict[int, tuple[Rep, Node]] = {}
        for rule in self.s.defs.values():
            if bounded_by_attribute(rule):
                continue
            for node in walk(rule.body):
                if not isinstance(node, Seq):
                    continue
                for i, item in enumerate(node.items[:-1]):
                    after = next((n for n in node.items[i + 1 :] if self.s.nullable(n) is False), None)
                    found = self.tail(item) if after is not None else None
                    if found is not None:
                        out.setdefault(id(found), (found, after))
        return sorted(out.values(), key=lambda pair: pair[0].pos)


def budget_problem(rule) -> tuple[str, str] | None:
    """G010's (message, hint) for a Lark rule's token budget `name[max_tokens=N]`: none at all (N = 0), or
    one a cut can leave unfinished (`cut_anywhere`); None where the budget is sound or absent."""
    attributes = rule.attributes or ""
    if "max_tokens" not in attributes:
        return None
    budget = re.search(r"max_tokens\s*=\s*(\d+)", attributes)
    if budget is not None and int(budget.group(1)) == 0:
        return (
            f"`{rule.name}[{attributes}]` allows no token: xgrammar refuses it, and llguidance ends "
            f"`{rule.name}` before its first character, where it matches nothing, whatever it needs",
            "give it a budget of at least 1 token, or drop the attribute",
        )
    if cut_anywhere(rule.body):
        return None
    return (
        f"`{rule.name}[{attributes}]` ends `{rule.name}` after that many tokens wherever it stands "
        f"(llguidance and xgrammar), so the output can end in text `{rule.name}` does not match",
        "use it only on a repetition of one character set (`/[^\\n]+/`), or bound the text itself with `{m,n}`",
    )
