"""Grammar test files: a grammar and cases that it must accept or reject, run on backends.

    grammar: json.gbnf            # a path relative to this file, '@name' (quoted), or inline:
    # grammar: {kind: ebnf, text: 'root ::= "a"+'}
    cases:
      - {input: '{"a": 1}', accept: true, description: one member}
      - {input: '{"a": }', accept: false}

Each case is checked on every backend through every spelling in `sgcli.backends.matching`:
the bytes (the whole string, independent of tokenization) and the real tokenizations
("canonical": the tokenizer's own encoding; "longest": greedy longest match), the latter
two token by token against the mask as in decoding. A case passes on a backend when
every spelling agrees with `accept`. A JSON Schema runs as generation does: the backend's
grammar plus sgcli's schema checker for the keywords the grammar leaves unenforced.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sgcli.backends import get_backend, unsupported_reason
from sgcli.backends.bounded import CompileLimitError
from sgcli.backends.compile_cache import compile_cached
from sgcli.backends.matching import feed, tokenizations
from sgcli.backends.schema_checker import with_checker
from sgcli.constraints.reading import join_surrogate_pairs, read_text
from sgcli.constraints.schema_input import check_schema
from sgcli.constraints.sources import from_file, resolve_library_tests, spec_from_text
from sgcli.constraints.spec import MAX_JSON_DEPTH, ConstraintSpec, Kind, too_deep
from sgcli.errors import Location, UserError, did_you_mean
from sgcli.grammar_dev.dryrun import independent_verdict, refused_valid_note
from sgcli.limits import deep_call
from sgcli.lone_surrogates import LONE_SURROGATE, LONE_SURROGATE_HINT, lone_surrogate

CASE_KEYS = {"input", "accept", "description"}
KIND_ALIASES = {"gbnf": Kind.EBNF, "schema": Kind.JSON_SCHEMA, "json": Kind.JSON_SCHEMA}


def parse_kind(value: str, location: Location | None = None) -> Kind:
    """'ebnf', 'gbnf', 'json_schema' (or 'json-schema'), 'schema', 'lark', 'regex', ... -> Kind."""
    try:
        name = value.lower().replace("-", "_")
        return KIND_ALIASES.get(name) or Kind(name)
    except (ValueError, AttributeError):
        names = [k.value for k in Kind if k is not Kind.NONE]
        raise UserError(
            f"unknown grammar kind '{value}'." + did_you_mean(str(value), [*names, *KIND_ALIASES]),
            location=location,
            hint="one of: " + ", ".join(names) + " (or " + ", ".join(KIND_ALIASES) + ")",
        ) from None


@dataclass
class Case:
    index: int
    input: str
    accept: bool
    description: str
    line: int | None = None


@dataclass
class Suite:
    path: str
    spec: ConstraintSpec
    cases: list[Case]


@dataclass
class Outcome:
    """One case on one backend."""

    case: Case
    backend: str
    passed: bool
    checked: list[str] = field(default_factory=list)  # spellings checked: bytes, canonical, longest
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. a token the mask forbids but accept() takes
    independent: str | None = None  # on a failure: what the independent check says of the input


@dataclass
class BackendRun:
    name: str
    status: str  # "ran", "error" (did not compile), "limit" (its compile ran past one), "unsupported", "unavailable"
    message: str | None = None
    cache: str | None = None
    warnings: list[str] = field(default_factory=list)  # what its compile weakened or ignored, as `masks` prints


@dataclass
class Report:
    suite: Suite
    backends: list[BackendRun]
    outcomes: list[Outcome]

    @property
    def ok(self) -> bool:
        ran = [b for b in self.backends if b.status == "ran"]
        return (
            bool(ran) and not any(b.status == "error" for b in self.backends) and all(o.passed for o in self.outcomes)
        )


def load_suite(path: str) -> Suite:
    """Read and check a test file; every mistake is a UserError at its line:col."""
    import yaml

    if path.startswith("@"):  # a library grammar's own test file
        path = resolve_library_tests(path)
    text, origin = read_text(path, what="test file")
    loader = _bounded_loader(origin)(text)
    try:
        node = deep_call(loader.get_single_node, frames=_FRAMES_PER_LEVEL * MAX_JSON_DEPTH + 100)
        _join_surrogate_pairs(node)
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = Location(origin, mark.line + 1, mark.column + 1) if mark else Location(origin)
        problem = str(getattr(exc, "problem", None) or exc)
        hint = "quote it: grammar: '@name' (YAML reserves @)" if "'@'" in problem else None
        raise UserError(f"malformed YAML: {problem}", location=where, hint=hint) from None
    finally:
        loader.dispose()

    def at(*keys, at_key: bool = False) -> Location:
        return Location(origin, *_position(node, keys, at_key=at_key))

    surrogate = _surrogate_node(node)
    if surrogate is not None:  # YAML's "\\ud800" escapes half a pair: no tokenizer or grammar library takes it
        mark = surrogate.start_mark
        raise UserError(
            LONE_SURROGATE, location=Location(origin, mark.line + 1, mark.column + 1), hint=LONE_SURROGATE_HINT
        )
    duplicate = _duplicate_key(node)
    if duplicate is not None:  # YAML (and json) keep the last silently: a case would test another input
        key, first = duplicate
        mark = key.start_mark
        raise UserError(
            f"duplicate key '{key.value}' (first at {first.start_mark.line + 1}:{first.start_mark.column + 1})",
            location=Location(origin, mark.line + 1, mark.column + 1),
            hint="a mapping takes each key once: remove one, or make a case of each",
        )
    if not isinstance(data, dict):
        raise UserError("a test file is a mapping with 'grammar' and 'cases'", location=at())
    unknown = set(data) - {"grammar", "cases", "description"}
    if unknown:
        raise UserError(
            f"unknown key '{sorted(unknown)[0]}'",
            location=at(sorted(unknown)[0], at_key=True),
            hint="a test file has: grammar, cases, description",
        )
    if "grammar" not in data:
        raise UserError("no 'grammar' given", location=at(), hint="grammar: path/to/file.gbnf, @name, or {kind, text}")
    spec = _grammar(data["grammar"], Path(origin).parent, origin, at)
    cases = data.get("cases")
    if not isinstance(cases, list) or not cases:
        raise UserError("'cases' must be a non-empty list", location=at("cases") if "cases" in data else at())
    return Suite(origin, spec, [_case(i, c, at) for i, c in enumerate(cases)])


_FRAMES_PER_LEVEL = 3  # compose_node (ours, then PyYAML's) and compose_{sequence,mapping}_node


def _bounded_loader(origin: str):
    """PyYAML's SafeLoader, refusing a sequence or mapping nested past MAX_JSON_DEPTH at its first
    deep one: the composer recurses per level (a RecursionError, exit 3, past ~480 levels), so it runs
    with room for that bound (`deep_call`). The depth is JSON's: a schema may be written as YAML."""
    import yaml

    class Bounded(yaml.SafeLoader):
        depth = 0

        def compose_node(self, parent, index):
            event = self.peek_event()
            nested = isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent))
            self.depth += nested
            try:
                if self.depth > MAX_JSON_DEPTH:
                    mark = event.start_mark
                    raise UserError(
                        too_deep("YAML"),
                        location=Location(origin, mark.line + 1, mark.column + 1),
                        hint="nest less there (a schema can move nested parts into $defs and refer to them with $ref)",
                    )
                return super().compose_node(parent, index)
            finally:
                self.depth -= nested

    return Bounded


