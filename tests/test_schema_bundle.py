"""A schema split over files (sgcli/constraints/schema_bundle.py): files beside it and the drafts'
meta-schemas are bundled into one document that every backend compiles and jsonschema checks; an
error inside a referenced file is placed in that file; what cannot be bundled is exit 2 at the $ref."""

from __future__ import annotations

import json

import jsonschema
import pytest
from helpers import generate_with

from sgcli.backends import get_backend
from sgcli.backends.matching import accepts_bytes, enforcing_backends
from sgcli.constraints.schema_refs import references
from sgcli.constraints.sources import from_file
from sgcli.constraints.spec import JsonOptions, Kind
from sgcli.errors import UserError

MAIN = """{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "id": {"$ref": "common/defs.json#/$defs/id"},
    "size": {"$ref": "common/defs.json#small"},
    "tags": {"type": "array", "items": {"$ref": "tag.json"}, "maxItems": 2}
  },
  "required": ["id", "size", "tags"],
  "additionalProperties": false
}
"""
# Its own absolute $id: "../tag.json" is the tag.json one folder up, as the main schema's "tag.json" is.
DEFS = """{
  "$id": "https://example.com/common/defs.json",
  "$defs": {
    "id": {"type": "string", "pattern": "^[a-z]{3}[0-9]{2}$"},
    "size": {"$anchor": "small", "type": "integer", "minimum": 1, "maximum": 9},
    "tag": {"$ref": "../tag.json"}
  }
}
"""
TAG = '{"type": "string", "enum": ["red", "green", "blue"]}\n'

VALID = ['{"id":"abc12","size":3,"tags":["red"]}', '{"id":"xyz00","size":9,"tags":[]}']
INVALID = [
    '{"id":"abc1","size":3,"tags":["red"]}',  # the pattern, in common/defs.json
    '{"id":"abc12","size":10,"tags":[]}',  # maximum, in common/defs.json
    '{"id":"abc12","size":3,"tags":["pink"]}',  # the enum, in tag.json
    '{"id":"abc12","size":3,"tags":["red","red","red"]}',  # maxItems, in the schema itself
]


def write(folder, files: dict[str, str]):
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


@pytest.fixture
def split_schema(tmp_path):
    return write(tmp_path, {"main.json": MAIN, "common/defs.json": DEFS, "tag.json": TAG}) / "main.json"


def test_the_bundle_is_one_document_with_the_files_meaning(split_schema):
    spec = from_file(str(split_schema))
    schema = json.loads(spec.text)
    refs = references(schema)
    assert refs and all(not r.remote and r.target is not None for r in refs)
    # tag.json is named twice (from the schema and from defs.json) and inlined once
    assert spec.text.count('"enum"') == 1
    validator = jsonschema.Draft202012Validator(schema)
    assert [validator.is_valid(json.loads(t)) for t in VALID] == [True, True]
    assert [validator.is_valid(json.loads(t)) for t in INVALID] == [False] * 4
    # the schema's own text comes first, as written: its positions are the file's
    assert spec.text.startswith(MAIN.rstrip()[: MAIN.index('"$ref"')])


@pytest.mark.parametrize("backend", enforcing_backends())
def test_every_backend_enforces_what_the_other_files_say(split_schema, smol_tokenizer, backend):
    spec = from_file(str(split_schema))
    compiled = get_backend(backend).compile(spec, smol_tokenizer.vocab)
    for text in VALID:
        assert accepts_bytes(compiled, text.encode()).accepted, (backend, text)
    refused = [t for t in INVALID if not accepts_bytes(compiled, t.encode()).accepted]
    # a keyword a backend leaves to sgcli's schema checker is declared, never silently dropped
    weakened = {w.message for w in compiled.warnings}
    assert len(refused) == len(INVALID) or weakened, (backend, refused)


