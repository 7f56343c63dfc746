"""Every exit-2 path of the backend layer, with its exact message.

`generate` checks backend support before loading any model, so the CLI cases are fast.
Compile errors happen after the model loads in `generate`; they are checked here at the
library level (the same UserError the CLI prints) and through `compare-backends --no-generate`.
"""

from __future__ import annotations

import json
import re

import pytest

from sgcli.backends import get_backend
from sgcli.backends.auto import AUTO_ORDER, compile_auto
from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
from sgcli.errors import Location, UserError


@pytest.fixture
def schema_file(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{"type": "object", "properties": {"a": {"type": "integer"}}}\n')
    return path


@pytest.fixture
def gbnf_file(tmp_path):
    path = tmp_path / "g.ebnf"
    path.write_text('root ::= "yes" | "no"\n')
    return path


@pytest.mark.parametrize("name", ["outlines", "outlines_core"])
def test_outlines_has_no_ebnf_and_says_who_has(run_cli, gbnf_file, name):
    result = run_cli("generate", "--backend", name, "--ebnf", gbnf_file, "Answer")
    assert result.exit_code == 2
    assert result.stderr == (
        "error: backend 'outlines_core' does not support EBNF/GBNF\n"  # an alias reads as the registered name
        "  hint: backends that do: llguidance, xgrammar (choose with --backend)\n"
    )


@pytest.mark.parametrize(
    "args,backend,what,who",
    [
        (["--lark", "g.lark"], "outlines_core", "Lark", "llguidance, xgrammar"),
        (["--structural-tag", "t.json"], "outlines_core", "structural tags", "llguidance, xgrammar"),
        (["--grammar", "g.llg.json"], "xgrammar", "llguidance top-level grammar", "llguidance"),
    ],
)
def test_missing_kind_names_the_backends_that_have_it(run_cli, tmp_path, args, backend, what, who):
    (tmp_path / "g.lark").write_text('start: "a"\n')
    (tmp_path / "t.json").write_text(
        json.dumps({"structures": [{"begin": "<f>", "schema": {}, "end": "</f>"}], "triggers": ["<f"]})
    )
    (tmp_path / "g.llg.json").write_text(json.dumps({"grammars": [{"lark_grammar": 'start: "a"'}]}))
    flag, file = args
    result = run_cli("generate", "--backend", backend, flag, tmp_path / file, "Answer")
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: backend '{backend}' does not support {what}\n  hint: backends that do: {who} (choose with --backend)\n"
    )


@pytest.mark.parametrize(
    "flag,backend,who",
    [
        (["--whitespace-pattern", "[ ]?"], "xgrammar", "llguidance, outlines_core"),
        (["--indent", "2"], "llguidance", "xgrammar"),
        (["--indent", "2"], "outlines_core", "xgrammar"),
    ],
)
def test_json_option_a_backend_lacks_names_the_backends_that_have_it(run_cli, schema_file, flag, backend, who):
    result = run_cli("generate", "--backend", backend, "--schema", schema_file, *flag, "Answer")
    assert result.exit_code == 2
    option = "--whitespace-pattern" if flag[0] == "--whitespace-pattern" else "--indent"
    assert result.stderr == (
        f"error: backend '{backend}' does not support the JSON option {option}\n"
        f"  hint: backends that do: {who} (choose with --backend)\n"
    )


def test_unknown_backend_lists_the_known_ones(run_cli, schema_file):
    from sgcli.backends import known_names

    result = run_cli("generate", "--backend", "bogus-backend", "--schema", schema_file, "Answer")
    assert result.exit_code == 2
    text = " ".join(re.sub("[\u2500-\u257f]", " ", result.stderr).split())  # without the box rich draws
    assert "'bogus-backend' is not one of " + ", ".join(f"'{n}'" for n in [*known_names(), "auto"]) in text


