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
"""

from __future__ import annotations

import json
import re
import weakref
from dataclasses import dataclass, field

from sgcli.backends.base import Compiled, Matcher, allowed_ids
from sgcli.backends.keyword_coverage import SchemaDoc, compiled_gaps, fragment
from sgcli.tokenizers.vocab import Vocab

_WS = frozenset(b" \t\n\r")
_NUMBER = frozenset(b"0123456789+-.eE")
_ESCAPES = frozenset(b'"\\/bfnrtu')
_HEX = frozenset(b"0123456789abcdefABCDEF")
_LITERALS = {ord("t"): b"rue", ord("f"): b"alse", ord("n"): b"ull"}
_PROJECTED = ("type", "properties", "patternProperties", "additionalProperties", "propertyNames", "maxProperties")
_PROJECTED += ("items", "prefixItems", "additionalItems", "maxItems", "uniqueItems")


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


# ---- the plan: one per compiled schema, shared by its matchers ----


@dataclass
class _Strings:
    """What a string value must meet, checkable on a prefix."""

    max_length: int | None = None
    choices: list[frozenset[str]] = field(default_factory=list)  # enum/const strings, one set per subschema
    patterns: list = field(default_factory=list)  # compiled `regex` patterns, anchored at the start
    ascii_closed: list[bool] = field(default_factory=list)  # per pattern: no non-ASCII character can match


class CheckPlan:
    """Anchors (subschemas the checker validates), their validators, and the schema nodes of each
    JSON position, computed once per compiled schema and cached."""

    def __init__(self, schema, anchors: list[str], vocab: Vocab):
        self.doc = SchemaDoc(schema)
        self.root_validator = self.doc.cls(schema, format_checker=self.doc.cls.FORMAT_CHECKER)
        self.anchors = frozenset(a for a in [*anchors, ""] if isinstance(self.doc.nodes.get(a), (dict, bool)))
        self.tables = vocab_tables(vocab)
        self.stop_ids = frozenset(vocab.stop_ids)
        self.special_ids = vocab.special_ids
        self.tokens = vocab.tokens
        self._validators: dict = {}
        self._closure: dict = {}
        self._children: dict = {}
        self._checks: dict = {}
        self._types: dict = {}
        self._strings: dict = {}
        self._signs: dict = {}
        self.items_are_prefix = "prefixItems" in self.doc.cls.VALIDATORS
        self.root_nodes = self.closure(frozenset({""}))

    # -- validators --

    def validator(self, pointer: str, projected: bool = False):
        key = (pointer, projected)
        found = self._validators.get(key)
        if found is None:
            if projected:
                node = self.doc.nodes[pointer]
                found = self.root_validator.evolve(schema={k: node[k] for k in _PROJECTED if k in node})
            elif pointer == "":
                found = self.root_validator
            else:
                found = self.root_validator.evolve(schema={"$ref": "#" + fragment(pointer)})
            self._validators[key] = found
        return found

    def valid(self, pointer: str, value, projected: bool = False) -> bool:
        """jsonschema's verdict; True where it cannot judge (a schema it cannot apply was listed as
        enforced by nothing before generation started)."""
        try:
            return self.validator(pointer, projected).is_valid(value)
        except Exception:  # referencing.Unresolvable, re.error in a pattern, ...
            return True

    def why(self, pointer: str, value) -> str:
        """The first violation, for the matcher's error."""
        try:
            error = next(iter(self.validator(pointer).iter_errors(value)), None)
        except Exception:
            error = None
        if error is None:
            return "the value breaks the schema"
        where = "/" + "/".join(str(p) for p in error.absolute_path)
        return f"`{error.validator}`: {error.message} (at {where if where != '/' else 'the value'})"

    # -- the schema nodes of each position --

    def closure(self, pointers: frozenset) -> frozenset:
        """`pointers` plus every subschema that applies to the same value unconditionally ($ref, allOf)."""
        found = self._closure.get(pointers)
        if found is not None:
            return found
        out, stack = set(), list(pointers)
        while stack:
            p = stack.pop()
            node = self.doc.nodes.get(p)
            if p in out or not isinstance(node, dict):
                continue
            out.add(p)
            ref = node.get("$ref")
            if isinstance(ref, str):
                target, _ = self.doc.resolve(p, ref)
                if target is not None:
                    stack.append(target)
            if self.doc.ref_overrides and "$ref" in node:
                continue
            if isinstance(node.get("allOf"), list):
                stack += [f"{p}/allOf/{i}" for i in range(len(node["allOf"]))]
        found = frozenset(out)
        self._closure[pointers] = found
        return found

    def _applies(self, pointer: str) -> dict | None:
        node = self.doc.nodes.get(pointer)
        if not isinstance(node, dict) or (self.doc.ref_overrides and "$ref" in node):
            return None
        return node

    def member(self, nodes: frozenset, key: str) -> frozenset:
        """The nodes of the value at `key` of an object whose nodes are `nodes`."""

        def pick(p: str, node: dict) -> list[str]:
            out = []
            props = node.get("properties")
            if isinstance(props, dict) and key in props:
                out.append(f"{p}/properties/{_escape(key)}")
            patterns = node.get("patternProperties")
            if isinstance(patterns, dict):
                out += [f"{p}/patternProperties/{_escape(regex)}" for regex in patterns if _search(regex, key)]
            if not out and "additionalProperties" in node:
                out.append(f"{p}/additionalProperties")
            return out

        return self._children_of(nodes, (nodes, "k", key), pick)

    def element(self, nodes: frozenset, index: int) -> frozenset:
        """The nodes of item `index` of an array whose nodes are `nodes`."""

        def pick(p: str, node: dict) -> list[str]:
            tuple_key = "prefixItems" if self.items_are_prefix else "items"
            prefix = node.get(tuple_key)
            if isinstance(prefix, list) and index < len(prefix):
                return [f"{p}/{tuple_key}/{index}"]
            if isinstance(prefix, list):
                rest = "items" if self.items_are_prefix else "additionalItems"
                return [f"{p}/{rest}"] if rest in node else []
            if "items" in node and not isinstance(node["items"], list):
                return [f"{p}/items"]
            return []

        return self._children_of(nodes, (nodes, "i", index), pick)

    def _children_of(self, nodes: frozenset, cache_key: tuple, pick) -> frozenset:
        """The closure of what `pick(pointer, node)` names under each of `nodes` that applies, cached."""
        found = self._children.get(cache_key)
        if found is None:
            out = {child for p in nodes if (node := self._applies(p)) is not None for child in pick(p, node)}
            found = self._children[cache_key] = self.closure(frozenset(out))
        return found

    def checks(self, nodes: frozenset | None) -> tuple[str, ...]:
        """The anchors among `nodes`: the subschemas validated when the value completes."""
        if not nodes:
            return ()
        found = self._checks.get(nodes)
        if found is None:
            found = tuple(sorted(nodes & self.anchors))
            self._checks[nodes] = found
        return found

    # -- necessary conditions, per anchor --

    def types(self, pointer: str) -> frozenset[str] | None:
        """JSON types a value may have under the anchor (None: any), from type, enum and const."""
        if pointer in self._types:
            return self._types[pointer]
        node = self._applies(pointer)
        allowed = None
        if node is not None:
            t = node.get("type")
            if isinstance(t, str):
                allowed = {t}
            elif isinstance(t, list) and all(isinstance(x, str) for x in t):
                allowed = set(t)
            if allowed is not None and "integer" in allowed:
                allowed.add("number")
            for key in ("enum", "const"):
                if key in node and (key == "const" or isinstance(node[key], list)):
                    listed = {_json_type(v) for v in (node[key] if key == "enum" else [node[key]])}
                    allowed = listed if allowed is None else allowed & listed
        found = None if allowed is None else frozenset(allowed)
        self._types[pointer] = found
        return found

    def strings(self, pointers: tuple[str, ...]) -> _Strings | None:
        """The prefix-checkable string rules of the anchors (None: nothing to check)."""
        if pointers in self._strings:
            return self._strings[pointers]
        rules = _Strings()
        for p in pointers:
            node = self._applies(p)
            if node is None:
                continue
            if isinstance(node.get("maxLength"), int) and not isinstance(node["maxLength"], bool):
                rules.max_length = min(node["maxLength"], rules.max_length if rules.max_length is not None else 1 << 62)
            if isinstance(node.get("enum"), list):
                rules.choices.append(frozenset(v for v in node["enum"] if isinstance(v, str)))
            if isinstance(node.get("const"), str):
                rules.choices.append(frozenset({node["const"]}))
            pattern = node.get("pattern")
            if isinstance(pattern, str) and pattern.startswith("^"):
                compiled = _prefix_regex(pattern)
                if compiled is not None:
                    rules.patterns.append(compiled)
                    rules.ascii_closed.append(_ascii_closed(pattern))
        found = rules if (rules.max_length is not None or rules.choices or rules.patterns) else None
        self._strings[pointers] = found
        return found

    def signed(self, pointers: tuple[str, ...]) -> list[tuple[str, str]]:
        """(anchor, the sign its bounds rule out) for the anchors whose bounds exclude every positive or
        every negative number: the sign is the one part of a number's prefix no later digit or exponent
        changes."""
        found = self._signs.get(pointers)
        if found is None:
            found = []
            for p in pointers:
                node = self._applies(p)
                if node is None:
                    continue
                low = [node[k] for k in ("minimum", "exclusiveMinimum") if _number(node.get(k))]
                high = [node[k] for k in ("maximum", "exclusiveMaximum") if _number(node.get(k))]
                if any(x >= 0 for x in low):
                    found.append((p, "-"))
                if any(x <= 0 for x in high):
                    found.append((p, "+"))
            self._signs[pointers] = found
        return found

    def sign_refused(self, pointers: tuple[str, ...], raw: bytes) -> str | None:
        """Why a number that starts with `raw` can never meet the anchors' bounds (None: it still can)."""
        signs = self.signed(pointers)
        if not signs:
            return None
        mantissa = raw.split(b"e")[0].split(b"E")[0]
        if not any(48 < b <= 57 for b in mantissa):
            return None  # still zero so far: -0 and 0 meet any bound that includes 0
        negative = raw[:1] == b"-"
        for p, sign in signs:
            if (sign == "-") == negative:
                return f"{'below' if negative else 'above'} the bounds at {p or '/'}"
        return None

    def key_refused(self, nodes: frozenset, key: str, count: int) -> str | None:
        """Why an object under these anchors cannot take `key` as its property number `count + 1`."""
        for p in self.checks(nodes):
            node = self._applies(p)
            if node is None:
                continue
            most = node.get("maxProperties")
            if isinstance(most, int) and not isinstance(most, bool) and count + 1 > most:
                return f"`maxProperties` {most} at {p or '/'}"
            if node.get("additionalProperties") is False:
                props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
                patterns = node.get("patternProperties") if isinstance(node.get("patternProperties"), dict) else {}
                if key not in props and not any(_search(r, key) for r in patterns):
                    return f"`additionalProperties: false` at {p or '/'}"
            if "propertyNames" in node and not self.valid(f"{p}/propertyNames", key):
                return f"`propertyNames` at {p or '/'}"
        return None


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _json_type(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


_regex_cache: dict = {}


def _search(pattern: str, text: str) -> bool:
    compiled = _regex_cache.get(pattern)
    if compiled is None:
        try:
            compiled = re.compile(pattern)
        except (re.error, RecursionError, OverflowError):
            compiled = False
        _regex_cache[pattern] = compiled
    return bool(compiled and compiled.search(text))


_OPEN = re.compile(r"\.|\[\^|\\[wWsSdDpPXN]|\(\?[a-zA-Z]*[isux]")


def _ascii_closed(pattern: str) -> bool:
    """Whether no non-ASCII character can match anywhere in `pattern` (only ASCII literals and classes:
    no `.`, negated class, `\\w`-style class or flag that reaches beyond ASCII)."""
    return pattern.isascii() and _OPEN.search(pattern) is None


def _prefix_regex(pattern: str):
    import regex

    try:
        return regex.compile(pattern)
    except Exception:  # regex.error, or a pattern only `re` reads: no prefix check, the completion check stays
        return None


# ---- per-vocabulary tables ----

_tables: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass
class VocabTables:
    has_quote: object  # numpy bool per id: holds a `"`
    ends_number: object  # numpy bool per id: holds a byte that cannot continue a number
    # per id, for a "plain" piece (no quote, backslash or control byte): the characters it adds to a string
    # whose content so far is whole (its UTF-8 decoded, an unfinished character at its end left out)
    plain_len: object  # numpy int: how many, an unfinished character at its end counted (-1: not plain)
    first: object  # numpy int: the code point of its first whole character (-1: none)
    plain_text: dict[int, str]  # id -> its whole characters
    plain_tail: dict[int, bytes]  # id -> the bytes of the unfinished character it ends with, where it does
    by_text: dict[str, list[int]]  # whole characters -> the ids of the pieces that are exactly them


def vocab_tables(vocab: Vocab) -> VocabTables:
    found = _tables.get(vocab)
    if found is None:
        import numpy as np

        n = len(vocab)
        has_quote = np.zeros(n, dtype=bool)
        ends_number = np.zeros(n, dtype=bool)
        plain_len = np.full(n, -1, dtype=np.int64)
        first = np.full(n, -1, dtype=np.int64)
        plain_text, plain_tail, by_text = {}, {}, {}
        for i, piece in enumerate(vocab.tokens):
            if i in vocab.special_ids:
                ends_number[i] = True
                continue
            has_quote[i] = 34 in piece
            ends_number[i] = any(b not in _NUMBER for b in piece)
            if piece and 34 not in piece and 92 not in piece and min(piece) >= 0x20:
                text, tail = _string_state(piece)
                if tail + text.encode("utf-8") != piece and text.encode("utf-8") + tail != piece:
                    continue  # bytes no UTF-8 reader takes: judged one by one
                plain_len[i] = len(text) + (1 if tail else 0)  # an unfinished character counts as one
                plain_text[i] = text
                first[i] = ord(text[0]) if text else -1
                if tail:
                    plain_tail[i] = tail
                else:
                    by_text.setdefault(text, []).append(i)
        found = VocabTables(has_quote, ends_number, plain_len, first, plain_text, plain_tail, by_text)
        _tables[vocab] = found
    return found


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
        refused = self._vectorized(ids)
        candidates = self._candidates(ids)
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
            why = _string_dead(rules, *self._content(top, view)) if rules is not None else None
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
                text, tail = _string_state(view.data)
                return current + text, tail
        return _string_state(view.slice(start, len(view)))

    def _current(self, start: int) -> str | None:
        """The open string's characters in the accepted text, or None where an escape or a character
        is unfinished there (cached for this state)."""
        key = ("current", start)
        if key not in self._memo:
            text, tail = _string_state(bytes(self._text[start + 1 :]))
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
            if b in _NUMBER:
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
        key = json.loads(view.slice(top[1], end))
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
                value = json.loads(raw)
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
            if node is None or not any(k in node for k in _PROJECTED[1:]):
                continue
            key = ("so far", p, container[1], end, view.part(end))
            ok = self._memo.get(key)
            if ok is None:
                raw = view.slice(container[1], end) + (b"}" if container[0] == "obj" else b"]")
                ok = plan.valid(p, json.loads(raw), projected=True)
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
                parts.append(_escape(frame[6]))
            elif frame[0] == "arr":
                parts.append(str(frame[4]))
        return "".join("/" + p for p in parts)

    # -- which tokens need a look --

    def _candidates(self, ids):
        """The allowed ids whose outcome can differ from plain acceptance here."""
        import numpy as np

        plan, top = self._plan, self._stack[-1]
        tables = plan.tables
        stops = np.fromiter(plan.stop_ids, dtype=np.int64) if plan.stop_ids else np.zeros(0, dtype=np.int64)
        if top[0] == "str":
            if self._prefix_rules(top) is not None:
                if self._vector_ok(top):
                    return ids[tables.plain_len[ids] < 0]  # the plain ones: `_vectorized`
                return ids  # a character or escape is unfinished: the grammar allows only what finishes it
            return np.union1d(ids[tables.has_quote[ids]], np.intersect1d(ids, stops))
        if top[0] == "num":
            return ids if plan.signed(plan.checks(top[2])) else ids[tables.ends_number[ids]]
        return ids

    def _prefix_rules(self, top: tuple) -> _Strings | None:
        if top[4]:
            return None
        return self._plan.strings(self._plan.checks(top[2]))

    def _vector_ok(self, top: tuple) -> bool:
        """Whether the open string's content so far is whole (no escape or character pending), so that
        its prefix is checked and plain pieces can be judged by table."""
        return top[1] + 1 <= len(self._text) and self._current(top[1]) is not None

    def _vectorized(self, ids):
        """Plain pieces inside a checked string, judged by table (the same rule `_feed` applies): the ids
        refused, as a numpy array."""
        import numpy as np

        top = self._stack[-1]
        rules = self._prefix_rules(top) if top[0] == "str" else None
        if rules is None or not self._vector_ok(top):
            return np.zeros(0, dtype=np.int64)
        tables = self._plan.tables
        plain = ids[tables.plain_len[ids] >= 0]
        current = self._current(top[1])
        dead = np.zeros(len(plain), dtype=bool)
        if rules.max_length is not None:
            dead |= tables.plain_len[plain] + len(current) > rules.max_length
        tails = [i for i, t in enumerate(plain) if int(t) in tables.plain_tail] if rules.choices else []
        for choices in rules.choices:
            viable = set()
            for choice in choices:
                if choice.startswith(current):
                    rest = choice[len(current) :]
                    for k in range(len(rest) + 1):
                        viable.update(tables.by_text.get(rest[:k], ()))
            dead |= ~np.isin(plain, np.fromiter(viable, dtype=np.int64, count=len(viable)))
            for i in tails:  # pieces that end inside a character: is it the next one of some choice?
                t = int(plain[i])
                text = current + tables.plain_text[t]
                dead[i] = not any(_goes_on(c, text, tables.plain_tail[t]) for c in choices)
        for p, closed in zip(rules.patterns, rules.ascii_closed):
            dead |= self._pattern_dead(plain, current, p, closed, dead)
        return plain[dead]

    def _pattern_dead(self, plain, current: str, pattern, closed: bool, already):
        """Which plain pieces make the string a prefix no `pattern` match starts with. Pieces are judged by
        their first character first (one search per distinct character, none for a non-ASCII one where the
        pattern takes only ASCII), then prefix by prefix, each prefix searched once."""
        import numpy as np

        tables = self._plan.tables
        firsts = tables.first[plain]
        out = np.zeros(len(plain), dtype=bool)
        codes = np.unique(firsts[(firsts >= 0) & ~already])
        if closed:
            out |= firsts >= 0x80
            codes = codes[codes < 0x80]
        dead_codes = [c for c in codes.tolist() if pattern.search(current + chr(c), partial=True) is None]
        out |= np.isin(firsts, np.asarray(dead_codes, dtype=np.int64))
        dead: dict[str, bool] = {}
        for i in np.flatnonzero(~out & ~already):
            t = int(plain[i])
            text = tables.plain_text[t]
            for k in range(2, len(text) + 1):
                head = text[:k]
                known = dead.get(head)
                if known is None:
                    known = dead[head] = pattern.search(current + head, partial=True) is None
                if known:
                    out[i] = True
                    break
            if not out[i] and t in tables.plain_tail:
                out[i] = (not text and pattern.search(current, partial=True) is None) or _pattern_blocked(
                    pattern, closed, current + text, tables.plain_tail[t], None
                )
        return out


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


def _string_state(raw: bytes) -> tuple[str, bytes]:
    """(the characters of a JSON string's content so far, the unfinished escape or UTF-8 character at its
    end: b"" where there is none). Bytes no UTF-8 reader takes are left out (the grammar allows none)."""
    cut, i, n = len(raw), 0, len(raw)
    while i < n:
        if raw[i] == 92:
            need = 6 if raw[i + 1 : i + 2] == b"u" else 2
            if i + need > n:
                cut = i
                break
            i += need
        else:
            i += 1
    if cut == n:  # an unfinished character: a lead byte at most 3 bytes from the end, its sequence cut short
        for back in range(1, min(3, n) + 1):
            b = raw[n - back]
            if b >= 0xC0:
                if back < (2 if b < 0xE0 else 3 if b < 0xF0 else 4):
                    cut = n - back
                break
            if b < 0x80:
                break
    head, tail = raw[:cut], raw[cut:]
    try:
        return json.loads('"' + head.decode("utf-8", errors="ignore") + '"'), tail
    except ValueError:
        return "", tail


def _string_dead(rules: _Strings, content: str, tail: bytes = b"") -> str | None:
    """Why a string that starts with `content` (then `tail`, the bytes of one unfinished escape or character)
    can never meet `rules`; None while it still can."""
    # one more character, unless an escape may be the low half of a surrogate pair the content ends with
    pending = 1 if tail and not (tail[:1] == b"\\" and content[-1:] and 0xD800 <= ord(content[-1]) < 0xDC00) else 0
    if rules.max_length is not None and len(content) + pending > rules.max_length:
        return f"longer than `maxLength` {rules.max_length}"
    for choices in rules.choices:
        if not any(_goes_on(c, content, tail) for c in choices):
            return "not the start of any `enum`/`const` value"
    escaped = _escaped(tail) if tail[:1] == b"\\" else None
    for p, closed in zip(rules.patterns, rules.ascii_closed):
        if p.search(content, partial=True) is None:
            return f"can no longer match `pattern` {p.pattern!r}"
        if tail and _pattern_blocked(p, closed, content, tail, escaped):
            return f"can no longer match `pattern` {p.pattern!r} (with the character being written)"
    return None


def _pattern_blocked(p, closed: bool, content: str, tail: bytes, escaped) -> bool:
    """Whether no character the unfinished `tail` can still become lets `p` match on."""
    if tail[:1] != b"\\":
        return closed  # a non-ASCII character, which a pattern of ASCII classes and literals never takes
    if isinstance(escaped, list):
        return all(p.search(content + ch, partial=True) is None for ch in escaped)
    if isinstance(escaped, tuple):
        return closed and escaped[0] >= 0x80
    return False


def _escaped(tail: bytes):
    """What an unfinished escape can still produce: the characters (a list, when few), a (lowest, highest)
    code point range, or None (any character)."""
    if tail[:2] != b"\\u":
        return None
    digits = tail[2:].decode("ascii", errors="ignore")
    low, high = int(digits.ljust(4, "0"), 16), int(digits.ljust(4, "f"), 16)
    return [chr(c) for c in range(low, high + 1)] if high - low < 256 else (low, high)


def _goes_on(choice: str, content: str, tail: bytes) -> bool:
    """Whether `choice` starts with `content` and then, where a character is unfinished, with its bytes."""
    if not choice.startswith(content):
        return False
    if not tail:
        return True
    rest = choice[len(content) :]
    if tail[:1] != b"\\":
        return rest.encode("utf-8").startswith(tail)
    if not rest:
        return False
    escaped = _escaped(tail)
    if isinstance(escaped, list):
        return rest[0] in escaped
    return escaped is None or escaped[0] <= ord(rest[0]) <= escaped[1]