@pytest.mark.parametrize("backend", enforcing_backends())
def test_generated_outputs_validate_against_the_files(split_schema, tiny_lm, smol_tokenizer, backend):
    spec = from_file(str(split_schema), json_options=JsonOptions(whitespace="compact"))
    validator = jsonschema.Draft202012Validator(json.loads(spec.text))
    stopped = 0
    for seed in range(4):
        record = generate_with(tiny_lm, smol_tokenizer, spec, backend, seed=seed, max_tokens=120)
        if record["finish_reason"] == "stop":
            stopped += 1
            assert record["valid"] is True and validator.is_valid(json.loads(record["output"])), record
    assert stopped, "no walk of the random model finished"


def test_an_error_inside_a_referenced_file_names_that_file(tmp_path):
    bad = DEFS.replace('"minimum": 1', '"minimum": "one"')
    main = write(tmp_path, {"main.json": MAIN, "common/defs.json": bad, "tag.json": TAG}) / "main.json"
    with pytest.raises(UserError) as exc:
        from_file(str(main))
    loc = exc.value.location
    assert loc.path.endswith("common/defs.json") and loc.line == 5
    assert bad.splitlines()[4][loc.col - 1 :].startswith('"one"')


def test_a_backend_warning_inside_a_referenced_file_is_placed_there(split_schema, smol_tokenizer):
    from sgcli.backends.guarantee import where
    from sgcli.backends.keyword_coverage import compiled_gaps

    spec = from_file(str(split_schema))
    compiled = get_backend("outlines-core").compile(spec, smol_tokenizer.vocab)
    gaps = [g for g in compiled_gaps(compiled) if g.pointer.endswith("/maximum")]
    assert gaps, [str(w) for w in compiled.warnings]
    loc = where(spec, gaps[0])
    assert loc.path.endswith("common/defs.json") and loc.line == 5
    assert DEFS.splitlines()[4][loc.col - 1 :].startswith('"maximum"')


def test_lint_reports_a_finding_in_the_file_it_is_about(split_schema, run_cli):
    result = run_cli("lint", str(split_schema), "--backend", "outlines-core", "--output-format", "json")
    found = json.loads(result.stdout)
    about_max = [d for d in found if "maximum" in d["message"]]
    assert about_max and all(d["path"].endswith("common/defs.json") and d["line"] == 5 for d in about_max)


def test_compile_takes_the_split_schema_on_every_backend(split_schema, run_cli):
    for backend in enforcing_backends():
        result = run_cli("compile", "--schema", str(split_schema), "--backend", backend)
        assert result.exit_code == 0, result.output


def test_a_missing_file_is_exit_2_at_the_ref(tmp_path, run_cli):
    main = write(tmp_path, {"main.json": MAIN, "tag.json": TAG}) / "main.json"
    result = run_cli("compile", "--schema", str(main))
    assert result.exit_code == 2
    assert f"{main}:5:" in result.output and "does not exist" in result.output


def test_a_file_of_another_draft_is_refused_at_the_ref(tmp_path):
    defs = DEFS.replace('"$id"', '"$schema": "http://json-schema.org/draft-07/schema#",\n  "$id"')
    main = write(tmp_path, {"main.json": MAIN, "common/defs.json": defs, "tag.json": TAG}) / "main.json"
    with pytest.raises(UserError, match="draft 7 schema, from a draft 202012 schema") as exc:
        from_file(str(main))
    assert exc.value.location.path == str(main) and exc.value.location.line == 5


def test_an_inline_schema_has_no_folder_to_read_from(run_cli):
    result = run_cli("compile", "--schema", '{"$ref": "other.json"}')
    assert result.exit_code == 2 and "no folder to look in" in result.output


def test_a_drafts_meta_schema_is_read_from_jsonschema(tmp_path):
    """OpenAPI 3.0's schema names draft 4's meta-schema by URI for its integer bounds."""
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {"n": {"$ref": "http://json-schema.org/draft-04/schema#/definitions/positiveInteger"}},
        "required": ["n"],
        "definitions": {"own": {"type": "string"}},
    }
    main = write(tmp_path, {"s.json": json.dumps(schema, indent=2)}) / "s.json"
    spec = from_file(str(main))
    bundled = json.loads(spec.text)
    # `definitions` is written already: the meta-schema goes in a new member at the end, so no line moves
    assert bundled["definitions"] == {"own": {"type": "string"}} and list(bundled["$defs"]) == ["schema"]
    validator = jsonschema.Draft4Validator(bundled)
    assert validator.is_valid({"n": 0}) and not validator.is_valid({"n": -1})