def test_contradictory_whitespace_options_fail_before_any_backend(run_cli, tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text("{}")
    for backend in ("llguidance", "outlines_core"):
        result = run_cli(
            "generate", "-b", backend, "--schema", schema, "--whitespace-pattern", "[ ]?", "--max-whitespace", "2", "x"
        )
        assert result.exit_code == 2
        assert "--whitespace-pattern and --max-whitespace both given" in result.stderr


@pytest.mark.parametrize(
    "backend,kind,text,message,line_col",
    [
        (
            "llguidance",
            Kind.REGEX,
            "ab(c",
            'regex rejected by llguidance: invalid regex "ab(c" (in regex): unclosed group',
            (1, 3),
        ),
        (
            "llguidance",
            Kind.LARK,
            'start: "a"\nx: "b" (\n',
            "Lark rejected by llguidance: Expected token ')', found '\\n' (at \"\\n\\n\" ('\\n'))",
            (2, 9),
        ),
        ("llguidance", Kind.LARK, 'start: "a" foo\n', 'Lark rejected by llguidance: unknown name: "foo"', (1, 8)),
        (
            "outlines_core",
            Kind.REGEX,
            "ab(c",
            "regex rejected by outlines_core: Failed to build DFA error building NFA "
            "(missing ), unterminated subpattern)",
            (1, 3),
        ),
    ],
)
def test_grammar_errors_are_positioned(smol_tokenizer, backend, kind, text, message, line_col):
    with pytest.raises(UserError) as info:
        get_backend(backend).compile(ConstraintSpec(kind, text, "g"), smol_tokenizer.vocab)
    assert info.value.message == message
    assert (info.value.location.line, info.value.location.col) == line_col


@pytest.mark.parametrize(
    "backend,text,line_col",
    [
        ("llguidance", "a/b\n\tx(c", (2, 3)),  # its caret counts in a print that spells newline, tab, / with two
        ("llguidance", "a\\/b\n[z-a]", (2, 2)),
        ("xgrammar", "ab\n)", (2, 1)),  # "position 4", counted from 1 in the regex
        ("xgrammar", "abc\n(d", (2, 3)),  # one past the end: the end
        ("xgrammar", "abc\n[z-a]", (None, None)),  # its line:col is of the EBNF it made from the regex
        ("outlines_core", "ab\n(c", (2, 1)),  # placed by Python's re, which says where
    ],
)
def test_errors_in_a_regex_of_several_lines_are_placed_in_it(smol_tokenizer, backend, text, line_col):
    with pytest.raises(UserError) as info:
        get_backend(backend).compile(ConstraintSpec(Kind.REGEX, text, "r.regex"), smol_tokenizer.vocab)
    where = info.value.location
    assert (where.line, where.col) == line_col


@pytest.mark.parametrize(
    "pattern,taken,refused",
    [
        ("^[0-9]+$", ["12"], ["a", "1\n"]),
        ("^a$|^b$", ["a", "b"], ["ab"]),
        ("^(a|b)c$", ["ac"], ["c"]),
        ("^a\\$", ["a$"], ["a"]),
    ],
)
def test_outlines_core_takes_a_whole_text_regex_with_its_edge_anchors(smol_tokenizer, pattern, taken, refused):
    """outlines-core refused every `^...$` ("anchored universal start state doesn't exist"): 219 of 239
    Schema Store patterns it refused as `--regex` compile without their edge anchors, which a whole-text
    regex means anyway."""
    from sgcli.backends.matching import accepts_bytes, sample_strings
    from sgcli.constraints.regex_dialects import fullmatch

    compiled = get_backend("outlines_core").compile(ConstraintSpec(Kind.REGEX, pattern, "r"), smol_tokenizer.vocab)
    assert [accepts_bytes(compiled, s.encode()).accepted for s in taken + refused] == [True] * len(taken) + [
        False
    ] * len(refused)
    assert all(fullmatch(pattern, s.decode()) for s in sample_strings(compiled, 5, seconds=2.0))


def test_gbnf_conversion_error_points_into_the_gbnf(smol_tokenizer):
    with pytest.raises(UserError) as info:
        get_backend("llguidance").compile(
            ConstraintSpec(Kind.EBNF, 'root ::= "a"\nx ::= "b" (\n', "g.gbnf"), smol_tokenizer.vocab
        )
    assert info.value.message == (
        "EBNF/GBNF rejected by llguidance: cannot read this EBNF/GBNF: "
        "expected ')' closing the group, found the end of the file"
    )
    assert (info.value.location.path, info.value.location.line) == ("g.gbnf", 3)  # the text ended unclosed


@pytest.mark.parametrize(
    "backend,schema,message,pointer_line_col",
    [
        (
            "llguidance",
            {"type": "string", "pattern": "\\cJ"},  # ECMA's control-J; a look-around goes to the checker
            "JSON Schema rejected by llguidance: unrecognized escape sequence (at /pattern)",
            (3, 14),
        ),
        (
            "outlines_core",
            {"prefixItems": [{}], "items": False},
            "JSON Schema rejected by outlines_core: the empty schema {} would be compiled as an ungrouped alternation "
            "that breaks the structure around it (at /prefixItems/0)",
            (3, 5),
        ),
        (
            "outlines_core",
            {"allOf": [{"type": "object"}, {"required": ["a"]}]},
            "JSON Schema rejected by outlines_core: allOf with several subschemas would be compiled as their "
            "concatenation, which is never valid JSON (at /allOf)",
            (2, 12),
        ),
        (  # a draft-7 tuple is respelled as prefixItems for xgrammar, but not beside one a $ref keeps
            "xgrammar",
            {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "properties": {
                    "a": {"items": [{"type": "integer"}], "prefixItems": [{}]},
                    "b": {"$ref": "#/properties/a/prefixItems/0"},
                },
            },
            "JSON Schema rejected by xgrammar: items must be a boolean or an object (at /properties/a/items)",
            (5, 16),
        ),
    ],
)
def test_schema_errors_point_at_the_keyword(smol_tokenizer, backend, schema, message, pointer_line_col):
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema, indent=2), "s.json")
    with pytest.raises(UserError) as info:
        get_backend(backend).compile(spec, smol_tokenizer.vocab)
    assert info.value.message == message
    assert (info.value.location.line, info.value.location.col) == pointer_line_col


