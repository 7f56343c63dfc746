"""The schema checker's incremental JSON reader: one byte at a time, against a `CheckPlan`.

A state is a tuple of frames (below), so the matcher keeps one per accepted token as a snapshot for
`rollback`. `feed` returns the state after a candidate token's bytes or raises `Refused` saying
why: a value completed that fails jsonschema where the plan checks it, a JSON type the subschemas
there exclude, a key ruled out, a container that already breaks a rule more children cannot repair,
a string or number no continuation can save. `finish` says whether the text may end here. The
matcher around it (`schema_checker`) owns the accepted text, the history and the token mask.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sgcli.backends.json_strings import NUMBER_BYTES, string_dead, string_state
from sgcli.backends.schema_doc import escape_pointer
from sgcli.backends.schema_plan import PROJECTED, CheckPlan

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


_UNSEEN = object()  # a memo entry not computed yet (None is a verdict: nothing refused)


class Refused(Exception):
    """A token would break the schema; the message says where and why."""


# Frames (tuples, so a state is a cheap snapshot):
#   ("top", phase, nodes)                      phase 0: before the value, 1: after it
#   ("obj", start, nodes, phase, count, child, key, keys)
#                                              phase "k0" after `{`, "k" after `,`, ":" after a key,
#                                              "v" before a value, "," after one; child: the next value's
#                                              nodes, key: its name; keys: the names so far
#   ("arr", start, nodes, phase, count)        phase "v0" after `[`, "v" after `,`, "," after a value
#   ("str", start, nodes, escape, is_key)      escape 0, 1 after `\`, 2-5 inside `\uXXXX`; a key's nodes
#                                              are its object's
#   ("num", start, nodes)
#   ("lit", start, nodes, rest)                rest: the bytes of true/false/null still to come


class JsonReader:
    """Reads JSON text against `plan`; `memo` caches verdicts for one accepted text (`forget` after
    the text changes)."""

    def __init__(self, plan: CheckPlan):
        self.plan = plan
        self.memo: dict = {}

    def forget(self) -> None:
        self.memo.clear()

    def finish(self, stack: tuple, view: View) -> tuple:
        """The end of the text: a number at the top level completes here; the document must be whole."""
        end = len(view)
        if stack[-1][0] == "num":
            stack = self._end_value(stack[:-1], stack[-1], end, view)
        if len(stack) != 1 or stack[0][1] != 1:
            raise Refused("the JSON value is not complete")
        return stack

    def feed(self, stack: tuple, view: View) -> tuple:
        """The state after the candidate's bytes (`view.data`), or Refused saying why not."""
        pos = view.base
        for b in view.data:
            stack = self._step(stack, b, pos, view)
            pos += 1
        top = stack[-1]
        if top[0] == "num":
            why = self.plan.sign_refused(self.plan.checks(top[2]), view.slice(top[1], len(view)))
            if why:
                raise Refused(f"a number {why} at {self.pointer(stack[:-1]) or '/'}")
        if top[0] == "str":
            rules = self.plan.open_string_rules(top)
            why = string_dead(rules, *self._content(top, view)) if rules is not None else None
            if why:
                what = "a property name" if top[4] else "a string"
                raise Refused(f"{what} {why} at {self.pointer(stack[:-1]) or '/'}")
        return stack

    def _content(self, top: tuple, view: View) -> tuple[str, bytes]:
        """(the characters written so far in the open string `top`, text plus the candidate's bytes; the
        unfinished escape or UTF-8 character at its end, b"" where there is none)."""
        start = top[1] + 1
        if start <= view.base:
            current = self.current(view.text, top[1])
            if current is not None:
                text, tail = string_state(view.data)
                return current + text, tail
        return string_state(view.slice(start, len(view)))

    def current(self, text: bytearray, start: int) -> str | None:
        """The open string's characters in the accepted text, or None where an escape or a character
        is unfinished there (cached for this state)."""
        key = ("current", start)
        if key not in self.memo:
            text, tail = string_state(bytes(text[start + 1 :]))
            self.memo[key] = None if tail else text
        return self.memo[key]

    def _step(self, stack: tuple, b: int, pos: int, view: View) -> tuple:
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
                    return stack + (("str", pos, top[2], 0, True),)  # a key: its object's nodes
                if b == 125 and phase == "k0":
                    return self._end_value(stack[:-1], top, pos + 1, view)
            elif phase == ":":
                if b == 58:
                    return stack[:-1] + (("obj", top[1], top[2], "v", *top[4:]),)
            elif phase == "v":
                return self._start_value(stack, b, pos, top[5])
            elif phase == ",":
                if b == 44:
                    return stack[:-1] + (("obj", top[1], top[2], "k", top[4], None, None, top[7]),)
                if b == 125:
                    return self._end_value(stack[:-1], top, pos + 1, view)
            raise Refused("not JSON")
        # "arr"
        phase = top[3]
        if phase in ("v0", "v"):
            if b == 93 and phase == "v0":
                return self._end_value(stack[:-1], top, pos + 1, view)
            return self._start_value(stack, b, pos, self.plan.element(top[2], top[4]) if top[2] else None)
        if b == 44:
            return stack[:-1] + (("arr", top[1], top[2], "v", top[4]),)
        if b == 93:
            return self._end_value(stack[:-1], top, pos + 1, view)
        raise Refused("not JSON")

    def _start_value(self, stack: tuple, b: int, pos: int, nodes) -> tuple:
        if b == 123:
            kind, frame = "object", ("obj", pos, nodes, "k0", 0, None, None, frozenset())
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
        for p in self.plan.checks(nodes):
            allowed = self.plan.types(p)
            if allowed is not None and kind not in allowed:
                raise Refused(
                    f"a {kind} where the schema at {p or '/'} allows {', '.join(sorted(allowed)) or 'nothing'}"
                )
        return stack + (frame,)

    def _end_string(self, stack: tuple, top: tuple, end: int, view: View) -> tuple:
        if not top[4]:
            return self._end_value(stack[:-1], top, end, view)
        key = _loads(view.slice(top[1], end))
        parent = stack[-2]
        if key in parent[7]:  # JSON Schema leaves a repeated key undefined; readers keep either value
            raise Refused(f"property {key!r} is already in the object at {self.pointer(stack[:-1]) or '/'}")
        nodes = parent[2]
        if nodes:
            why = self.plan.key_refused(nodes, key, parent[4])
            if why:
                raise Refused(f"property {key!r} is ruled out by {why}")
        child = self.plan.member(nodes, key) if nodes else None
        return stack[:-2] + (("obj", parent[1], nodes, ":", parent[4], child, key, parent[7] | {key}),)

    def _end_value(self, stack: tuple, frame: tuple, end: int, view: View) -> tuple:
        """`frame`'s value is complete at `end`: validate it, then update its container."""
        plan = self.plan
        for p in plan.checks(frame[2]):
            raw = view.slice(frame[1], end)
            key = (p, frame[1], end, view.part(end))
            ok = self.memo.get(key)
            if ok is None:
                value = _loads(raw)
                ok = plan.valid(p, value)
                self.memo[key] = ok
                if not ok:
                    self.memo[("why", key)] = plan.why(p, value)
            if not ok:
                raise Refused(f"the value at {self.pointer(stack) or '/'} {self.memo[('why', key)]}")
        parent = stack[-1]
        if parent[0] == "top":
            return (("top", 1, parent[2]),)
        if parent[0] == "obj":
            updated = ("obj", parent[1], parent[2], ",", parent[4] + 1, None, None, parent[7])
        else:
            updated = ("arr", parent[1], parent[2], ",", parent[4] + 1)
        self._check_so_far(updated, end, view, stack)
        return stack[:-1] + (updated,)

    def _check_so_far(self, container: tuple, end: int, view: View, stack: tuple) -> None:
        """A child just completed: the container so far (closed here) must not already break a rule
        that more children cannot repair (`contains`' counts included: past `maxContains`, or too few
        places left under `maxItems` to reach `minContains`)."""
        plan = self.plan
        for p in plan.checks(container[2]):
            node = plan._applies(p)
            if node is None:
                continue
            projected = any(k in node for k in PROJECTED[1:])
            counted = container[0] == "arr" and "contains" in node and plan.has_contains
            if not (projected or counted):
                continue
            key = ("so far", p, container[1], end, view.part(end))
            why = self.memo.get(key, _UNSEEN)
            if why is _UNSEEN:
                value = _loads(view.slice(container[1], end) + (b"}" if container[0] == "obj" else b"]"))
                why = None
                if projected and not plan.valid(p, value, projected=True):
                    why = f"already breaks the schema at {p or '/'}"
                elif counted:
                    why = plan.contains_refused(p, node, value)
                self.memo[key] = why
            if why:
                what = "object" if container[0] == "obj" else "array"
                raise Refused(f"the {what} at {self.pointer(stack[:-1]) or '/'} {why}")

    def pointer(self, stack: tuple) -> str:
        """The JSON pointer of the value the innermost frame of `stack` is writing."""
        parts = []
        for frame in stack:
            if frame[0] == "obj" and frame[6] is not None:
                parts.append(escape_pointer(frame[6]))
            elif frame[0] == "arr":
                parts.append(str(frame[4]))
        return "".join("/" + p for p in parts)


@dataclass
class View:
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