def _nodes(node) -> Iterator:
    """Every node of a YAML document (mappings' keys too), each once, in document order: an alias is
    the same node again (`&a [*a]` looped, nested ones blew up)."""
    stack, seen = ([node] if node is not None else []), set()
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        if isinstance(item.value, list):
            for part in reversed(item.value):
                stack.extend(reversed(part) if isinstance(part, tuple) else [part])


def _join_surrogate_pairs(node) -> None:
    """Make each escaped surrogate pair (`"\\ud83d\\ude00"`, as JSON writes one) the character it means:
    PyYAML keeps the halves apart. A lone surrogate stays, for `_surrogate_node` to refuse."""
    for item in _nodes(node):
        if isinstance(item.value, str):
            item.value = join_surrogate_pairs(item.value)


def _surrogate_node(node):
    """The first scalar node (key or value) whose text holds a lone surrogate, else None."""
    return next((n for n in _nodes(node) if isinstance(n.value, str) and lone_surrogate(n.value) is not None), None)


def _duplicate_key(node):
    """(the repeated key node, its first occurrence) of the first mapping that repeats a key, else None."""
    for item in _nodes(node):
        if not isinstance(item.value, list):
            continue
        keys: dict = {}
        for part in item.value:
            if not isinstance(part, tuple):
                continue
            key = part[0]
            if isinstance(key.value, str) and key.tag != "tag:yaml.org,2002:merge":
                if (key.tag, key.value) in keys:
                    return key, keys[key.tag, key.value]
                keys[key.tag, key.value] = key
    return None


