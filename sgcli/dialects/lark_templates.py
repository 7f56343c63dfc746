"""Lark templates expanded as the macros they are, for a conversion to GBNF (which has none).

`_sep{x, sep}: x (sep x)*` used as `_sep{WORD, ","}` is the body with `x` replaced by `WORD` and `sep`
by `","`; uses inside the arguments and inside other templates' bodies are expanded too. Until
2026-12-07 a conversion refused `sep` at 1:1 as if imported ("define `sep`"). A template that uses
itself, directly or through another, has no finite expansion: refused at that use. Copies are made
without recursion per node, and their number and depth are bounded, since uses can nest.
"""

from __future__ import annotations

import copy

from sgcli.constraints.spec import MAX_DEPTH
from sgcli.dialects.grammar_model import Alt, Chars, Grammar, Node, Opaque, Ref, Rep, Rule, Seq, walk
from sgcli.errors import Location, UserError, offset_to_line_col

MAX_NESTING = 32  # template uses inside template uses
MAX_NODES = 200_000  # nodes the copies may add: each use copies a body, and nested uses multiply
_CHILDREN = {Seq: "items", Alt: "alts", Rep: "body", Opaque: "children", Ref: "args"}


def expand_templates(grammar: Grammar, text: str, origin: str | None) -> None:
    """Each template use in `grammar` replaced by its expansion, and the templates (and their parameters,
    which the reader lists as external names) gone; a use that cannot be expanded is exit 2 at its place."""
    templates = {rule.name: rule for rule in grammar.rules if rule.params}
    if not templates and not any(isinstance(n, Ref) and n.args for r in grammar.rules for n in walk(r.body)):
        return
    deepest = max((_depth(r.body) for r in grammar.rules), default=0)
    expander = _Expander(templates, set(grammar.definitions()), text, origin)
    kept = [rule for rule in grammar.rules if not rule.params]
    for rule in kept:
        rule.body = expander.expanded(rule.body, {}, ())
        if _depth(rule.body) > max(deepest, MAX_DEPTH):
            raise expander.fail(
                f"expanding the templates in `{rule.name}` nests it more than {max(deepest, MAX_DEPTH)} levels deep",
                rule.pos,
                "write the deepest uses out as rules",
            )
    grammar.ignores = [expander.expanded(node, {}, ()) for node in grammar.ignores]
    grammar.rules = kept
    grammar.external -= {p for rule in templates.values() for p in rule.params}


class _Expander:
    def __init__(self, templates: dict[str, Rule], defined: set[str], text: str, origin: str | None):
        self.templates, self.defined, self.text, self.origin = templates, defined, text, origin
        self.nodes = 0

    def fail(self, message: str, pos: int, hint: str) -> UserError:
        return UserError(message, location=Location(self.origin, *offset_to_line_col(self.text, pos)), hint=hint)

    def expanded(self, node: Node, bindings: dict[str, Node], active: tuple[str, ...]) -> Node:
        """A copy of `node` with each parameter in `bindings` replaced and each template use expanded."""
        return self.copied(node, lambda ref: self.use(ref, bindings, active))

    def use(self, ref: Ref, bindings: dict[str, Node], active: tuple[str, ...]) -> Node | None:
        """What `ref` stands for here: an argument's copy, a use's expansion, or None (a plain reference)."""
        if ref.args is None and ref.name in bindings:
            return self.copied(bindings[ref.name], lambda _: None)
        template = self.templates.get(ref.name)
        if template is None and ref.args is not None and ref.name in self.defined:
            raise self.fail(f"`{ref.name}` is given arguments, but it is not a template", ref.pos, f"write {ref.name}")
        if template is None:
            return None  # a plain reference, or a name resolve.py refuses
        params = ", ".join(template.params)
        shape = f"{ref.name}{{{params}}}"
        if ref.args is None:
            written = self.text.startswith("{", ref.pos + len(ref.name))
            what = "sgcli cannot read the arguments of" if written else "no arguments are given to"
            raise self.fail(f"`{ref.name}` is a template, and {what} this use", ref.pos, f"write {shape}")
        if len(ref.args) != len(template.params):
            raise self.fail(
                f"`{ref.name}` takes {len(template.params)} arguments ({params}), given {len(ref.args)}",
                ref.pos,
                f"write {shape}",
            )
        if ref.name in active:
            through = active[active.index(ref.name) + 1 :]
            via = f" (through {', '.join(f'`{t}`' for t in through)})" if through else ""
            raise self.fail(
                f"template `{ref.name}` uses itself{via}: it has no finite expansion, and GBNF has no templates",
                ref.pos,
                f"write `{ref.name}` as a rule for each argument list it is used with",
            )
        if len(active) >= MAX_NESTING:
            raise self.fail(f"template uses nest more than {MAX_NESTING} deep", ref.pos, "write some out as rules")
        args = [self.expanded(arg, bindings, active) for arg in ref.args]
        return self.expanded(template.body, dict(zip(template.params, args)), (*active, ref.name))

    def copied(self, node: Node, replace) -> Node:
        """A copy of `node` in which each Ref that `replace` maps to a node is that node, taken as it is."""

        def one(n: Node) -> tuple[Node, bool]:
            found = replace(n) if isinstance(n, Ref) else None
            if found is not None:
                return found, False
            self.nodes += 1
            if self.nodes > MAX_NODES:
                raise self.fail(f"the templates expand to more than {MAX_NODES:,} nodes", n.pos, "write uses as rules")
            fresh = copy.copy(n)
            if isinstance(fresh, Chars):
                fresh.ranges = list(fresh.ranges)
            return fresh, True

        root, fresh = one(node)
        stack = [root] if fresh else []
        while stack:
            current = stack.pop()
            attr = _CHILDREN.get(type(current))
            value = getattr(current, attr) if attr else None
            if value is None:
                continue
            pairs = [one(child) for child in (value if isinstance(value, list) else [value])]
            setattr(current, attr, [c for c, _ in pairs] if isinstance(value, list) else pairs[0][0])
            stack.extend(c for c, copied in pairs if copied)
        return root


def _depth(node: Node) -> int:
    """How deep `node` nests (without recursion): the printers recurse per level."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        current, depth = stack.pop()
        deepest = max(deepest, depth)
        attr = _CHILDREN.get(type(current))
        value = getattr(current, attr) if attr else None
        if value is not None:
            stack.extend((child, depth + 1) for child in (value if isinstance(value, list) else [value]))
    return deepest