_NO_BRANCH = (
    "outlines-core reads a subschema by one of type, properties, allOf, anyOf, oneOf, prefixItems, enum, const "
    "or $ref, and this one has none"
)
_OTHERS = ", or use --backend llguidance or xgrammar"


@pytest.mark.parametrize(
    "schema, why, pointer, hint",
    [
        (  # aws-sam's policy templates, cibuildwheel: names by pattern only, others refused
            {"type": "object", "additionalProperties": False, "patternProperties": {"^[a-z]+$": {"type": "string"}}},
            "false: outlines-core reads `additionalProperties: false` only beside `properties`, and has no "
            "`patternProperties`",
            "/additionalProperties",
            "list the allowed properties under `properties`" + _OTHERS,
        ),
        (  # dbt's `"AnyValue": true`, reached through a $ref
            {"properties": {"meta": {"$ref": "#/definitions/AnyValue"}}, "definitions": {"AnyValue": True}},
            "true: outlines-core reads no boolean subschema (`true`)",
            "/definitions/AnyValue",
            'write the types it allows (`"type": [...]`) instead' + _OTHERS,
        ),
        (
            {"type": "array", "items": False},
            "false: outlines-core reads no boolean subschema (`items: false`)",
            "/items",
            "write `maxItems: 0` for an empty array" + _OTHERS,
        ),
        (  # datacite's iso-8601: a pattern it would write raw is left to the checker: it sees a description
            {"type": "string", "anyOf": [{"description": "Date.", "pattern": "^a.b$"}, {"type": "string"}]},
            '{"description":"Date."}: ' + _NO_BRANCH,
            "/anyOf/0",
            "give it a `type`" + _OTHERS,
        ),
    ],
    ids=["additionalProperties-false", "true-by-ref", "items-false", "no-branch-keyword"],
)
def test_a_subschema_outlines_cannot_read_is_named_at_its_place(smol_tokenizer, schema, why, pointer, hint):
    """outlines-core says "Unsupported JSON Schema structure false" and no more: no place, and a hint that
    named no keyword. The subschema is found by walking the schema as outlines-core does."""
    from sgcli.constraints.jsonpos import locate, pointer_parts

    text = json.dumps(schema, indent=2)
    spec = ConstraintSpec(Kind.JSON_SCHEMA, text, "s.json")
    with pytest.raises(UserError) as info:
        get_backend("outlines_core").compile(spec, smol_tokenizer.vocab)
    error = info.value
    assert (
        error.message
        == f"JSON Schema rejected by outlines_core: Unsupported JSON Schema structure {why} (at {pointer})"
    )
    assert (error.location.line, error.location.col) == locate(text, pointer_parts(pointer)) and error.hint == hint


def test_a_ref_outlines_cannot_follow_is_named(smol_tokenizer):
    """outlines-core follows a $ref through object keys only ("Invalid reference path: 0", nothing more)."""
    schema = {"properties": {"t": {"prefixItems": [{"type": "string"}]}, "s": {"$ref": "#/properties/t/prefixItems/0"}}}
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema, indent=2), "s.json")
    with pytest.raises(UserError) as info:
        get_backend("outlines_core").compile(spec, smol_tokenizer.vocab)
    assert (
        info.value.message == "JSON Schema rejected by outlines_core: Invalid reference path: 0 (at /properties/s/$ref)"
    )
    assert info.value.location.line == 11 and "$defs" in info.value.hint


