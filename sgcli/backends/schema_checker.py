"""sgcli's own schema check in the decode loop: what the backend's grammar leaves unenforced.

`with_checker(compiled)` wraps a compiled JSON Schema whose backend leaves keywords to sgcli
(`keyword_coverage.compiled_gaps`). Its matchers wrap the backend's: they follow the JSON text
token by token (a small incremental parser whose state is a tuple, so every accepted token keeps
a snapshot for `rollback`), know the JSON pointer and the schema nodes of the value being written,
and refuse a token (`accept` says no, `fill_mask` clears its bit) when it would

- complete a value that fails jsonschema against a subschema the checker validates there (the
  "anchors": the subschema holding each unenforced keyword, or the nearest one above it that
  applies unconditionally; the whole document against the root schema, always);
- start a value of a JSON type those subschemas exclude, add a key `additionalProperties: false`,
  `propertyNames` or `maxProperties` rule out, or complete a child while the container so far
  already breaks a rule more children cannot repair (maxItems, uniqueItems, properties, ...);
- extend a string that can no longer meet `maxLength`, `enum`/`const` or an anchored `pattern`
  (`regex` partial matching), so the model does not write itself into a dead end.

Where its refusals still leave no token (a value no continuation can repair, not finished yet), the
single-stream decode loop backtracks: `rollback(1)`, the token banned there (`sgcli.engine.sequence`).

Every refusal is a necessary condition of validity, so nothing valid is masked by mistake except
where jsonschema itself says so; the last check (the root, against the whole schema) makes every
accepted text valid. Only tokens that can change what is checked are looked at: in a string, those
with a quote (or all, when its content is checked as a prefix); in a number, those that end it.

Five modules: this one (the matcher over the backend's), `json_reader` (the incremental JSON reader
whose state it keeps per token), `schema_plan`
(what applies at each pointer, shared by a compile's matchers), `json_strings` (string rules on a
prefix, and the per-vocabulary token tables) and `token_screen` (which allowed tokens need a look
one by one, and which the tables judge at once).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sgcli.backends.base import Compiled, Matcher, allowed_ids
from sgcli.backends.json_reader import JsonReader, Refused, View
from sgcli.backends.json_strings import NUMBER_BYTES
from sgcli.backends.keyword_coverage import compiled_gaps
from sgcli.backends.on_top import OnTopCompiled, OnTopMatcher
from sgcli.backends.repeated_keys import with_key_guard
from sgcli.backends.schema_plan import CheckPlan
from sgcli.backends.token_screen import refused_by_table, to_look_at
from sgcli.constraints.spec import Kind


def with_checker(compiled: Compiled) -> Compiled:
    """`compiled`, or a wrapper whose matchers also enforce what its grammar does not."""
    if isinstance(compiled, OnTopCompiled):
        return compiled
    gaps = [g for g in compiled_gaps(compiled) if g.checker]
    if not gaps:  # the checker's reader would refuse a repeated key: without it, the lighter guard does
        return with_key_guard(compiled) if compiled.spec.kind is Kind.JSON_SCHEMA else compiled
    plan = CheckPlan(compiled.spec.schema(), [a for g in gaps for a in g.anchors], compiled.vocab)
    return CheckedCompiled.around(compiled, plan=plan, gaps=gaps)


@dataclass(eq=False)
class CheckedCompiled(OnTopCompiled):
    """A compiled grammar whose matchers are checked by sgcli (the backend's name and spec unchanged)."""

    plan: CheckPlan = field(kw_only=True)
    gaps: list = field(kw_only=True, default_factory=list)  # the keyword_coverage.Gap list it enforces

    def matcher(self) -> CheckedMatcher:
        return CheckedMatcher(self.inner.matcher(), self.plan)


class CheckedMatcher(OnTopMatcher):
    """A backend's matcher plus the schema check (see the module docstring)."""

    def __init__(self, inner: Matcher, plan: CheckPlan):
        super().__init__(inner)
        self._plan = plan
        self._reader = JsonReader(plan)
        self._text = bytearray()
        self._stack: tuple = (("top", 0, plan.root_nodes),)
        self._outcomes: dict[int, object] = {}

    @property
    def pointer(self) -> str:
        """The JSON pointer of the value being written ("" at the top), for errors that say where."""
        return self._reader.pointer(self._stack)

    # -- the Matcher protocol --

    def fill_mask(self, bitmask) -> None:
        import numpy as np

        self._inner.fill_mask(bitmask)
        if self._inner.error is not None:  # the backend failed (llguidance's item limit): its mask means nothing,
            return  # and filtering it would turn that failure into an empty mask, read as a dead end
        vocab_size = len(self._plan.tokens)
        ids = allowed_ids(bitmask, vocab_size)
        if not len(ids):
            return
        plan, top = self._plan, self._stack[-1]
        if top[0] == "num":
            why = plan.digits_refused(plan.checks(top[2]), bytes(self._text[top[1] :]))
            if why and self._number_only_grows(ids):  # the grammar takes only more digits (an integer): dead
                bitmask.view(np.uint8)[:] = 0
                self._error = f"the schema allows no continuation here: a number {why}"
                return
        rules = plan.open_string_rules(top)
        whole = top[1] + 1 <= len(self._text)  # the open string's content starts in the accepted text
        current = self._reader.current(self._text, top[1]) if rules is not None and whole else None
        refused = refused_by_table(plan.tables, ids, rules, current)
        candidates = to_look_at(plan, top, ids, rules, current)
        checked = [int(t) for t in candidates if not self._outcome(int(t))[0]]
        if not len(refused) and not checked:
            return
        bits = np.unpackbits(bitmask.view(np.uint8), bitorder="little")
        bits[refused] = 0
        bits[checked] = 0
        bitmask.view(np.uint8)[:] = np.packbits(bits, bitorder="little")
        if not allowed_ids(bitmask, vocab_size).size:
            last = checked[-1] if checked else None
            reason = self._outcomes[last][1] if last is not None else "every allowed token breaks it"
            self._error = f"the schema allows no continuation here: {reason}"

    def _number_only_grows(self, ids) -> bool:
        """Whether no allowed token goes on with a fraction or an exponent (which can bring a number back
        within its bounds): outlines-core's integer grew `4044444...` past `maximum` 99 until --max-tokens,
        every token that ends it refused and none that adds a digit (2026-12-06)."""
        tokens, special = self._plan.tokens, self._plan.special_ids
        for t in ids:
            if int(t) in special:  # the end of the text: refused where the number breaks its bounds
                continue
            for b in tokens[int(t)]:
                if b in b".eE":
                    return False
                if b not in NUMBER_BYTES:
                    break
        return True

    def accept(self, token_id: int) -> bool:
        ok, why, stack, added = self._outcome(token_id)
        if not ok:
            self._error = f"token {token_id} would break the schema: {why}"
            return False
        if not self._inner.accept(token_id):
            return False
        self._history.append((self._stack, len(self._text)))
        self._stack = stack
        self._text += added
        self._reader.forget()
        self._outcomes.clear()
        return True

    def _restore(self, snapshot: tuple[tuple, int]) -> None:
        stack, size = snapshot
        self._stack = stack
        del self._text[size:]
        self._reader.forget()
        self._outcomes.clear()

    def can_stop(self) -> bool:
        if not self._inner.can_stop():
            return False
        try:
            self._reader.finish(self._stack, View(self._text, b""))
        except Refused:
            return False
        return True

    # -- deciding one token --

    def _outcome(self, token: int) -> tuple[bool, str | None, tuple, bytes]:
        """(ok, why not, the state after it, the bytes it adds to the text)."""
        found = self._outcomes.get(token)
        if found is not None:
            return found
        plan = self._plan
        data = b"" if token in plan.special_ids else plan.tokens[token]
        view = View(self._text, data)
        try:
            if token in plan.stop_ids:
                stack = self._reader.finish(self._stack, view)
            else:
                stack = self._reader.feed(self._stack, view)
            found = (True, None, stack, data)
        except Refused as exc:
            found = (False, str(exc), self._stack, b"")
        self._outcomes[token] = found
        return found
