"""The G rules and W001: mistakes visible in a grammar's structure, no backend needed."""

from __future__ import annotations

from sgcli.dialects import resolve
from sgcli.dialects.grammar_model import Alt, Chars, Grammar, Lit, Node, Opaque, Ref, Rep, Rule, Seq, refs, walk
from sgcli.lint.diagnostic import Diagnostic, at_offset
from sgcli.lint.free_text import FreeText

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


class Structure:
    """Facts about one grammar (nullable rules, definitions) and the rules built on them."""

    def __init__(self, grammar: Grammar, text: str, path: str):
        self.g = grammar
        self.text = text
        self.path = path
        self.defs = grammar.definitions()
        self._nullable_rules = self._nullable_fixpoint()
        # Per-rule memos; a rule still being computed reads as the conservative answer,
        # which keeps recursive grammars finite and linear.
        self._loop_memo: dict[tuple[str, bool], bool] = {}
        self._ws_memo: dict[str, str] = {}
        self._unbounded_memo: dict[str, bool] = {}

    # --- facts ------------------------------------------------------------------------

    def _nullable_fixpoint(self) -> dict[str, bool | None]:
        values: dict[str, bool | None] = {name: False for name in self.defs}
        self._nullable_rules = values
        changed = True
        while changed:
            changed = False
            for name, rule in self.defs.items():
                v = self.nullable(rule.body)
                if _RANK[v] > _RANK[values[name]]:
                    values[name] = v
                    changed = True
        return values

    def nullable(self, node: Node) -> bool | None:
        """Whether `node` matches the empty string: True, False, or None (unknown)."""
        if isinstance(node, Lit):
            return node.text == ""
        if isinstance(node, Chars):
            return False
        if isinstance(node, Ref):
            if node.name in self.defs:
                return self._nullable_rules.get(node.name, False)
            return None if node.name in self.g.external else False
        if isinstance(node, Seq):
            return _all(self.nullable(i) for i in node.items)
        if isinstance(node, Alt):
            return _any(self.nullable(a) for a in node.alts)
        if isinstance(node, Rep):
            return True if node.min == 0 else self.nullable(node.body)
        if isinstance(node, Opaque):
            return node.nullable
        return None

    def _follows(self, ref: Ref, terminal_ctx: bool) -> Rule | None:
        """The rule a reference leads to, for analyses that look through references. In Lark a
        parser rule sees a terminal as one lexeme, so analyses stop there."""
        rule = self.defs.get(ref.name)
        if rule is None or (self.g.syntax == "lark" and rule.terminal and not terminal_ctx):
            return None
        return rule

    def is_loop(self, node: Node, terminal_ctx: bool) -> bool:
        """`node` is, up to optional parts around it, an unbounded repetition."""
        if isinstance(node, Rep):
            return node.max is None and self.nullable(node.body) is not True
        if isinstance(node, Seq):
            required = [i for i in node.items if self.nullable(i) is not True]
            if len(required) > 1:
                return False
            candidates = required or node.items
            return any(self.is_loop(i, terminal_ctx) for i in candidates)
        if isinstance(node, Alt):
            return any(self.is_loop(a, terminal_ctx) for a in node.alts)
        if isinstance(node, Ref):
            rule = self._follows(node, terminal_ctx)
            if rule is None:
                return False
            key = (node.name, terminal_ctx or rule.terminal)
            if key not in self._loop_memo:
                self._loop_memo[key] = False
                self._loop_memo[key] = self.is_loop(rule.body, key[1])
            return self._loop_memo[key]
        return False

    def whitespace_kind(self, node: Node) -> str:
        """ "ws" if every non-empty string `node` matches is whitespace, "empty" if it matches
        only the empty string, else "other"."""
        if isinstance(node, Lit):
            return "empty" if node.text == "" else ("ws" if node.text.isspace() else "other")
        if isinstance(node, Chars):
            members = node.members(limit=5000)
            return "ws" if members and all(chr(c).isspace() for c in members) else "other"
        if isinstance(node, (Seq, Alt)):
            kinds = {self.whitespace_kind(n) for n in (node.items if isinstance(node, Seq) else node.alts)}
            return "other" if "other" in kinds else ("ws" if "ws" in kinds else "empty")
        if isinstance(node, Rep):
            return "empty" if node.max == 0 else self.whitespace_kind(node.body)
        if isinstance(node, Ref):
            rule = self.defs.get(node.name)
            if rule is None:
                return "other"
            if node.name not in self._ws_memo:
                self._ws_memo[node.name] = "other"
                self._ws_memo[node.name] = self.whitespace_kind(rule.body)
            return self._ws_memo[node.name]
        if isinstance(node, Opaque) and node.nullable is True and node.sample == "":
            return "empty"
        return "other"

    def has_unbounded(self, node: Node) -> bool:
        for n in walk(node):
            if isinstance(n, Rep) and n.max is None:
                return True
            if isinstance(n, Ref) and n.name in self.defs:
                if n.name not in self._unbounded_memo:
                    self._unbounded_memo[n.name] = False
                    self._unbounded_memo[n.name] = self.has_unbounded(self.defs[n.name].body)
                if self._unbounded_memo[n.name]:
                    return True
        return False

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
        reached = {self.g.root}
        stack = [self.defs[self.g.root].body] + list(self.g.ignores)
        while stack:
            for ref in refs(stack.pop()):
                if ref.name not in reached and ref.name in self.defs:
                    reached.add(ref.name)
                    stack.append(self.defs[ref.name].body)
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

    def left_recursion(self) -> list[Diagnostic]:
        edges = {
            name: [r for r in self._left_edges(rule.body) if r.name in self.defs] for name, rule in self.defs.items()
        }
        out, reported = [], set()
        for name in self.defs:  # file order: the first rule of a cycle carries the finding
            if name in reported:
                continue
            path = self._cycle(name, edges)
            if path is None:
                continue
            reported.update(path)
            ref = next(r for r in edges[name] if r.name == (path[1] if len(path) > 1 else name))
            chain = " → ".join(path + [name])
            out.append(
                self._at_name(
                    "G004",
                    ref,
                    f"`{name}` is left-recursive ({chain}); llama.cpp's GBNF engine rejects this",
                    'turn the recursion into repetition, e.g. `expr ::= term ("+" term)*`',
                )
            )
        return out

    @staticmethod
    def _cycle(start: str, edges: dict[str, list[Ref]]) -> list[str] | None:
        """The shortest left-edge path from `start` back to itself, as rule names."""
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
                    if ref.name not in parents:
                        parents[ref.name] = name
                        nxt.append(ref.name)
            frontier = nxt
        return None

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
                            f"`{_short(src)}` repeats whitespace without bound: a model can emit "
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
                            f"`{_short(src)}` repeats something that is itself an unbounded "
                            f"repetition: the same text splits into iterations in exponentially many ways",
                            "repeat once: write `x*` instead of `(x+)*`",
                        )
                    )
        out += self.recursive_whitespace()
        skipped_once = self.g.options.get("skip_repetition") == "once"  # llguidance: no repeats
        for node in [] if skipped_once else self.g.ignores:
            if self.whitespace_kind(node) == "ws" and not self.has_unbounded(node):
                start = self.text.rfind("%ignore", 0, node.pos)
                out.append(
                    self._diag(
                        "W001",
                        start,
                        _line_end(self.text, node.pos),
                        "`%ignore` lets this whitespace repeat any number of times between lexemes",
                        'make the ignored span bounded and skipped once: %llguidance {"skip_repetition": '
                        '"once"} with %ignore /[ \\t]{1,8}/',
                    )
                )
        return out

    def recursive_whitespace(self) -> list[Diagnostic]:
        """W001 for whitespace made unbounded by recursion, as in `ws ::= ([ \t\n] ws)?`:
        a rule that reaches itself and matches nothing but whitespace when it does."""
        out, reported = [], []
        for name, rule in self.defs.items():
            below = self._reachable(name)
            if (
                name not in below
                or any(name in self._reachable(r) and r in below for r in reported)
                or self.has_unbounded(rule.body)
            ):
                continue  # not recursive, in a cycle already reported, or W001 at its repetition
            saved, self._ws_memo = self._ws_memo, {name: "ws"}  # assume it, then check the body
            try:
                kind = self.whitespace_kind(rule.body)
            finally:
                self._ws_memo = saved
            if kind == "ws":
                reported.append(name)
                out.append(
                    self._at_name(
                        "W001",
                        rule,
                        f"`{name}` matches whitespace and repeats itself through recursion, without bound",
                        "allow a bounded amount instead, e.g. `ws ::= [ \\t\\n]{0,20}`",
                    )
                )
        return out

    def _reachable(self, name: str) -> set[str]:
        """Rules reachable from `name`'s body through references (`name` itself if recursive)."""
        seen: set[str] = set()
        stack = [r.name for r in refs(self.defs[name].body)]
        while stack:
            current = stack.pop()
            if current in seen or current not in self.defs:
                continue
            seen.add(current)
            stack += [r.name for r in refs(self.defs[current].body)]
        return seen

    def _bounded_hint(self, rep: Rep) -> str:
        body = self.text[rep.pos : rep.op_pos].strip()
        hi = rep.min + 20 if rep.min >= 20 else 20
        bounded = f"{body} ~ {rep.min}..{hi}" if rep.lark else f"{body}{{{rep.min},{hi}}}"
        return f"bound it, e.g. `{_short(bounded)}`"

    def free_text(self) -> list[Diagnostic]:
        """G008: unbounded free text with required grammar after it (sgcli/lint/free_text.py)."""
        out = []
        for rep, after in FreeText(self).findings():
            src, then = self.text[rep.pos : rep.end], self.text[after.pos : _line_end(self.text, after.pos)]
            hint = self._bounded_hint(rep)
            if self.g.syntax == "lark":
                hint = f"give it a rule with a token budget, `reason[max_tokens=64]: /{_short(src)}/`, or {hint}"
            out.append(
                self._diag(
                    "G008",
                    rep.pos,
                    rep.end,
                    f"`{_short(src)}` is free text without a bound, and `{_short(then, 30)}` must follow: a model "
                    f"that never ends the free text runs to --max-tokens and the rest is never written",
                    hint,
                )
            )
        return out

    def run(self) -> list[Diagnostic]:
        out = self.undefined() + self.duplicates() + self.missing_root() + self.unused()
        if self.g.syntax == "gbnf":
            out += self.left_recursion()
        return out + self.nullable_root() + self.repetitions() + self.free_text()


def _short(src: str, limit: int = 60) -> str:
    src = " ".join(src.split())
    return src if len(src) <= limit else src[: limit - 1] + "…"


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end