def test_a_large_subschema_outlines_quotes_is_clipped_and_pointed_at(smol_tokenizer):
    """outlines-core quotes the subschema it cannot read whole: a CloudFormation region table (cfn-lint's
    data) put 8 KB of JSON into one error line. The quote is cut; the pointer says where it is."""
    regions = {f"region-{i}": {"enum": [f"type.{j}.xlarge" for j in range(12)]} for i in range(40)}
    schema = {"properties": {"InstanceType": regions}}
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema, indent=2), "s.json")
    with pytest.raises(UserError) as info:
        get_backend("outlines_core").compile(spec, smol_tokenizer.vocab)
    message = info.value.message
    assert message.startswith("JSON Schema rejected by outlines_core: Unsupported JSON Schema structure {")
    assert len(message) < 400 and message.endswith(" chars): " + _NO_BRANCH + " (at /properties/InstanceType)")
    assert (info.value.location.line, info.value.location.col) == (3, 21)


def test_auto_falls_back_with_the_reason(smol_tokenizer):
    """llguidance refuses `\\Z`, and so does outlines-core, which ranks before xgrammar: xgrammar declares
    that it leaves such a pattern to the checker (it reads `\\Z` as a letter). xgrammar compiles it.
    (`\\cJ` was the example once; xgrammar declares that it would write that newline raw.)"""
    schema = '{"type": "object", "properties": {"a": {"type": "string", "pattern": "\\\\Z"}}}'
    compiled, fallbacks = compile_auto(ConstraintSpec(Kind.JSON_SCHEMA, schema, "s.json"), smol_tokenizer.vocab)
    assert compiled.backend == "xgrammar"
    assert fallbacks == [
        {
            "backend": "llguidance",
            "reason": "s.json:1:70: JSON Schema rejected by llguidance: unrecognized escape sequence "
            "(at /properties/a/pattern)",
        },
        {
            "backend": "outlines_core",
            "reason": "s.json: JSON Schema rejected by outlines_core: Failed to build DFA error building NFA",
        },
    ]


def test_llguidance_drops_what_it_does_not_implement_at_its_pointer(smol_tokenizer):
    """Compiled lenient: a keyword it does not implement is a warning at the keyword, never a silent drop,
    and a gap that sgcli's schema checker takes over."""
    from sgcli.backends.keyword_coverage import compiled_gaps

    text = json.dumps({"type": "object", "unevaluatedProperties": False}, indent=2)
    compiled = get_backend("llguidance").compile(ConstraintSpec(Kind.JSON_SCHEMA, text, "s.json"), smol_tokenizer.vocab)
    assert [str(w) for w in compiled.warnings] == [
        '/unevaluatedProperties: Unimplemented keys: ["unevaluatedProperties"]'
    ]
    assert [(g.pointer, g.checker) for g in compiled_gaps(compiled)] == [("/unevaluatedProperties", True)]


def test_auto_skips_backends_without_the_capability(smol_tokenizer):
    spec = ConstraintSpec(Kind.JSON_SCHEMA, "{}", "s.json", json_options=JsonOptions(indent=2))
    compiled, fallbacks = compile_auto(spec, smol_tokenizer.vocab)
    assert compiled.backend == "xgrammar"
    assert fallbacks == [{"backend": "llguidance", "reason": "does not support the JSON option --indent"}]


def test_auto_when_every_backend_fails_raises_the_first_error_with_all_reasons(smol_tokenizer):
    spec = ConstraintSpec(Kind.REGEX, "a(?=b)", "--regex")
    with pytest.raises(UserError) as info:
        compile_auto(spec, smol_tokenizer.vocab)
    e = info.value
    assert e.message.startswith("regex rejected by llguidance: ")
    assert e.hint.startswith("every backend failed (llguidance: ")
    assert all(f"{name}: " in e.hint for name in AUTO_ORDER)


def test_compare_rejects_whitespace_variants_for_non_json(run_cli):
    result = run_cli("compare-backends", "--no-generate", "--regex", "[0-9]+", "--whitespace", "compact")
    assert result.exit_code == 2
    assert result.stderr == (
        "error: --whitespace compares JSON layouts; this constraint is regex\n"
        "  hint: drop --whitespace, or use --schema\n"
    )


def test_compare_rejects_unknown_variant(run_cli, schema_file):
    result = run_cli("compare-backends", "--no-generate", "--schema", schema_file, "--whitespace", "tabs")
    assert result.exit_code == 2
    assert result.stderr == (
        "error: unknown --whitespace variant 'tabs'\n"
        "  hint: use a comma-separated list of flexible, compact, indent=N, max-whitespace=N\n"
    )


def test_compare_with_a_named_backend_that_lacks_the_kind(run_cli, gbnf_file):
    result = run_cli("compare-backends", "--no-generate", "--ebnf", gbnf_file, "--backends", "xgrammar,outlines")
    assert result.exit_code == 2
    assert result.stderr == (
        "error: backend 'outlines_core' does not support EBNF/GBNF\n"
        "  hint: backends that do: llguidance, xgrammar (choose with --backend)\n"
    )