def test_a_cycle_across_files_is_refused(tmp_path):
    files = {
        "a.json": '{"allOf": [{"$ref": "b.json"}]}',
        "b.json": '{"anyOf": [{"$ref": "a.json"}]}',
    }
    main = write(tmp_path, files) / "a.json"
    with pytest.raises(UserError, match="cycle"):
        from_file(str(main))


def test_a_file_that_refers_back_to_the_schema_gets_the_schema_itself(tmp_path):
    files = {
        "tree.json": '{"type": "object", "properties": {"kids": {"$ref": "kids.json"}}, "additionalProperties": false}',
        "kids.json": '{"type": "array", "items": {"$ref": "tree.json"}, "maxItems": 2}',
    }
    spec = from_file(str(write(tmp_path, files) / "tree.json"))
    assert spec.kind is Kind.JSON_SCHEMA
    validator = jsonschema.Draft202012Validator(json.loads(spec.text))
    assert validator.is_valid({"kids": [{"kids": []}, {}]})
    assert not validator.is_valid({"kids": [{"kids": [{"x": 1}]}]})


def test_a_sub_grammar_error_inside_a_referenced_file_names_that_file(tmp_path, run_cli):
    """A Lark grammar's `--sub` schema is bundled too; where no checker follows it, xgrammar refuses a
    pattern it would write raw, at the pattern's line:col in the file that holds it."""
    defs = DEFS.replace('"^[a-z]{3}[0-9]{2}$"', '"^a\\\\nb$"')
    folder = write(
        tmp_path, {"main.json": MAIN, "common/defs.json": defs, "tag.json": TAG, "g.lark": 'start: "A: " @answer\n'}
    )
    sub = f"answer={folder / 'main.json'}"
    compiled = run_cli("compile", "--lark", str(folder / "g.lark"), "--sub", sub, "--backend", "xgrammar")
    linted = run_cli("lint", str(folder / "g.lark"), "--sub", sub, "--backend", "xgrammar")
    where = f"{folder / 'common' / 'defs.json'}:4:30:"
    assert compiled.exit_code == 1 and where in compiled.output, compiled.output  # 1: a backend refuses it
    assert linted.exit_code == 1 and where + " S001" in linted.output, linted.output


@pytest.mark.parametrize(
    "files, says",
    [
        ({"s.json": '{"$ref": "/dev/zero"}'}, ["s.json:1:10", "/dev/zero, which is not a file"]),
        ({"s.json": '{"$ref": "."}'}, ["s.json:1:10", "which is not a file"]),
        ({"s.json": '{"$ref": "n.json"}', "n.json": "hello"}, ["n.json:1:1: invalid JSON", "$ref 'n.json' at"]),
        (
            {"s.json": '{"$ref": "big.json"}', "big.json": '{"enum": ["' + "x" * 3000 + '"]}'},
            ["big.json: JSON Schema file is over the limit of 2,000 bytes", "--max-constraint-bytes"],
        ),
    ],
    ids=["dev-zero", "folder", "not-json", "over-the-limit"],
)
def test_what_a_ref_names_is_read_bounded_and_refused_clearly(tmp_path, run_cli, files, says):
    main = write(tmp_path, files) / "s.json"
    result = run_cli("compile", "--schema", str(main), "--max-constraint-bytes", "2000")
    assert result.exit_code == 2 and "Traceback" not in result.output
    for needle in says:
        assert needle in result.output, (needle, result.output)


def test_a_chain_of_files_past_the_limit_is_refused(tmp_path):
    from sgcli.constraints.schema_bundle import MAX_DOCUMENTS

    files = {f"c{i}.json": json.dumps({"items": {"$ref": f"c{i + 1}.json"}}) for i in range(MAX_DOCUMENTS + 2)}
    files[f"c{MAX_DOCUMENTS + 2}.json"] = '{"type": "integer"}'
    with pytest.raises(UserError, match=f"more than {MAX_DOCUMENTS} files"):
        from_file(str(write(tmp_path, files) / "c0.json"))