def _position(node, keys, *, at_key: bool = False) -> tuple[int | None, int | None]:
    """line, col (1-based) of the YAML node reached by following `keys` (mapping keys, list
    indices); with `at_key`, of the last mapping key itself rather than its value."""
    for n, key in enumerate(keys):
        if node is None:
            break
        if isinstance(node.value, list) and node.value and isinstance(node.value[0], tuple):
            last = at_key and n == len(keys) - 1
            match = [k if last else v for k, v in node.value if getattr(k, "value", None) == key]
            node = match[0] if match else node
        elif isinstance(node.value, list) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
    if node is None:
        return 1, 1
    return node.start_mark.line + 1, node.start_mark.column + 1


def _grammar(value, base: Path, origin: str, at) -> ConstraintSpec:
    if isinstance(value, str):
        target = value if value.startswith("@") or Path(value).is_absolute() else str(base / value)
        try:
            return from_file(target)
        except UserError as exc:
            if exc.location is None or exc.location.path is None:
                exc.location = at("grammar")
            raise
    if not isinstance(value, dict) or "kind" not in value or "text" not in value:
        raise UserError("'grammar' must be a path, @name, or a mapping with 'kind' and 'text'", location=at("grammar"))
    unknown = sorted(set(value) - {"kind", "text"}, key=str)
    if unknown:  # `json_whitespace: compact` beside them was ignored without a word
        key = str(unknown[0])
        raise UserError(
            f"grammar: unknown key '{key}'." + did_you_mean(key, ("kind", "text")),
            location=at("grammar", unknown[0], at_key=True),
            hint="an inline grammar has: kind, text",
        )
    kind = parse_kind(str(value["kind"]), at("grammar", "kind"))
    text = value["text"]
    if kind is Kind.JSON_SCHEMA and isinstance(text, (dict, list, bool)):
        text = json.dumps(text, indent=2)  # a schema may be written as YAML
    if not isinstance(text, str):
        raise UserError("grammar 'text' must be a string", location=at("grammar", "text"))
    where = at("grammar", "text")
    spec = spec_from_text(kind, text, f"{origin} (grammar text from line {where.line})", at=where)
    if kind is Kind.JSON_SCHEMA:
        check_schema(spec)
    return spec


def _case(index: int, value, at) -> Case:
    if not isinstance(value, dict):
        raise UserError(f"case {index + 1} must be a mapping with 'input' and 'accept'", location=at("cases", index))
    unknown = set(value) - CASE_KEYS
    if unknown:
        key = sorted(unknown)[0]
        raise UserError(
            f"case {index + 1}: unknown key '{key}'",
            location=at("cases", index, key, at_key=True),
            hint="a case has: input, accept, description",
        )
    if not isinstance(value.get("input"), str):
        raise UserError(
            f"case {index + 1}: 'input' must be a string (quote it in YAML)",
            location=at("cases", index, "input") if "input" in value else at("cases", index),
        )
    if not isinstance(value.get("accept"), bool):
        raise UserError(
            f"case {index + 1}: 'accept' must be true or false",
            location=at("cases", index, "accept") if "accept" in value else at("cases", index),
        )
    line = at("cases", index).line
    return Case(index, value["input"], value["accept"], str(value.get("description") or ""), line)