def test_llguidance_refuses_the_false_schema_instead_of_dropping_it(smol_tokenizer):
    """`false` reaches llguidance as `{"not": {}}`; dropped leniently it would take every value."""
    with pytest.raises(UserError) as info:
        get_backend("llguidance").compile(ConstraintSpec(Kind.JSON_SCHEMA, "false", "s.json"), smol_tokenizer.vocab)
    assert "not" in info.value.message


def test_an_error_crosses_a_child_pipe_as_json_and_renders_the_same():
    """A forked child (a bounded compile, a chat template's render) hands its UserError over as JSON:
    message, file:line:col and hint come back whole, with and without a place."""
    for error in (
        UserError("JSON Schema rejected", location=Location("s.json", 3, 14), hint="fix it"),
        UserError("chat template 't' failed", hint="check the messages"),
        UserError("no place, no hint"),
    ):
        again = UserError.from_json(json.loads(json.dumps(error.as_json())))
        assert again.render() == error.render() and again.location == error.location


def test_llguidance_names_the_subschema_it_was_building():
    """ "Unable to determine if regex is empty: ... while processing json-schema:///#/definitions/X" (a
    CloudFormation schema's pattern beside maxLength): placed at that subschema, URI-decoded."""
    from sgcli.backends.schema_warnings import paths_for

    schema = {"definitions": {"A B": {"items": [{"type": "string"}, {"type": "string", "pattern": "x"}]}}}
    message = "Unable to determine if regex is empty: (And ...) while processing json-schema:///#/definitions/"
    assert paths_for(schema, message + "A%20B/items/1") == [("definitions", "A B", "items", 1)]
    assert paths_for(schema, message + "Nowhere") == []


@pytest.mark.parametrize("prefix", ["aaaa", "éééé", "\U0001f600" * 4])
def test_xgrammars_byte_column_is_given_in_characters(smol_tokenizer, prefix):
    """xgrammar counts UTF-8 bytes: four emoji before `[b-a]` put the error at 1:30 of a 21-character line."""
    from sgcli.backends import get_backend
    from sgcli.constraints.spec import ConstraintSpec, Kind
    from sgcli.errors import UserError

    spec = ConstraintSpec(Kind.EBNF, f'root ::= "{prefix}" [b-a]\n', "g.gbnf")
    with pytest.raises(UserError) as caught:
        get_backend("xgrammar").compile(spec, smol_tokenizer.vocab)
    assert (caught.value.location.line, caught.value.location.col) == (1, 18)


def test_xgrammars_log_prefix_is_cut_wherever_it_stands(smol_tokenizer):
    """xgrammar puts "[02:12:54] /project/cpp/regex_converter.cc:94: " inside its regex errors, after its own
    words: the message a user reads keeps xgrammar's words and drops the timestamp and build path."""
    spec = ConstraintSpec(Kind.LARK, "start: /[a-z/\n", "g.lark")
    with pytest.raises(UserError) as caught:
        get_backend("xgrammar").compile(spec, smol_tokenizer.vocab)
    message = caught.value.message
    assert "failed to compile regular expression: Regex parsing error at position 5: Unclosed '['" in message
    assert "project/cpp" not in message and not re.search(r"\[\d\d:\d\d:\d\d\]", message)


@pytest.mark.parametrize(
    "backend, schema, pointer",
    [
        (
            "xgrammar",
            {"type": "object", "properties": {"a": {"type": "string"}, "legacy": False}},
            "/properties/legacy",
        ),
        ("xgrammar", {"type": "object", "propertyNames": False}, "/propertyNames"),
        (
            "xgrammar",
            {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1.5}}},
            "/properties/n/minimum",
        ),
        (
            "llguidance",
            {"type": "object", "properties": {"x": {"type": "number", "maximum": 1e308}}},
            "/properties/x/maximum",
        ),
        (
            "llguidance",
            {"type": "object", "properties": {"x": {"type": "number", "minimum": 1e-300}}},
            "/properties/x/minimum",
        ),
    ],
)
def test_refusals_that_name_no_place_are_placed_at_their_keyword(smol_tokenizer, backend, schema, pointer):
    """Each of these was exit 2 with no line (a held-out tour, 2026-12-07)."""
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema, indent=2), "s.json")
    with pytest.raises(UserError) as info:
        get_backend(backend).compile(spec, smol_tokenizer.vocab)
    assert info.value.message.endswith(f"(at {pointer})") and info.value.location.line is not None
