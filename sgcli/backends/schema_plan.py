"""The check plan of one compiled schema, shared by its matchers: which subschemas apply at each JSON
pointer, which of them sgcli validates when a value completes (the anchors), and the necessary
conditions it can test earlier (types, keys, item counts, string rules).
"""

from __future__ import annotations

import re
import warnings

from sgcli.backends.json_strings import StringRules, add_string_rules, prefix_regex, vocab_tables
from sgcli.backends.number_prefix import BOUNDS, digits_refused
from sgcli.backends.schema_doc import SchemaDoc, escape_pointer, fragment
from sgcli.constraints.formats import format_checker
from sgcli.constraints.regex_dialects import SCHEMA
from sgcli.tokenizers.vocab import Vocab

# the keywords whose subschemas a container's children are read through
PROJECTED = ("type", "properties", "patternProperties", "additionalProperties", "propertyNames", "maxProperties")
PROJECTED += ("items", "prefixItems", "additionalItems", "maxItems", "uniqueItems")


class CheckPlan:
    """Anchors (subschemas the checker validates), their validators, and the schema nodes of each
    JSON position, computed once per compiled schema and cached."""

    def __init__(self, schema, anchors: list[str], vocab: Vocab):
        self.doc = SchemaDoc(schema)
        self.root_validator = self.doc.cls(schema, format_checker=format_checker(self.doc.cls))
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
        self.has_contains = "contains" in self.doc.cls.VALIDATORS  # draft 6 on
        # minContains/maxContains: 2019-09 on (jsonschema reads them inside `contains`, so no key of their own)
        self.counts_contains = "dependentRequired" in self.doc.cls.VALIDATORS
        self.root_nodes = self.closure(frozenset({""}))

    # -- validators --

    def validator(self, pointer: str, projected: bool = False):
        key = (pointer, projected)
        found = self._validators.get(key)
        if found is None:
            if projected:
                node = self.doc.nodes[pointer]
                found = self.root_validator.evolve(schema={k: node[k] for k in PROJECTED if k in node})
            elif pointer == "":
                found = self.root_validator
            else:
                found = self.root_validator.evolve(schema={"$ref": "#" + fragment(pointer)})
            self._validators[key] = found
        return found

    def valid(self, pointer: str, value, projected: bool = False) -> bool:
        """jsonschema's verdict. Where the *value* makes it fail (a number whose quotient by a float
        `multipleOf` overflows, nesting past Python's stack), the value is refused: jsonschema cannot
        call it valid, and the other keywords it would have judged (a `not` beside) went unchecked.
        Where the *schema* cannot be applied (an unresolvable `$ref`, a pattern Python cannot compile),
        True: that was listed as enforced by nothing before generation started."""
        try:
            return self.validator(pointer, projected).is_valid(value)
        except (ArithmeticError, ValueError, RecursionError):  # OverflowError on 1E999 with multipleOf 0.5
            return False
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
                out.append(f"{p}/properties/{escape_pointer(key)}")
            patterns = node.get("patternProperties")
            if isinstance(patterns, dict):
                out += [f"{p}/patternProperties/{escape_pointer(regex)}" for regex in patterns if _search(regex, key)]
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

    def strings(self, pointers: tuple[str, ...]) -> StringRules | None:
        """The prefix-checkable string rules of the anchors (None: nothing to check)."""
        if pointers in self._strings:
            return self._strings[pointers]
        rules = StringRules()
        for p in pointers:
            node = self._applies(p)
            if node is not None:
                add_string_rules(rules, node)
        found = rules if (rules.max_length is not None or rules.choices or rules.patterns) else None
        self._strings[pointers] = found
        return found

    def open_string_rules(self, frame: tuple) -> StringRules | None:
        """The rules an open string's content (`frame`: the reader's "str" frame) is checked against as a
        prefix: a value's, or a property name's; None outside a string or where nothing checks it."""
        if frame[0] != "str":
            return None
        anchors = self.checks(frame[2])
        return self.key_rules(anchors) if frame[4] else self.strings(anchors)

    def key_rules(self, pointers: tuple[str, ...]) -> StringRules | None:
        """The prefix-checkable rules on a property name of an object under these anchors: the names
        `additionalProperties: false` or `unevaluatedProperties: false` leave, and `propertyNames`'
        own string keywords. A key is checked as it is written, so no key runs on past every name
        the schema allows (a random model wrote 60 tokens of one key under `unevaluatedProperties`)."""
        cache_key = ("key", pointers)
        if cache_key in self._strings:
            return self._strings[cache_key]
        rules = StringRules()
        for p in pointers:
            node = self._applies(p)
            if node is None:
                continue
            names = self._listed_names(p, node)
            if names is not None:
                rules.choices.append(names[0])
            else:
                either = names_or_patterns(node)
                if either is not None:
                    rules.patterns.append(either)
                    rules.ascii_closed.append(False)
            names_node = self._applies(f"{p}/propertyNames")  # None beside a draft-7 $ref, which overrides it
            if names_node is not None:
                add_string_rules(rules, names_node)
        found = rules if (rules.max_length is not None or rules.choices or rules.patterns) else None
        self._strings[cache_key] = found
        return found

    def _listed_names(self, pointer: str, node: dict) -> tuple[frozenset[str], str] | None:
        """(every property name the object may have, the keyword that says so), where a keyword closes
        the object to a finite set of names; None where any name may still be valid."""
        patterns = node.get("patternProperties")
        if node.get("additionalProperties") is False and not (isinstance(patterns, dict) and patterns):
            props = node.get("properties")
            return frozenset(props if isinstance(props, dict) else ()), "additionalProperties: false"
        names = self._unevaluated_names(pointer, node)
        return None if names is None else (names, "unevaluatedProperties: false")

    def _unevaluated_names(self, pointer: str, node: dict) -> frozenset[str] | None:
        """The names `unevaluatedProperties: false` at `pointer` leaves, where they are a finite set."""
        if node.get("unevaluatedProperties") is False and "unevaluatedProperties" in self.doc.cls.VALIDATORS:
            return self._evaluable_names(pointer)
        return None

    def _evaluable_names(self, pointer: str) -> frozenset[str] | None:
        """The property names any subschema applied in place at `pointer` may evaluate (its `properties`
        through $ref, allOf/anyOf/oneOf, if/then/else and dependentSchemas: a superset of what one
        instance's passing branches evaluate); None where a pattern, an additionalProperties schema, a
        dynamic reference or a reference outside the file may evaluate any name."""
        names: set[str] = set()
        seen: set[str] = set()
        stack = [pointer]
        while stack:
            p = stack.pop()
            node = self.doc.nodes.get(p)
            if p in seen or not isinstance(node, dict):
                continue  # `true` evaluates nothing; `false` fails anyway
            seen.add(p)
            if p != pointer and node.get("unevaluatedProperties", False) is not False:
                return None
            patterns = node.get("patternProperties")
            if node.get("additionalProperties", False) is not False or (isinstance(patterns, dict) and patterns):
                return None
            if "$dynamicRef" in node or "$recursiveRef" in node:
                return None
            if isinstance(node.get("properties"), dict):
                names.update(node["properties"])
            if isinstance(node.get("$ref"), str):
                target, _ = self.doc.resolve(p, node["$ref"])
                if target is None:
                    return None
                stack.append(target)
            for key in ("allOf", "anyOf", "oneOf"):
                if isinstance(node.get(key), list):
                    stack += [f"{p}/{key}/{i}" for i in range(len(node[key]))]
            stack += [f"{p}/{key}" for key in ("if", "then", "else") if key in node]
            if isinstance(node.get("dependentSchemas"), dict):
                stack += [f"{p}/dependentSchemas/{escape_pointer(k)}" for k in node["dependentSchemas"]]
        return frozenset(names)

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

    def digits_refused(self, pointers: tuple[str, ...], raw: bytes) -> str | None:
        """Why an integer written so far as `raw`, growing by digits alone, can meet an anchor's bounds no
        more (`number_prefix.digits_refused`)."""
        nodes = [(p, node) for p, node in zip(pointers, map(self._applies, pointers)) if node and BOUNDS & node.keys()]
        return digits_refused(nodes, raw)

    def contains_refused(self, pointer: str, node: dict, items: list) -> str | None:
        """Why an array that starts with `items` can no longer meet the anchor's `contains` counts: more
        matches than `maxContains`, or fewer places left under `maxItems` than `minContains` still needs
        (`[8,9,8,4,8,5` under minContains 2 and maxItems 6 took every place, then found no way to end)."""
        low = node.get("minContains", 1) if self.counts_contains else 1
        high = node.get("maxContains") if self.counts_contains else None
        matched = sum(1 for item in items if self.valid(f"{pointer}/contains", item))
        if _number(high) and matched > high:
            return f"has {matched} items that `contains` matches, past `maxContains` {high} at {pointer or '/'}"
        most = node.get("maxItems")
        if _number(most) and _number(low) and matched + max(0, most - len(items)) < low:
            return (
                f"has {matched} items that `contains` matches and room for {max(0, most - len(items))} more "
                f"under `maxItems` {most}: fewer than `minContains` {low} at {pointer or '/'}"
            )
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
            names = self._unevaluated_names(p, node)  # additionalProperties: false, patterns too, just above
            if names is not None and key not in names:
                return f"`unevaluatedProperties: false` at {p or '/'}"
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