def check_case(compiled, case: Case) -> Outcome:
    """Run one case through every spelling of its input on one compiled grammar."""
    outcome = Outcome(case, compiled.backend, True)
    spellings = tokenizations(compiled.vocab, case.input)
    if spellings["longest"] == spellings["canonical"]:
        spellings.pop("longest")  # the same tokens: one check is enough
    for how, ids in spellings.items():
        if ids is None:
            continue  # the vocabulary cannot spell it this way (no single-byte token for some byte)
        outcome.checked.append(how)
        result = feed(compiled, ids, check_mask=how != "bytes")
        outcome.notes += [f"{how}: {note}" for note in result.notes]
        if result.inconsistent:
            outcome.passed = False
            outcome.problems.append(f"{how}: {result.problem} (a backend bug: mask and matcher disagree)")
        elif result.error is not None:  # no verdict on the text: the backend failed on the grammar
            outcome.passed = False
            outcome.problems.append(f"{how}: {result.problem}")
        elif result.accepted != case.accept:
            outcome.passed = False
            what = result.problem if not result.accepted else "accepted"
            outcome.problems.append(f"{how}: {what} (expected {'accept' if case.accept else 'reject'})")
    if not outcome.passed and not outcome.problems[0].endswith("(a backend bug: mask and matcher disagree)"):
        outcome.independent = _independent_note(compiled, case)
    return outcome


def _independent_note(compiled, case: Case) -> str | None:
    """What the independent check `generate` uses says of a failing case's input: a valid input a backend
    rejects is one it spells another way (`"\\u0041"`), an invalid one it was expected to accept is the
    case's own mistake."""
    verdict = independent_verdict(compiled, case.input)
    if verdict.valid is True and case.accept:
        return refused_valid_note(compiled, case.input, verdict.validated_by)
    if verdict.valid is False and case.accept:
        return f"{verdict.validated_by} finds the input invalid too ({verdict.errors[0]}): is `accept: true` right?"
    if verdict.valid is False and not case.accept:
        return f"{verdict.validated_by} finds the input invalid ({verdict.errors[0]}), and {compiled.backend} took it"
    if verdict.valid is True and not case.accept:
        return f"{verdict.validated_by} finds the input valid too: is `accept: false` right?"
    return None


def run_suite(suite: Suite, names: list[str], vocab, *, use_cache: bool | None = None) -> Report:

    runs, outcomes = [], []
    for name in names:
        impl = get_backend(name)
        reason = unsupported_reason(impl, suite.spec)
        if reason is not None:
            runs.append(BackendRun(name, "unsupported", f"{name} does not support {reason}"))
            continue
        missing = impl.unavailable_reason()
        if missing:
            runs.append(BackendRun(name, "unavailable", missing))
            continue
        try:
            result = compile_cached(impl, suite.spec, vocab, use_cache=use_cache)
        except CompileLimitError as exc:  # the user's to raise, not a failing grammar: exit 2 once every file ran
            runs.append(BackendRun(name, "limit", exc.one_line()))
            continue
        except UserError as exc:
            runs.append(BackendRun(name, "error", exc.one_line()))
            continue
        warnings = list(dict.fromkeys(w.message for w in result.compiled.warnings))  # one per message
        runs.append(BackendRun(name, "ran", cache=result.status, warnings=warnings))
        checked = with_checker(result.compiled)  # what generation decodes with: grammar + sgcli's schema checker
        outcomes += [check_case(checked, case) for case in suite.cases]
    return Report(suite, runs, outcomes)
