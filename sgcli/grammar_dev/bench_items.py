"""`sgcli bench`'s input: the items to measure, read from one file, a folder or JSONL lines, each with the
texts it must accept (given, a sibling NAME.test.yaml's accepted cases, or built from a JSON Schema). A file
or line that cannot be read becomes an item carrying its error, so the rest is still measured."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from sgcli.constraints.reading import json_surrogate_col, read_text
from sgcli.constraints.schema_input import check_schema
from sgcli.constraints.sources import from_file, kind_from_extension, resolve_library, spec_from_text
from sgcli.constraints.spec import ConstraintSpec, Kind, TooDeep, loads_within_depth
from sgcli.errors import Location, UserError, did_you_mean
from sgcli.grammar_dev.grammar_tests import load_suite, parse_kind
from sgcli.lint.schema_instances import Impossible, InstanceBuilder
from sgcli.lone_surrogates import LONE_SURROGATE, LONE_SURROGATE_HINT, lone_surrogate_in


@dataclass
class Item:
    """One grammar to measure, with the texts it must accept."""

    name: str
    spec: ConstraintSpec | None
    instances: list[str]
    source: str  # "given", "test file", "generated" or "none"
    where: str | None = None  # "file:line" of a JSONL item: error positions inside its re-serialized text mean nothing
    # why the file or line could not be read (spec is None then): reported per backend as an "input error",
    # and the other items are still measured
    error: UserError | None = None
    # where each instance comes from, for a rejection to name it as `sgcli test` does: "x.test.yaml:6: case 4
    # '1.0'", "items.jsonl:3: instance 2" (None: "NAME: instance N", N counting from 1)
    places: list[str] | None = None

    def place(self, index: int) -> str:
        return self.places[index] if self.places else f"{self.name}: {self.source} instance {index + 1}"


def load_items(path: str) -> list[Item]:
    """A folder of grammar files (kind from extension), one such file, or a JSONL file of items."""
    if path == "-":
        raise UserError(
            "bench does not read stdin ('-'): it times grammar files, each compiled afresh",
            hint="save it to a schema or grammar file, or give a folder of them, or a .jsonl file",
        )
    if path.startswith("@"):  # a grammar of the library in sgcli/grammars/
        path = resolve_library(path)
    p = Path(path)
    if p.is_dir():
        return _folder_items(p)
    if not p.exists():
        raise UserError(
            f"bench input not found: {path}", hint="give a schema or grammar file, a folder of them, or a .jsonl file"
        )
    if p.suffix.lower() == ".jsonl":
        return _jsonl_items(p)
    try:
        kind_from_extension(path)
    except UserError as exc:
        raise UserError(
            f"bench input {path} is neither a schema or grammar file, a folder, nor a .jsonl file",
            hint=exc.hint.split(", or the explicit flag")[0] + ", a folder of such files, or a .jsonl file",
        ) from None
    return [_file_item(p)]


def _folder_items(folder: Path) -> list[Item]:
    items = []
    for f in sorted(x for x in folder.iterdir() if x.is_file() and not x.name.endswith((".test.yaml", ".test.yml"))):
        try:
            kind_from_extension(str(f))
        except UserError:
            continue  # READMEs, notes: not grammars
        try:
            items.append(_file_item(f))
        except UserError as exc:
            items.append(_unreadable(f.name, exc))
    if not items:
        raise UserError(f"no schema or grammar files in {folder}", hint="files are picked by extension, as in compile")
    return items


def _unreadable(name: str, exc: UserError) -> Item:
    return Item(name, None, [], "none", error=exc)


def _file_item(f: Path) -> Item:
    """One grammar file, with the accepted cases of its NAME.test.yaml or, for a schema, built instances."""
    spec = from_file(str(f))
    given, places = _test_file_instances(f, spec)
    if given:
        return Item(f.name, spec, given, "test file", places=places)
    return _with_generated(Item(f.name, spec, [], "none"))


def _test_file_instances(grammar: Path, spec: ConstraintSpec) -> tuple[list[str], list[str]]:
    """The accepted cases of a sibling NAME.test.yaml (as in sgcli/grammars/), if there is one, each judged
    (`_judged`) at its case's line; and where each is, as `sgcli test` names a case."""
    stem = grammar.name.split(".")[0]
    test = grammar.with_name(f"{stem}.test.yaml")
    if not test.is_file():
        return [], []
    cases = [c for c in load_suite(str(test)).cases if c.accept]
    _judged(spec, [c.input for c in cases], [Location(str(test), c.line) for c in cases])
    places = [
        f"{test}:{c.line}: case {c.index + 1} {c.input!r}" if c.line else f"{test}: case {c.index + 1}" for c in cases
    ]
    return [c.input for c in cases], places


def _judged(spec: ConstraintSpec, instances: list[str], places: list[Location]) -> None:
    """Each given instance judged by the check generate's outputs get (`sgcli.validation`, independent of
    every backend) before a backend walks it: one it rejects is the user's to fix, an input error (exit 2)
    at its place, never "valid instance rejected" blamed on a backend. One it cannot judge is walked."""
    from sgcli.validation.validate import validate

    for i, (text, at) in enumerate(zip(instances, places)):
        verdict = validate(spec, text, finish_reason="stop", grammar_complete=True)
        if verdict.valid is False:
            raise UserError(
                f"instance {i} is not valid: {verdict.errors[0]}",
                location=at,
                hint="fix or drop it: bench times the masks along texts the grammar accepts",
            )


