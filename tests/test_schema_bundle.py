"""A schema split over files (sgcli/constraints/schema_bundle.py): files beside it and the drafts'
meta-schemas are bundled into one document that every backend compiles and jsonschema checks; an
error inside a referenced file is placed in that file; what cannot be bundled is exit 2 at the $ref."""

from __future__ import annotations

import json

import jsonschema
import pytest
from helpers import generate_with
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

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


# -- --ref-base URL=DIR: URLs the schema names, read from a folder the user gives -----------------
POINT = '{"type": "object", "properties": {"x": {"type": "integer", "minimum": 0}}, "required": ["x"]}\n'
BY_URL = """{
  "type": "object",
  "properties": {"p": {"$ref": "https://example.com/schemas/point#/properties/x"}},
  "required": ["p"],
  "additionalProperties": false
}
"""


@pytest.fixture
def store(tmp_path):
    """A copy of what https://example.com/schemas/ serves, with the `.json` the URL leaves out."""
    return write(tmp_path, {"store/point.json": POINT, "main.json": BY_URL})


def test_a_url_ref_is_read_from_the_ref_base_folder_on_every_backend(store, run_cli):
    main, base = store / "main.json", f"https://example.com/schemas/={store / 'store'}"
    for backend in enforcing_backends():
        result = run_cli(
            "compile", "--schema", main, "--backend", backend, "--ref-base", base, "--output-format", "json"
        )
        assert result.exit_code == 0, result.output
    from sgcli.constraints.ref_bases import parse_ref_base, set_ref_bases

    set_ref_bases((parse_ref_base(base),))
    try:
        validator = jsonschema.Draft202012Validator(json.loads(from_file(str(main)).text))
    finally:
        set_ref_bases(())
    assert validator.is_valid({"p": 3}) and not validator.is_valid({"p": -1}) and not validator.is_valid({"p": "3"})


def test_without_a_ref_base_the_url_is_refused_naming_the_flag(store, run_cli):
    result = run_cli("compile", "--schema", store / "main.json")
    assert result.exit_code == 2 and f"{store / 'main.json'}:3:" in result.output
    assert "--ref-base https://example.com/schemas/=DIR" in result.output


def test_an_inline_schema_reads_a_url_from_the_ref_base(store, run_cli):
    inline = '{"$ref": "https://example.com/schemas/point.json"}'
    result = run_cli("compile", "--schema", inline, "--ref-base", f"https://example.com/schemas/={store / 'store'}")
    assert result.exit_code == 0, result.output


def test_the_config_file_gives_ref_bases_relative_to_itself(store, run_cli, monkeypatch):
    from sgcli import config

    (store / "sgcli.toml").write_text('ref-base = ["https://example.com/schemas/=store"]\n')
    (store / "elsewhere").mkdir()
    monkeypatch.chdir(store / "elsewhere")
    config.reset()
    try:
        result = run_cli("compile", "--schema", store / "main.json")
    finally:
        config.reset()
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    "value, says",
    [
        ("https://example.com/", "expected URL=DIR"),
        ("example.com=store", "is not an absolute URI"),
        ("https://example.com/=main.json", "is not a folder"),
        ("https://example.com/?v=1=store", "has a query or fragment"),
    ],
)
def test_a_bad_ref_base_is_exit_2_naming_it_before_anything_reads(store, run_cli, monkeypatch, value, says):
    monkeypatch.chdir(store)
    result = run_cli("compile", "--schema", "main.json", "--ref-base", value)
    said = " ".join(result.output.replace("│", " ").split())  # click's usage box wraps the message
    assert result.exit_code == 2 and says in said and "Invalid value for '--ref-base'" in said, result.output


@pytest.mark.parametrize(
    "ref, says",
    [
        ("https://example.com/schemas/../../etc/passwd", "climbs out of the folder"),
        ("https://example.com/schemas/", "climbs out of the folder, names the folder itself"),
        ("https://example.com/schemas/nothing", "which does not exist (nor does nothing.json)"),
    ],
)
def test_a_url_that_maps_to_no_file_is_exit_2_at_the_ref(store, run_cli, ref, says):
    (store / "m.json").write_text(json.dumps({"$ref": ref}))
    result = run_cli("compile", "--schema", store / "m.json", "--ref-base", f"https://example.com/schemas/={store}")
    assert result.exit_code == 2 and f"{store / 'm.json'}:1:10:" in result.output and says in result.output
    assert "Traceback" not in result.output


def test_a_ref_base_folder_that_does_not_exist_fails_where_a_ref_needs_it(store, run_cli):
    """A config file may name a folder before it is made: only a schema that needs it fails."""
    missing = store / "not-yet"
    unrelated = run_cli("compile", "--regex", "[0-9]+", "--ref-base", f"https://example.com/schemas/={missing}")
    assert unrelated.exit_code == 0, unrelated.output
    result = run_cli(
        "compile", "--schema", store / "main.json", "--ref-base", f"https://example.com/schemas/={missing}"
    )
    assert result.exit_code == 2 and f"{store / 'main.json'}:3:" in result.output
    assert f"the folder {missing} does not exist" in result.output


def test_the_longest_ref_base_wins(store, run_cli):
    write(store, {"other/point.json": '{"type": "string"}'})
    bases = [f"https://example.com/={store / 'other'}", f"https://example.com/schemas/={store / 'store'}"]
    from sgcli.constraints.ref_bases import mapped, parse_ref_base, set_ref_bases

    set_ref_bases(tuple(parse_ref_base(b) for b in bases))
    try:
        assert mapped("https://example.com/schemas/point")[1] == store / "store" / "point"
        assert mapped("https://example.com/point")[1] == store / "other" / "point"
        assert mapped("https://example.org/point") is None
    finally:
        set_ref_bases(())