_regex_cache: dict = {}


def _search(pattern: str, text: str) -> bool:
    compiled = _regex_cache.get(pattern)
    if compiled is None:
        try:
            with warnings.catch_warnings():  # `&&`, a nested `[`: read as jsonschema reads them, without a word
                warnings.simplefilter("ignore", FutureWarning)
                compiled = re.compile(pattern)
        except (re.error, RecursionError, OverflowError):
            compiled = False
        _regex_cache[pattern] = compiled
    return bool(compiled and compiled.search(text))


def names_or_patterns(node: dict):
    """One pattern for the names an object closed by `additionalProperties: false` beside
    `patternProperties` takes (a listed name, or one matching a pattern), checkable on a prefix: a
    random model wrote keys like `{"{generational ...` under `^x[01]$` until --max-tokens, the name
    refused only once complete. None where some pattern is not anchored at the start (any prefix can
    still match it) or the patterns cannot be read for prefixes."""
    import regex

    patterns = node.get("patternProperties")
    if node.get("additionalProperties") is not False or not isinstance(patterns, dict) or not patterns:
        return None
    if not all(isinstance(k, str) and k.startswith("^") for k in patterns):
        return None
    props = node.get("properties")
    listed = [regex.escape(n) for n in (props if isinstance(props, dict) else ())]
    either = "^(?:" + "|".join(listed + [f"(?:{k[1:]})" for k in patterns]) + ")"
    return prefix_regex(either, SCHEMA)
