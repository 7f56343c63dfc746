"""The G rules and W001: mistakes visible in a grammar's structure, no backend needed."""

from __future__ import annotations

import operator

from sgcli.dialects import resolve
from sgcli.dialects.grammar_model import (
    Alt,
    Chars,
    Grammar,
    Lit,
    Node,
    Opaque,
    Ref,
    Rep,
    Rule,
    Seq,
    components,
    refs,
    rule_fixpoint,
    shortest_cycle,
    walk,
)
from sgcli.dialects.lark_common import imported_definitions
from sgcli.lint.diagnostic import Diagnostic, at_offset, short
from sgcli.lint.free_text import FreeText, budget_problem, quoted_follower
from sgcli.lint.never_ending import never_ending

_RANK = {False: 0, None: 1, True: 2}  # nullable: no < unknown < yes


def _all(values) -> bool | None:
    values = list(values)
    if any(v is False for v in values):
        return False
    return True if all(v is True for v in values) else None


def _any(values) -> bool | None:
    values = list(values)
    if any(v is True for v in values):
        return True
    return False if all(v is False for v in values) else None


_WS_RANK = {"empty": 0, "ws": 1, "other": 2}


def _higher_nullable(old, new):
    return new if _RANK[new] > _RANK[old] else old


def _lower_ws(old, new):
    return new if _WS_RANK[new] < _WS_RANK[old] else old


def _higher_ws(old, new):
    return new if _WS_RANK[new] > _WS_RANK[old] else old