def test_a_relative_ref_finds_its_sibling_before_the_ref_base(tmp_path):
    """The file's `$id` says it lives elsewhere (a mirror), and --ref-base maps that host to an empty
    folder: the relative reference still finds the file its author put beside it."""
    main = '{"$id": "https://mirror.example/s/main.json", "$ref": "point.json"}'
    folder = write(tmp_path, {"s/main.json": main, "s/point.json": POINT, "empty/.keep": ""})
    from sgcli.constraints.ref_bases import parse_ref_base, set_ref_bases

    set_ref_bases((parse_ref_base(f"https://mirror.example/={folder / 'empty'}"),))
    try:
        bundled = json.loads(from_file(str(folder / "s" / "main.json")).text)
    finally:
        set_ref_bases(())
    assert not jsonschema.Draft202012Validator(bundled).is_valid({"x": -1})
    assert jsonschema.Draft202012Validator(bundled).is_valid({"x": 1})


# -- positions: the bundle's text and the files it came from --------------------------------------
def test_a_finding_after_a_rewritten_ref_on_its_line_keeps_its_column(tmp_path, run_cli):
    """The bundle rewrites `"other.json"` to a longer pointer; a finding later on that line is
    reported at the file's own column, not the bundle's."""
    main = '{"properties": {"a": {"$ref": "other.json"}, "b": {"type": "integer", "minimum": 3}}}\n'
    folder = write(tmp_path, {"m.json": main, "other.json": '{"type": "string", "maxLength": 4}'})
    result = run_cli("lint", folder / "m.json", "--backend", "outlines-core", "--output-format", "json")
    found = [d for d in json.loads(result.stdout) if "`minimum`" in d["message"]]
    assert found and (found[0]["line"], found[0]["col"]) == (1, main.index('"minimum"') + 1), found


def test_the_source_map_finds_a_files_position_in_the_bundle(split_schema):
    from sgcli.errors import Location

    spec = from_file(str(split_schema))
    defs = str(split_schema.parent / "common" / "defs.json")
    line, col = spec.source_map.in_text(Location(defs, 5, 53))  # "minimum" in common/defs.json
    back = spec.where(line, col)
    assert (back.path, back.line, back.col) == (defs, 5, 53)
    assert spec.text.splitlines()[line - 1][col - 1 :].startswith('"minimum"')


def test_a_refusal_at_a_keyword_of_a_referenced_file_is_j002_there(split_schema):
    """lint's J002 (which keyword a backend refuses) works in the files a schema names, too."""
    from sgcli.constraints.jsonpos import SchemaText
    from sgcli.lint.backend_checks import BackendCompile, compile_error
    from sgcli.lint.inputs import in_their_files

    spec = from_file(str(split_schema))
    defs = str(split_schema.parent / "common" / "defs.json")
    from sgcli.errors import Location

    error = UserError("JSON Schema rejected by x: no minimum here", location=Location(defs, 5, 64))
    found = in_their_files([compile_error(BackendCompile("x", error=error), spec, SchemaText(spec.text))], spec)
    assert [(d.code, d.path, d.line, d.col) for d in found] == [("J002", defs, 5, 53)]


@pytest.fixture(scope="module")
def bundle_folder(tmp_path_factory):
    return tmp_path_factory.mktemp("bundles")


_REFERENCED = {  # a file a schema may name, and its text as written (several lines, or one)
    "int.json": '{"type": "integer",\n "minimum": 0, "maximum": 9}',
    "str.json": '{\n  "type": "string", "maxLength": 4,\n  "pattern": "^[a-z]+$"\n}',
    "obj.json": '{"type": "object", "properties": {"k": {"$ref": "int.json"}, "s": {"$ref": "str.json"}}}',
}


@given(
    props=st.lists(
        st.one_of(
            st.sampled_from([{"$ref": name} for name in _REFERENCED]),
            st.builds(lambda n: {"type": "integer", "minimum": n}, st.integers(-5, 5)),
            st.just({"type": "boolean"}),
        ),
        min_size=1,
        max_size=6,
    ),
    indent=st.sampled_from([None, 1, 2]),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_written_value_maps_into_the_bundle_and_back(bundle_folder, props, indent):
    """SourceMap both ways, on schemas whose `$ref`s the bundle rewrites anywhere on a line: each value
    of each file (a rewritten `$ref` value aside) stands in the bundle where `in_text` says, and
    `where` names the file, line and column it was written at."""
    from sgcli.constraints.jsonpos import value_offsets
    from sgcli.errors import Location, offset_to_line_col

    assume(any("$ref" in p for p in props))
    main = json.dumps({"type": "object", "properties": {f"p{i}": p for i, p in enumerate(props)}}, indent=indent)
    folder = write(bundle_folder / f"case{abs(hash((main, indent))) % 10**8}", {"m.json": main, **_REFERENCED})
    spec = from_file(str(folder / "m.json"))
    assert spec.source_map is not None
    for name, text in {"m.json": main, **_REFERENCED}.items():
        path = str(folder / name)
        for pointer, offset in value_offsets(text).items():
            if pointer.endswith("/$ref"):
                continue  # rewritten into a pointer from the bundle's root
            line, col = offset_to_line_col(text, offset)
            placed = spec.source_map.in_text(Location(path, line, col))
            if placed is None:
                continue  # a file the schema does not name is not in the bundle
            back = spec.where(*placed)
            assert (back.path, back.line, back.col) == (path, line, col), (name, pointer)
            b_line, b_col = placed
            assert spec.text.splitlines()[b_line - 1][b_col - 1 :].startswith(text[offset : offset + 1])