def _with_generated(item: Item) -> Item:
    """For a JSON Schema without instances: the minimal and the full instance the builder proposes."""
    if item.spec.kind is not Kind.JSON_SCHEMA or item.instances:
        return item

    schema = json.loads(item.spec.text)
    texts = []
    for full in (False, True):
        try:
            text = json.dumps(InstanceBuilder(schema, full=full).build(), ensure_ascii=False)
        except (Impossible, RecursionError):
            continue
        if text not in texts:
            texts.append(text)
    return Item(item.name, item.spec, texts, "generated" if texts else "none", item.where, places=item.places)


def _jsonl_items(path: Path) -> list[Item]:
    text, origin = read_text(str(path), what="bench file")
    items = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(_jsonl_item(path, line, Location(origin, n, 1)))
        except UserError as exc:  # this line is reported as an input error; the others are measured
            items.append(_unreadable(f"{path.name}:{n}", exc))
    if not items:
        raise UserError(f"{origin} has no items", hint='one JSON object a line: {"schema": {...}, "instances": [...]}')
    return _lines_for_repeated_names(items)


def _lines_for_repeated_names(items: list[Item]) -> list[Item]:
    """A name given to several lines gets each one's line ("a (items.jsonl:3)"): their records and rejections
    would otherwise read as one item's."""
    seen = [i.name for i in items]
    for item in items:
        if seen.count(item.name) > 1 and item.where:
            item.name = f"{item.name} ({Path(item.where).name})"
    return items


def _jsonl_item(path: Path, line: str, at: Location) -> Item:
    try:
        obj = loads_within_depth(line)
    except json.JSONDecodeError as exc:
        raise UserError(f"malformed JSON: {exc.msg}", location=Location(at.path, at.line, exc.colno)) from None
    except TooDeep as exc:
        hint = "move nested parts into $defs and refer to them with $ref"
        raise UserError(str(exc), location=at, hint=hint) from None
    if lone_surrogate_in(obj) is not None:
        col = json_surrogate_col(line) or 1
        raise UserError(LONE_SURROGATE, location=Location(at.path, at.line, col), hint=LONE_SURROGATE_HINT)
    spec = _jsonl_spec(obj, at)
    if spec.kind is Kind.JSON_SCHEMA:
        check_schema(spec)
    instances = _jsonl_instances(obj, at)
    _judged(spec, instances, [at] * len(instances))
    name = str(obj.get("name") or f"{path.name}:{at.line}")
    places = [f"{at.path}:{at.line}: instance {i + 1}" for i in range(len(instances))]
    item = Item(name, spec, instances, "given" if instances else "none", where=spec.origin, places=places or None)
    return _with_generated(item)


LINE_KEYS = ("name", "schema", "grammar", "kind", "instances")


def _jsonl_spec(obj, at: Location) -> ConstraintSpec:
    unknown = [k for k in obj if k not in LINE_KEYS] if isinstance(obj, dict) else []
    if unknown:  # "instnces" was ignored: the item ran with no instances, silently
        raise UserError(
            f"unknown key '{unknown[0]}'." + did_you_mean(unknown[0], LINE_KEYS),
            location=at,
            hint="a line has: " + ", ".join(LINE_KEYS),
        )
    if not isinstance(obj, dict) or ("schema" in obj) == ("grammar" in obj):
        raise UserError(
            "each line needs exactly one of 'schema' or 'grammar'",
            location=at,
            hint='{"schema": {...}, "instances": [...]} or {"grammar": "...", "kind": "lark", "instances": [...]}',
        )
    origin = f"{at.path}:{at.line}"
    if "schema" in obj:
        if not isinstance(obj["schema"], (dict, bool)):
            raise UserError("'schema' must be a JSON object", location=at)
        return ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(obj["schema"]), origin)
    if not isinstance(obj["grammar"], str) or not isinstance(obj.get("kind"), str):
        raise UserError(
            "'grammar' must be a string and 'kind' must name its kind", location=at, hint="kind: ebnf, lark, regex, ..."
        )
    kind = parse_kind(obj["kind"], at)
    if kind is Kind.JSON_SCHEMA:
        raise UserError("give a JSON Schema as 'schema' (an object), not as 'grammar'", location=at)
    return spec_from_text(kind, obj["grammar"], origin, at=at)


def _jsonl_instances(obj: dict, at: Location) -> list[str]:
    """Instances as texts: strings as they are for grammars; JSON values serialized for schemas."""
    given = obj.get("instances", [])
    if not isinstance(given, list):
        raise UserError("'instances' must be a list", location=at)
    if "schema" in obj:
        return [json.dumps(v, ensure_ascii=False) for v in given]
    if not all(isinstance(v, str) for v in given):
        raise UserError("a grammar's 'instances' must be strings (the texts it accepts)", location=at)
    return list(given)