class Structure:
    """Facts about one grammar (nullable rules, definitions) and the rules built on them.

    Facts about rules are computed once per grammar as fixpoints over the rules
    (`rule_fixpoint`), never by recursing from rule to rule: a chain of 10,000 rules costs
    linear time and no stack. Within one rule body the walks recurse, as deep as its
    groups, which sgcli's readers bound (MAX_DEPTH)."""

    def __init__(self, grammar: Grammar, text: str, path: str):
        self.g = grammar
        self.text = text
        self.path = path
        self.defs = grammar.definitions()
        # the facts look into what `%import common.X` brings too (lark's own definitions): the
        # diagnostics stay on the file's definitions
        self.known = {**imported_definitions(grammar.imports), **self.defs}
        names = list(self.known)
        body = {name: rule.body for name, rule in self.known.items()}
        self._nullable_rules = rule_fixpoint(
            names, lambda n, read: self._nullable(body[n], read), False, _higher_nullable
        )
        # conservative where a rule is still unknown: a loop only if some rule certainly is one,
        # whitespace only if no rule on the way can be anything else (recursion reads as "other")
        self._loops = rule_fixpoint(
            [(n, ctx) for n in names for ctx in (False, True)],
            lambda key, read: self._is_loop(body[key[0]], key[1], read),
            False,
            operator.or_,
        )
        self._ws = rule_fixpoint(names, lambda n, read: self._whitespace(body[n], read), "other", _lower_ws)
        self._unbounded = rule_fixpoint(names, lambda n, read: self._has_unbounded(body[n], read), False, operator.or_)

    # --- facts ------------------------------------------------------------------------

    def nullable(self, node: Node) -> bool | None:
        """Whether `node` matches the empty string: True, False, or None (unknown)."""
        return self._nullable(node, self._nullable_rules.__getitem__)

    def _nullable(self, node: Node, read) -> bool | None:
        if isinstance(node, Lit):
            return node.text == ""
        if isinstance(node, Chars):
            return False
        if isinstance(node, Ref):
            if node.name in self.known:
                return read(node.name)
            return None if node.name in self.g.external else False
        if isinstance(node, Seq):
            return _all(self._nullable(i, read) for i in node.items)
        if isinstance(node, Alt):
            return _any(self._nullable(a, read) for a in node.alts)
        if isinstance(node, Rep):
            return True if node.min == 0 else self._nullable(node.body, read)
        if isinstance(node, Opaque):
            return node.nullable
        return None

    def _follows(self, ref: Ref, terminal_ctx: bool) -> Rule | None:
        """The rule a reference leads to, for analyses that look through references. In Lark a
        parser rule sees a terminal as one lexeme, so analyses stop there."""
        rule = self.known.get(ref.name)
        if rule is None or (self.g.syntax == "lark" and rule.terminal and not terminal_ctx):
            return None
        return rule

    def is_loop(self, node: Node, terminal_ctx: bool) -> bool:
        """`node` is, up to optional parts around it, an unbounded repetition."""
        return self._is_loop(node, terminal_ctx, self._loops.__getitem__)

    def _is_loop(self, node: Node, terminal_ctx: bool, read) -> bool:
        if isinstance(node, Rep):
            return node.max is None and self.nullable(node.body) is not True
        if isinstance(node, Seq):
            required = [i for i in node.items if self.nullable(i) is not True]
            if len(required) > 1:
                return False
            candidates = required or node.items
            return any(self._is_loop(i, terminal_ctx, read) for i in candidates)
        if isinstance(node, Alt):
            return any(self._is_loop(a, terminal_ctx, read) for a in node.alts)
        if isinstance(node, Ref):
            rule = self._follows(node, terminal_ctx)
            return rule is not None and read((node.name, terminal_ctx or rule.terminal))
        return False

    def whitespace_kind(self, node: Node) -> str:
        """ "ws" if every non-empty string `node` matches is whitespace, "empty" if it matches
        only the empty string, else "other"."""
        return self._whitespace(node, self._ws.__getitem__)

    def _whitespace(self, node: Node, read) -> str:
        if isinstance(node, Lit):
            return "empty" if node.text == "" else ("ws" if node.text.isspace() else "other")
        if isinstance(node, Chars):
            members = node.members(limit=5000)
            return "ws" if members and all(chr(c).isspace() for c in members) else "other"
        if isinstance(node, (Seq, Alt)):
            kinds = {self._whitespace(n, read) for n in (node.items if isinstance(node, Seq) else node.alts)}
            return "other" if "other" in kinds else ("ws" if "ws" in kinds else "empty")
        if isinstance(node, Rep):
            return "empty" if node.max == 0 else self._whitespace(node.body, read)
        if isinstance(node, Ref):
            return read(node.name) if node.name in self.known else "other"
        if isinstance(node, Opaque) and node.nullable is True and node.sample == "":
            return "empty"
        return "other"

    def has_unbounded(self, node: Node) -> bool:
        return self._has_unbounded(node, self._unbounded.__getitem__)

    def _has_unbounded(self, node: Node, read) -> bool:
        for n in walk(node):
            if isinstance(n, Rep) and n.max is None:
                return True
            if isinstance(n, Ref) and n.name in self.known and read(n.name):
                return True
        return False

    def _references(self) -> dict[str, list[str]]:
        return {name: [r.name for r in refs(rule.body) if r.name in self.defs] for name, rule in self.defs.items()}

    # --- diagnostics --------------------------------------------------------------------

    def _diag(self, code: str, start: int, end: int | None, message: str, hint: str | None = None) -> Diagnostic:
        return at_offset(code, self.text, self.path, start, end, message, hint=hint)

    def _at_name(self, code: str, named: Ref | Rule, message: str, hint: str | None = None) -> Diagnostic:
        """A diagnostic underlining a reference's or a definition's name."""
        return self._diag(code, named.pos, named.pos + len(named.name), message, hint)

    def _bodies(self):
        """(node, in a terminal?) for every rule body and %ignore, duplicates included."""
        for rule in self.g.rules:
            yield rule.body, rule.terminal
        for node in self.g.ignores:
            yield node, True

    def _findings(self, found) -> list[Diagnostic]:
        return [self._diag(u.code, u.start, u.end, u.message, u.hint) for u in found]

    def undefined(self) -> list[Diagnostic]:
        return self._findings(resolve.undefined(self.g))

    def duplicates(self) -> list[Diagnostic]:
        return self._findings(resolve.duplicates(self.g, self.text))

    def missing_root(self) -> list[Diagnostic]:
        return self._findings(resolve.missing_root(self.g))

    def unused(self) -> list[Diagnostic]:
        if self.g.root not in self.defs:
            return []
        reached = self.g.reached()
        return [
            self._at_name(
                "G002",
                r,
                f"`{r.name}` is never used: it cannot be reached from `{self.g.root}`",
                "remove it, or refer to it where it was meant to be used",
            )
            for name, r in self.defs.items()
            if name not in reached
        ]

    def _left_edges(self, node: Node) -> list[Ref]:
        if isinstance(node, Ref):
            return [node]
        if isinstance(node, Seq):
            out = []
            for item in node.items:
                out += self._left_edges(item)
                if self.nullable(item) is not True:
                    break
            return out
        if isinstance(node, Alt):
            return [r for a in node.alts for r in self._left_edges(a)]
        if isinstance(node, Rep) and node.max != 0:
            return self._left_edges(node.body)
        return []

    def continued_rules(self) -> list[Diagnostic]:
        """G009: each line that continues a rule's body outside parentheses (llama.cpp ends the rule above)."""
        return [
            self._diag(
                "G009",
                pos,
                pos + 1,
                "llama.cpp ends the rule at the newline before this and refuses the grammar; xgrammar, "
                "llguidance and sgcli read this line as more of the rule",
                "join the lines, end the line above with `|`, or wrap the rule's body in ( ... )",
            )
            for pos in self.g.continuations
        ]

    def left_recursion(self) -> list[Diagnostic]:
        edges = {
            name: [r for r in self._left_edges(rule.body) if r.name in self.defs] for name, rule in self.defs.items()
        }
        component: dict[str, set[str]] = {}
        for members in components(list(self.defs), lambda n: [r.name for r in edges[n]]):
            if len(members) > 1 or any(r.name == members[0] for r in edges[members[0]]):
                component.update(dict.fromkeys(members, set(members)))
        out, reported = [], set()
        for name in self.defs:  # file order: the first rule of a cycle carries the finding
            if name in reported or name not in component:
                continue
            path = shortest_cycle(name, edges, component[name])
            if path is None:
                continue
            reported.update(path)
            ref = next(r for r in edges[name] if r.name == (path[1] if len(path) > 1 else name))
            shown = path if len(path) <= 8 else [*path[:4], f"… {len(path) - 6} more …", *path[-2:]]
            chain = " → ".join([*shown, name])
            out.append(
                self._at_name(
                    "G004",
                    ref,
                    f"`{name}` is left-recursive ({chain}); llama.cpp's GBNF engine rejects this",
                    'turn the recursion into repetition, e.g. `expr ::= term ("+" term)*`',
                )
            )
        return out

    def never_ending(self) -> list[Diagnostic]:
        """G011 (sgcli/lint/never_ending.py): a rule the root reaches that no finite text completes."""
        return never_ending(self.g, self.known, self.text, self.path)

    def nullable_root(self) -> list[Diagnostic]:
        rule = self.defs.get(self.g.root)
        if rule is None or self.nullable(rule.body) is not True:
            return []
        what = "the regex" if self.g.syntax == "regex" else f"the root rule `{rule.name}`"
        end = len(self.text) if self.g.syntax == "regex" else rule.pos + len(rule.name)
        return [
            self._diag(
                "G005",
                rule.pos,
                end,
                f"{what} accepts the empty string: a model may stop at once with no output",
                "require at least one item (`+` instead of `*`), or remove the empty alternative",
            )
        ]

    def repetitions(self) -> list[Diagnostic]:
        """G006 (nested unbounded repetition) and W001 (unbounded whitespace)."""
        out = []
        for body, terminal in self._bodies():
            for node in walk(body):
                if not isinstance(node, Rep) or node.max is not None:
                    continue
                src = self.text[node.pos : node.end]
                if self.whitespace_kind(node.body) == "ws":
                    out.append(
                        self._diag(
                            "W001",
                            node.pos,
                            node.end,
                            f"`{short(src)}` repeats whitespace without bound: a model can emit "
                            f"whitespace until it runs out of tokens",
                            self._bounded_hint(node),
                        )
                    )
                elif self.is_loop(node.body, terminal):
                    out.append(
                        self._diag(
                            "G006",
                            node.pos,
                            node.end,
                            f"`{short(src)}` repeats something that is itself an unbounded "
                            f"repetition: the same text splits into iterations in exponentially many ways",
                            "repeat once: write `x*` instead of `(x+)*`",
                        )
                    )
        out += self.recursive_whitespace()
        skipped_once = self.g.options.get("skip_repetition") == "once"  # llguidance: no repeats
        for node in [] if skipped_once else self.g.ignores:
            if self.whitespace_kind(node) != "ws":
                continue
            # an imported terminal's own repetition is in lark's common.lark, where no finding can stand
            imported = [r.name for r in refs(node) if r.name not in self.defs and self._unbounded.get(r.name)]
            if imported or not self.has_unbounded(node):
                start = self.text.rfind("%ignore", 0, node.pos)
                what = (
                    f"`{imported[0]}` (imported: {self.g.imports[imported[0]]}) repeats whitespace without bound, "
                    "and `%ignore` lets it stand between any two lexemes"
                    if imported
                    else "`%ignore` lets this whitespace repeat any number of times between lexemes"
                )
                out.append(
                    self._diag(
                        "W001",
                        start,
                        _line_end(self.text, node.pos),
                        what,
                        'make the ignored span bounded and skipped once: %llguidance {"skip_repetition": '
                        '"once"} with %ignore /[ \\t]{1,8}/',
                    )
                )
        return out

    def recursive_whitespace(self) -> list[Diagnostic]:
        """W001 for whitespace made unbounded by recursion, as in `ws ::= ([ \t\n] ws)?`:
        a rule that reaches itself and matches nothing but whitespace (its recursive component's
        least fixpoint, the rules around it as they are), once per component."""
        out = []
        graph = self._references()
        for members in components(list(self.defs), graph.__getitem__):
            first = members[0]
            if (len(members) == 1 and first not in graph[first]) or self._unbounded[first]:
                continue  # not recursive, or W001 at its repetition
            inside = set(members)

            def evaluate(name, read, inside=inside):
                return self._whitespace(self.defs[name].body, lambda o: read(o) if o in inside else self._ws[o])

            kinds = rule_fixpoint(members, evaluate, "empty", _higher_ws)
            name = next((n for n in members if kinds[n] == "ws"), None)
            if name is not None:
                out.append(
                    self._at_name(
                        "W001",
                        self.defs[name],
                        f"`{name}` matches whitespace and repeats itself through recursion, without bound",
                        "allow a bounded amount instead, e.g. `ws ::= [ \\t\\n]{0,20}`",
                    )
                )
        return out

    def _bounded_hint(self, rep: Rep) -> str:
        body = self.text[rep.pos : rep.op_pos].strip()
        hi = rep.min + 20 if rep.min >= 20 else 20
        bounded = f"{body} ~ {rep.min}..{hi}" if rep.lark else f"{body}{{{rep.min},{hi}}}"
        return f"bound it, e.g. `{short(bounded)}`"

    def free_text(self) -> list[Diagnostic]:
        """G008: unbounded free text with required grammar after it (sgcli/lint/free_text.py)."""
        out = []
        for rep, after in FreeText(self).findings():
            src, then = self.text[rep.pos : rep.end], quoted_follower(self.text, rep, after)
            hint = self._bounded_hint(rep)
            if self.g.syntax == "lark":
                hint = f"give it a rule with a token budget, `reason[max_tokens=64]: /{short(src)}/`, or {hint}"
            out.append(
                self._diag(
                    "G008",
                    rep.pos,
                    rep.end,
                    f"`{short(src)}` is free text without a bound, and {then} must follow: a model "
                    f"that never ends the free text runs to --max-tokens and the rest is never written",
                    hint,
                )
            )
        return out

    def token_budgets(self) -> list[Diagnostic]:
        """G010: `name[max_tokens=N]` on a rule that a cut can leave unfinished, or with no token at all."""
        found = ((rule, budget_problem(rule)) for rule in self.g.rules)
        return [self._at_name("G010", rule, *problem) for rule, problem in found if problem is not None]

    def run(self) -> list[Diagnostic]:
        out = self.undefined() + self.duplicates() + self.missing_root() + self.unused()
        if self.g.syntax == "gbnf":
            out += self.left_recursion() + self.continued_rules()
        return (
            out
            + self.never_ending()
            + self.nullable_root()
            + self.repetitions()
            + self.free_text()
            + self.token_budgets()
        )


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end
