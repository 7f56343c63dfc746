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

Four modules: this one (the matcher: an incremental JSON reader over the backend's), `schema_plan`
(what applies at each pointer, shared by a compile's matchers), `json_strings` (string rules on a
prefix, and the per-vocabulary token tables) and `token_screen` (which allowed tokens need a look
one by one, and which the tables judge at once).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from sgcli.backends.base import Compiled, Matcher, allowed_ids
from sgcli.backends.json_strings import NUMBER_BYTES, string_dead, string_state
from sgcli.backends.keyword_coverage import compiled_gaps
from sgcli.backends.schema_doc import escape_pointer
from sgcli.backends.schema_plan import PROJECTED, CheckPlan
from sgcli.backends.token_screen import prefix_rules, refused_by_table, to_look_at

_WS = frozenset(b" \t\n\r")
_ESCAPES = frozenset(b'"\\/bfnrtu')
_HEX = frozenset(b"0123456789abcdefABCDEF")
_LITERALS = {ord("t"): b"rue", ord("f"): b"alse", ord("n"): b"ull"}


def _loads(raw: bytes):
    """The JSON value of `raw`, read as strict UTF-8, as the output is finally read: an overlong sequence
    or an encoded surrogate (ED A0 80), which a backend's mask may let through, is refused here. Python's
    json reads bytes with `surrogatepass`, so the checker judged '\\ud800' where the output held U+FFFD,
    and an overlong sequence raised UnicodeDecodeError mid-generation."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused("bytes that are not UTF-8 text") from None
    try:
        return json.loads(text)
    except ValueError as exc:  # `-` alone, where a grammar reads on, or past Python's 4,300-digit int limit
        raise Refused(f"a value JSON does not read ({exc})") from None


class Refused(Exception):
    """A token would break the schema; the message says where and why."""


def with_checker(compiled: Compiled) -> Compiled:
    """`compiled`, or a wrapper whose matchers also enforce what its grammar does not."""
    if isinstance(compiled, CheckedCompiled):
        return compiled
    gaps = [g for g in compiled_gaps(compiled) if g.checker]
    if not gaps:
        return compiled
    plan = CheckPlan(compiled.spec.schema(), [a for g in gaps for a in g.anchors], compiled.vocab)
    return CheckedCompiled(
        compiled.backend,
        compiled.spec,
        compiled.vocab,
        compiled.compile_s,
        list(compiled.warnings),
        compiled.normalized,
        inner=compiled,
        plan=plan,
        gaps=gaps,
    )


@dataclass(eq=False)
class CheckedCompiled(Compiled):
    """A compiled grammar whose matchers are checked by sgcli (the backend's name and spec unchanged)."""

    inner: Compiled = field(kw_only=True)
    plan: CheckPlan = field(kw_only=True)
    gaps: list = field(kw_only=True, default_factory=list)  # the keyword_coverage.Gap list it enforces

    def matcher(self) -> CheckedMatcher:
        return CheckedMatcher(self.inner.matcher(), self.plan)

    def size_info(self) -> dict[str, int]:
        return self.inner.size_info()


# ---- the incremental JSON reader ----
# Frames (tuples, so a state is a cheap snapshot):
#   ("top", phase, nodes)                      phase 0: before the value, 1: after it
#   ("obj", start, nodes, phase, count, child) phase "k0" after `{`, "k" after `,`, ":" after a key,
#                                              "v" before a value, "," after one; child: the next value's nodes
#   ("arr", start, nodes, phase, count)        phase "v0" after `[`, "v" after `,`, "," after a value
#   ("str", start, nodes, escape, is_key)      escape 0, 1 after `\`, 2-5 inside `\uXXXX`
#   ("num", start, nodes)
#   ("lit", start, nodes, rest)                rest: the bytes of true/false/null still to come


class CheckedMatcher:
    """A backend's matcher plus the schema check (see the module docstring)."""

    def __init__(self, inner: Matcher, plan: CheckPlan):
        self._inner, self._plan = inner, plan
        self._text = bytearray()
        self._stack: tuple = (("top", 0, plan.root_nodes),)
        self._history: list[tuple[tuple, int]] = []
        self._memo: dict = {}
        self._outcomes: dict[int, object] = {}
        self._error: str | None = None

    @property
    def error(self) -> str | None:
        return self._error or self._inner.error

    @property
    def pointer(self) -> str:
        """The JSON pointer of the value being written ("" at the top), for errors that say where."""
        return self._pointer(self._stack)

    # -- the Matcher protocol --

    def fill_mask(self, bitmask) -> None:
        import numpy as np

        self._inner.fill_mask(bitmask)
        vocab_size = len(self._plan.tokens)
        ids = allowed_ids(bitmask, vocab_size)
        if not len(ids):
            return
        plan, top = self._plan, self._stack[-1]
        rules = prefix_rules(plan, top)
        whole = top[1] + 1 <= len(self._text)  # the open string's content starts in the accepted text
        current = self._current(top[1]) if rules is not None and whole else None
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
        self._memo.clear()
        self._outcomes.clear()
        return True

    def rollback(self, n: int) -> None:
        if n <= 0:
            return
        self._inner.rollback(n)
        n = min(n, len(self._history))
        stack, size = self._history[-n]
        del self._history[-n:]
        self._stack = stack
        del self._text[size:]
        self._memo.clear()
        self._outcomes.clear()
        self._error = None

    def jump_forward(self) -> bytes:
        return self._inner.jump_forward()  # a draft only: every drafted token still passes the mask

    def is_terminated(self) -> bool:
        return self._inner.is_terminated()

    def can_stop(self) -> bool:
        if not self._inner.can_stop():
            return False
        try:
            self._finish(self._stack, self._data_view(b""))
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
        view = self._data_view(data)
        try:
            if token in plan.stop_ids:
                stack = self._finish(self._stack, view)
            else:
                stack = self._feed(self._stack, data, view)
            found = (True, None, stack, data)
        except Refused as exc:
            found = (False, str(exc), self._stack, b"")
        self._outcomes[token] = found
        return found

    def _data_view(self, data: bytes) -> _View:
        return _View(self._text, data)

    def _finish(self, stack: tuple, view: _View) -> tuple:
        """The end of the text: a number at the top level completes here; the document must be whole."""
        end = len(view)
        if stack[-1][0] == "num":
            stack = self._end_value(stack[:-1], stack[-1], end, view)
        if len(stack) != 1 or stack[0][1] != 1:
            raise Refused("the JSON value is not complete")
        return stack

    def _feed(self, stack: tuple, data: bytes, view: _View) -> tuple:
        pos = len(self._text)
        for b in data:
            stack = self._step(stack, b, pos, view)
            pos += 1
        top = stack[-1]
        if top[0] == "num":
            why = self._plan.sign_refused(self._plan.checks(top[2]), view.slice(top[1], len(view)))
            if why:
                raise Refused(f"a number {why} at {self._pointer(stack[:-1]) or '/'}")
        if top[0] == "str" and not top[4]:
            rules = self._plan.strings(self._plan.checks(top[2]))
            why = string_dead(rules, *self._content(top, view)) if rules is not None else None
            if why:
                raise Refused(f"a string {why} at {self._pointer(stack[:-1]) or '/'}")
        return stack

    def _content(self, top: tuple, view: _View) -> tuple[str, bytes]:
        """(the characters written so far in the open string `top`, text plus the candidate's bytes; the
        unfinished escape or UTF-8 character at its end, b"" where there is none)."""
        start = top[1] + 1
        if start <= view.base:
            current = self._current(top[1])
            if current is not None:
                text, tail = string_state(view.data)
                return current + text, tail
        return string_state(view.slice(start, len(view)))

    def _current(self, start: int) -> str | None:
        """The open string's characters in the accepted text, or None where an escape or a character
        is unfinished there (cached for this state)."""
        key = ("current", start)
        if key not in self._memo:
            text, tail = string_state(bytes(self._text[start + 1 :]))
            self._memo[key] = None if tail else text
        return self._memo[key]

    def _step(self, stack: tuple, b: int, pos: int, view: _View) -> tuple:
        top = stack[-1]
        kind = top[0]
        if kind == "str":
            escape = top[3]
            if escape == 0:
                if b == 34:
                    return self._end_string(stack, top, pos + 1, view)
                if b == 92:
                    return stack[:-1] + ((kind, top[1], top[2], 1, top[4]),)
                if b < 0x20:
                    raise Refused("a control character inside a JSON string")
                return stack
            if escape == 1:
                if b not in _ESCAPES:
                    raise Refused("an invalid escape in a JSON string")
                return stack[:-1] + ((kind, top[1], top[2], 2 if b == 117 else 0, top[4]),)
            if b not in _HEX:
                raise Refused("an invalid \\u escape in a JSON string")
            return stack[:-1] + ((kind, top[1], top[2], 0 if escape == 5 else escape + 1, top[4]),)
        if kind == "num":
            if b in NUMBER_BYTES:
                return stack
            stack = self._end_value(stack[:-1], top, pos, view)
            return self._step(stack, b, pos, view)
        if kind == "lit":
            rest = top[3]
            if b != rest[0]:
                raise Refused("not a JSON literal")
            if len(rest) == 1:
                return self._end_value(stack[:-1], top, pos + 1, view)
            return stack[:-1] + ((kind, top[1], top[2], rest[1:]),)
        if b in _WS:
            return stack
        if kind == "top":
            if top[1] == 1:
                raise Refused("text after the JSON value")
            return self._start_value(stack, b, pos, top[2])
        if kind == "obj":
            phase = top[3]
            if phase in ("k0", "k"):
                if b == 34:
                    return stack + (("str", pos, None, 0, True),)
                if b == 125 and phase == "k0":
                    return self._end_value(stack[:-1], top, pos + 1, view)
            elif phase == ":":
                if b == 58:
                    return stack[:-1] + (("obj", top[1], top[2], "v", top[4], top[5], top[6]),)
            elif phase == "v":
                return self._start_value(stack, b, pos, top[5])
            elif phase == ",":
                if b == 44:
                    return stack[:-1] + (("obj", top[1], top[2], "k", top[4], None, None),)
                if b == 125:
                    return self._end_value(stack[:-1], top, pos + 1, view)
            raise Refused("not JSON")
        # "arr"
        phase = top[3]
        if phase in ("v0", "v"):
            if b == 93 and phase == "v0":
                return self._end_value(stack[:-1], top, pos + 1, view)
            return self._start_value(stack, b, pos, self._plan.element(top[2], top[4]) if top[2] else None)
        if b == 44:
            return stack[:-1] + (("arr", top[1], top[2], "v", top[4]),)
        if b == 93:
            return self._end_value(stack[:-1], top, pos + 1, view)
        raise Refused("not JSON")

    def _start_value(self, stack: tuple, b: int, pos: int, nodes) -> tuple:
        if b == 123:
            kind, frame = "object", ("obj", pos, nodes, "k0", 0, None, None)
        elif b == 91:
            kind, frame = "array", ("arr", pos, nodes, "v0", 0)
        elif b == 34:
            kind, frame = "string", ("str", pos, nodes, 0, False)
        elif b == 45 or 48 <= b <= 57:
            kind, frame = "number", ("num", pos, nodes)
        elif b in _LITERALS:
            kind, frame = ("boolean" if b != 110 else "null"), ("lit", pos, nodes, _LITERALS[b])
        else:
            raise Refused("not JSON")
        for p in self._plan.checks(nodes):
            allowed = self._plan.types(p)
            if allowed is not None and kind not in allowed:
                raise Refused(
                    f"a {kind} where the schema at {p or '/'} allows {', '.join(sorted(allowed)) or 'nothing'}"
                )
        return stack + (frame,)

    def _end_string(self, stack: tuple, top: tuple, end: int, view: _View) -> tuple:
        if not top[4]:
            return self._end_value(stack[:-1], top, end, view)
        key = _loads(view.slice(top[1], end))
        parent = stack[-2]
        nodes = parent[2]
        if nodes:
            why = self._plan.key_refused(nodes, key, parent[4])
            if why:
                raise Refused(f"property {key!r} is ruled out by {why}")
        child = self._plan.member(nodes, key) if nodes else None
        return stack[:-2] + (("obj", parent[1], nodes, ":", parent[4], child, key),)

    def _end_value(self, stack: tuple, frame: tuple, end: int, view: _View) -> tuple:
        """`frame`'s value is complete at `end`: validate it, then update its container."""
        plan = self._plan
        for p in plan.checks(frame[2]):
            raw = view.slice(frame[1], end)
            key = (p, frame[1], end, view.part(end))
            ok = self._memo.get(key)
            if ok is None:
                value = _loads(raw)
                ok = plan.valid(p, value)
                self._memo[key] = ok
                if not ok:
                    self._memo[("why", key)] = plan.why(p, value)
            if not ok:
                raise Refused(f"the value at {self._pointer(stack) or '/'} {self._memo[('why', key)]}")
        parent = stack[-1]
        if parent[0] == "top":
            return (("top", 1, parent[2]),)
        if parent[0] == "obj":
            updated = ("obj", parent[1], parent[2], ",", parent[4] + 1, None, None)
        else:
            updated = ("arr", parent[1], parent[2], ",", parent[4] + 1)
        self._check_so_far(updated, end, view, stack)
        return stack[:-1] + (updated,)

    def _check_so_far(self, container: tuple, end: int, view: _View, stack: tuple) -> None:
        """A child just completed: the container so far (closed here) must not already break a rule
        that more children cannot repair."""
        plan = self._plan
        for p in plan.checks(container[2]):
            node = plan._applies(p)
            if node is None or not any(k in node for k in PROJECTED[1:]):
                continue
            key = ("so far", p, container[1], end, view.part(end))
            ok = self._memo.get(key)
            if ok is None:
                raw = view.slice(container[1], end) + (b"}" if container[0] == "obj" else b"]")
                ok = plan.valid(p, _loads(raw), projected=True)
                self._memo[key] = ok
            if not ok:
                what = "object" if container[0] == "obj" else "array"
                raise Refused(
                    f"the {what} at {self._pointer(stack[:-1]) or '/'} already breaks the schema at {p or '/'}"
                )

    def _pointer(self, stack: tuple) -> str:
        """The JSON pointer of the value the innermost frame of `stack` is writing."""
        parts = []
        for frame in stack:
            if frame[0] == "obj" and frame[6] is not None:
                parts.append(escape_pointer(frame[6]))
            elif frame[0] == "arr":
                parts.append(str(frame[4]))
        return "".join("/" + p for p in parts)


@dataclass
class _View:
    """The text so far plus a candidate token's bytes, sliced without copying the whole text."""

    text: bytearray
    data: bytes

    @property
    def base(self) -> int:
        return len(self.text)

    def __len__(self) -> int:
        return len(self.text) + len(self.data)

    def part(self, end: int) -> bytes:
        """The candidate's bytes up to `end` (with the start offset, it names a slice in one state)."""
        return self.data[: end - len(self.text)] if end > len(self.text) else b""

    def slice(self, start: int, end: int) -> bytes:
        base = len(self.text)
        if end <= base:
            return bytes(self.text[start:end])
        if start >= base:
            return self.data[start - base : end - base]
        return bytes(self.text[start:]) + self.data[: end - base]
