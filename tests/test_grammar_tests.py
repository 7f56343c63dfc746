"""`sgcli test` grammar test files, and the curated library in sgcli/grammars/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sgcli.backends import get_backend, unsupported_reason
from sgcli.backends.matching import enforcing_backends

LIBRARY = Path(__file__).resolve().parent.parent / "sgcli" / "grammars"
CASE_FILES = sorted(LIBRARY.glob("*.test.yaml"))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))


def _records(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def test_the_library_has_every_promised_grammar_each_with_a_test_file():
    from sgcli.constraints.sources import resolve_library

    for name in ("json", "arithmetic", "csv", "iso8601", "sql", "tool_call"):
        path = Path(resolve_library("@" + name))
        assert not path.name.endswith(".yaml"), path
        assert (LIBRARY / f"{name}.test.yaml").is_file()
    assert len(CASE_FILES) >= 6


@pytest.mark.slow  # ~5-12 s: make test-slow, run by CI
def test_every_library_grammar_passes_on_every_backend_that_supports_its_kind(run_cli):
    from sgcli.grammar_dev.grammar_tests import load_suite

    result = run_cli("test", *CASE_FILES, "--json")
    records = _records(result)
    files = {r["path"]: r for r in records if r["type"] == "file"}
    assert len(files) == len(CASE_FILES)
    for path in CASE_FILES:
        suite = load_suite(str(path))
        summary = files[str(path)]
        expected_ran = [n for n in enforcing_backends() if unsupported_reason(get_backend(n), suite.spec) is None]
        ran = [b["backend"] for b in summary["backends"] if b["status"] == "ran"]
        assert ran == expected_ran and ran, (path.name, summary["backends"])
        assert summary["ok"] and summary["failed"] == 0, [r for r in records if r["type"] == "case" and not r["passed"]]
        assert summary["passed"] == len(suite.cases) * len(ran)
        assert any(not c.accept for c in suite.cases) and any(c.accept for c in suite.cases)
    cases = [r for r in records if r["type"] == "case"]
    assert all("bytes" in r["checked"] and "canonical" in r["checked"] for r in cases)
    assert result.exit_code == 0


def test_a_failing_case_exits_1_and_names_case_and_backend(run_cli, tmp_path):
    cases = tmp_path / "digits.test.yaml"
    cases.write_text(
        "grammar: {kind: regex, text: '[0-9]+'}\n"
        "cases:\n"
        "  - {input: '123', accept: true, description: digits}\n"
        "  - {input: '12a', accept: true, description: wrongly expected to pass}\n"
        "  - {input: '', accept: false, description: empty}\n"
    )
    result = run_cli("test", cases, "--backend", "xgrammar")
    assert result.exit_code == 1
    assert f"{cases}:4: case 2 failed on xgrammar" in result.stdout
    assert "bytes: token 2" in result.stdout and "expected accept" in result.stdout
    records = _records(run_cli("test", cases, "--backend", "xgrammar", "--json"))
    assert [r["passed"] for r in records if r["type"] == "case"] == [True, False, True]


@pytest.mark.parametrize("backend", ["xgrammar", "llguidance", "outlines_core"])
def test_a_failing_case_says_what_the_independent_check_makes_of_its_input(run_cli, tmp_path, backend):
    """A valid `"\\u0041"` rejected by a backend (which writes the character itself) failed exactly as an
    invalid input does: nothing told a spelling the backend never writes from a wrong expectation."""
    cases = tmp_path / "short.test.yaml"
    cases.write_text(
        "grammar: {kind: json_schema, text: {type: string, maxLength: 5}}\n"
        "cases:\n"
        "  - {input: '\"\\u0041\"', accept: true}\n"
        "  - {input: '\"abcdefg\"', accept: true}\n"
        "  - {input: '\"abc\"', accept: true}\n"
    )
    result = run_cli("test", cases, "--backend", backend)
    shown = " ".join(result.stdout.split())
    assert result.exit_code == 1 and "jsonschema finds the input valid" in shown, result.stdout
    assert "finds the input invalid too" in shown and "'abcdefg' is too long" in shown
    records = [r for r in _records(run_cli("test", cases, "--backend", backend, "--json")) if r["type"] == "case"]
    assert [r["passed"] for r in records] == [False, False, True]
    assert "refuses this spelling" in records[0]["independent"] and "accept: true" in records[1]["independent"]
    assert records[2]["independent"] is None


DRAFT7_TUPLES = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {
        "closed": {"type": "array", "items": [{"type": "integer"}, {"type": "string"}], "additionalItems": False},
        "rest": {"type": "array", "items": [{"type": "integer"}], "additionalItems": {"type": "string"}},
        "open": {"type": "array", "items": [{"type": "integer"}]},
        "ref": {"$ref": "#/properties/closed/items/1"},
    },
}


@pytest.mark.parametrize("backend", ["xgrammar", "llguidance"])
def test_a_draft_7_tuple_compiles_and_reads_as_jsonschema_reads_it(run_cli, tmp_path, backend):
    """xgrammar refused commitlint's and cspell's draft-7 tuples (`items: [...]`, `additionalItems`): "items
    must be a boolean or an object", with no position. It is given them as 2020-12 spells them."""
    import jsonschema

    (tmp_path / "t.json").write_text(json.dumps(DRAFT7_TUPLES, indent=1))
    cases = {
        '{"closed":[1,"a"]}': True,
        '{"closed":[1]}': True,
        '{"closed":[1,"a",3]}': False,
        '{"closed":["a",1]}': False,
        '{"rest":[1,"a","b"]}': True,
        '{"rest":[1,2]}': False,
        '{"open":[1,"x",null]}': True,
        '{"open":["x"]}': False,
        '{"ref":"s"}': True,
        '{"ref":1}': False,
    }
    validator = jsonschema.Draft7Validator(DRAFT7_TUPLES)
    assert all(validator.is_valid(json.loads(text)) == accept for text, accept in cases.items())
    suite = tmp_path / "t.test.yaml"
    rows = "".join(f"  - {{input: '{text}', accept: {str(accept).lower()}}}\n" for text, accept in cases.items())
    suite.write_text("grammar: t.json\ncases:\n" + rows)
    result = run_cli("test", suite, "--backend", backend, "--json")
    records = _records(result)
    assert [r["input"] for r in records if r["type"] == "case" and not r["passed"]] == [], result.stdout
    assert result.exit_code == 0 and sum(r["type"] == "case" for r in records) == len(cases)


def test_inputs_go_through_real_tokenizations(smol_tokenizer):
    from sgcli.backends.matching import tokenizations

    vocab = smol_tokenizer.vocab
    text = "SELECT DISTINCT city"
    spelled = tokenizations(vocab, text)
    assert spelled["canonical"] == smol_tokenizer.encode(text)
    assert len(spelled["bytes"]) == len(text.encode())
    for ids in spelled.values():
        assert b"".join(vocab.tokens[i] for i in ids) == text.encode()
    assert spelled["longest"] != spelled["canonical"]  # a different, still valid, segmentation


def test_a_tokenization_only_failure_is_caught(smol_tokenizer):
    """A grammar that accepts the string byte by byte but not as the tokenizer spells it."""
    from sgcli.backends.compile_cache import compile_cached
    from sgcli.constraints.spec import ConstraintSpec, Kind
    from sgcli.grammar_dev.grammar_tests import Case, check_case

    vocab = smol_tokenizer.vocab
    spec = ConstraintSpec(Kind.REGEX, "ab")
    compiled = compile_cached(get_backend("xgrammar"), spec, vocab).compiled
    outcome = check_case(compiled, Case(0, "ab", True, ""))
    assert outcome.passed and "bytes" in outcome.checked
    rejected = check_case(compiled, Case(1, "abc", True, ""))
    assert not rejected.passed and any(p.startswith("bytes:") for p in rejected.problems)


def test_grammar_paths_are_relative_to_the_test_file_and_library_names_work(run_cli, tmp_path):
    (tmp_path / "g.gbnf").write_text('root ::= "yes" | "no"\n')
    relative = tmp_path / "rel.test.yaml"
    relative.write_text(
        "grammar: g.gbnf\ncases:\n  - {input: 'yes', accept: true}\n  - {input: 'maybe', accept: false}\n"
    )
    library = tmp_path / "lib.test.yaml"
    library.write_text("grammar: '@iso8601'\ncases:\n  - {input: '2024-01-31', accept: true}\n")
    assert run_cli("test", relative, library).exit_code == 0


def test_a_library_name_runs_that_grammars_own_test_file(run_cli):
    """`sgcli test @csv` was "test file not found": an installed sgcli's tests live in site-packages."""
    result = run_cli("test", "@iso8601", "--backend", "llguidance", "--json")
    assert result.exit_code == 0, result.output
    cases = [r for r in map(json.loads, result.stdout.splitlines()) if r["type"] == "case"]
    assert cases and all(r["path"].endswith("iso8601.test.yaml") and r["passed"] for r in cases)
    typo = run_cli("test", "@iso8061")
    assert typo.exit_code == 2 and "no grammar named @iso8061 in the library" in typo.output


@pytest.mark.parametrize(
    "text, where, what",
    [
        (
            "grammar: {kind: regex, text: a}\ncases:\n  - {input: 'a', accept: true\n  - {input: 'b'}\n",
            ":4:5:",
            "malformed YAML",
        ),
        (
            "grammar: {kind: regex, text: a}\ncases:\n  - {input: 'a', accepts: true}\n",
            ":3:18:",
            "unknown key 'accepts'",
        ),
        (
            "grammar: {kind: regex, text: a}\ncases:\n  - {input: 12, accept: true}\n",
            ":3:13:",
            "'input' must be a string",
        ),
        ("grammar: {kind: cobol, text: a}\ncases:\n  - {input: 'a', accept: true}\n", ":1:17:", "unknown grammar kind"),
        (  # a duplicate was last-wins: this case silently tested "b"
            'grammar: {kind: regex, text: a}\ncases:\n  - {input: "a", accept: true, input: "b"}\n',
            ":3:32:",
            "duplicate key 'input' (first at 3:6)",
        ),
        (  # two cases repeat a key: the first in the file is named (the later one was)
            'grammar: {kind: regex, text: a}\ncases:\n  - {input: "a", input: "b"}\n  - {input: "c", input: "d"}\n',
            ":3:18:",
            "duplicate key 'input' (first at 3:6)",
        ),
        (  # a JSON test file goes through the same reader
            '{"grammar": {"kind": "regex", "text": "a"},\n "cases": [{"input": "a", "accept": true}],\n'
            ' "grammar": "x"}',
            ":3:2:",
            "duplicate key 'grammar' (first at 1:2)",
        ),
        ("cases:\n  - {input: 'a', accept: true}\n", ":1:1:", "no 'grammar' given"),
        (  # a key beside kind and text was ignored without a word
            "grammar: {kind: json_schema, text: {type: object}, json_whitespace: compact}\ncases:\n"
            "  - {input: '{ }', accept: false}\n",
            ":1:52:",
            "grammar: unknown key 'json_whitespace'",
        ),
        (
            "grammar: {kind: regex, txt: a, text: a}\ncases:\n  - {input: 'a', accept: true}\n",
            ":1:24:",
            "Did you mean 'text'?",
        ),
        ("grammar: missing.gbnf\ncases:\n  - {input: 'a', accept: true}\n", "missing.gbnf", "not found"),
    ],
)
def test_malformed_test_files_exit_2_with_line_and_column(run_cli, tmp_path, text, where, what):
    path = tmp_path / "broken.test.yaml"
    path.write_text(text)
    result = run_cli("test", path)
    assert result.exit_code == 2
    assert where in result.stderr and what in result.stderr, result.stderr


def test_a_grammar_that_does_not_compile_fails_the_file(run_cli, tmp_path):
    path = tmp_path / "broken_grammar.test.yaml"
    path.write_text("grammar: {kind: ebnf, text: 'root ::= \"a\" missing'}\ncases:\n  - {input: 'a', accept: true}\n")
    result = run_cli("test", path, "--backend", "xgrammar")
    assert result.exit_code == 1
    assert "error: xgrammar" in result.stdout and "missing" in result.stdout


def test_the_summary_names_the_backend_that_did_not_compile(run_cli, tmp_path):
    """Every case passed on llguidance and xgrammar refused the grammar: the verdict line said "FAILED: 2/2 case
    runs passed on llguidance", which reads as a contradiction; it says what failed."""
    path = tmp_path / "negation.test.yaml"  # llguidance reads `~"b"` (any lexeme but b); xgrammar refuses it
    path.write_text(
        'grammar: {kind: lark, text: \'start: "a" ~"b"\'}\n'
        "cases:\n  - {input: 'ac', accept: true}\n  - {input: 'ab', accept: false}\n"
    )
    result = run_cli("test", path, "--backend", "all")
    assert result.exit_code == 1
    summary = result.stdout.strip().splitlines()[-1]
    assert summary == "FAILED: xgrammar did not compile the grammar; 2/2 case runs passed on llguidance", summary


@pytest.mark.parametrize(
    "content,where",
    [
        ('grammar: {kind: regex, text: "[^a]"}\ncases:\n  - {input: "\\udc80", accept: true}\n', ":3:13"),
        ('grammar: {kind: regex, text: "[^a]"}\ncases:\n  - {input: "\\ud83d\\ude00\\udc80", accept: true}\n', ":3:13"),
        ('grammar: {kind: regex, text: "\\ud800"}\ncases:\n  - {input: "a", accept: true}\n', ":1:30"),
        ('description: "\\ud800"\ngrammar: {kind: regex, text: "a"}\ncases:\n  - {input: a, accept: true}\n', ":1:14"),
    ],
)
def test_a_lone_surrogate_escape_is_exit_2_at_its_place(run_cli, tmp_path, content, where):
    """YAML's "\\ud800" escapes half a UTF-16 pair, which no tokenizer or grammar library takes: exit 3 before."""
    cases = tmp_path / "u.test.yaml"
    cases.write_text(content)
    result = run_cli("test", cases, "--json")
    assert result.exit_code == 2, result.output
    assert f"u.test.yaml{where}: lone surrogate: not UTF-8 text" in result.output


def test_a_surrogate_pair_escape_as_the_lone_surrogate_hint_says_is_the_character(run_cli, tmp_path):
    """PyYAML keeps the halves of "\\ud83d\\ude00" apart: the escape the error's hint recommends was refused."""
    cases = tmp_path / "u.test.yaml"
    cases.write_text(
        'grammar: {kind: regex, text: "\\ud83d\\ude00|a"}\ncases:\n'
        '  - {input: "\\ud83d\\ude00", accept: true}\n  - {input: "x\\ud83d\\ude00", accept: false}\n'
    )
    result = run_cli("test", cases, "--backend", "llguidance", "--json")
    assert result.exit_code == 0, result.output


def test_an_inline_choice_grammar_lists_one_choice_a_line(run_cli, tmp_path):
    """It was the empty-string grammar: "" accepted, "a" rejected."""
    cases = tmp_path / "ch.test.yaml"
    cases.write_text(
        'grammar: {kind: choice, text: "a\\nb"}\ncases:\n'
        '  - {input: "a", accept: true}\n  - {input: "b", accept: true}\n  - {input: "", accept: false}\n'
    )
    result = run_cli("test", cases, "--backend", "llguidance", "--json")
    assert result.exit_code == 0, result.output
    cases.write_text('grammar: {kind: choice, text: ""}\ncases:\n  - {input: "a", accept: true}\n')
    result = run_cli("test", cases, "--backend", "llguidance")
    assert result.exit_code == 2 and "ch.test.yaml:1:31: the choice grammar lists no choices" in result.output


@pytest.mark.parametrize(
    "text",
    [
        "grammar: &a [*a]\ncases: []\n",
        "a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\nd: &d [*c, *c]\ngrammar: [*d, *d]\n",
    ],
    ids=["self-alias", "nested-aliases"],
)
def test_a_test_file_whose_aliases_loop_or_nest_is_read_at_once(run_cli, tmp_path, text):
    """The lone-surrogate walk followed every alias again: `&a [*a]` never ended (exit 2 in 13 ms before)."""
    path = tmp_path / "t.test.yaml"
    path.write_text(text)
    result = run_cli("test", path)
    assert result.exit_code == 2, result.output


def test_a_backends_compile_warnings_are_shown_with_its_results(run_cli, tmp_path):
    """A case failed on outlines_core with no word that it ignores `patternProperties`, which `masks` printed."""
    cases = tmp_path / "pp.test.yaml"
    cases.write_text(
        "grammar: {kind: json_schema, text: {type: object, properties: {a: {type: integer}},\n"
        "  patternProperties: {'^x-': {}}, additionalProperties: false}}\n"
        'cases:\n  - {input: \'{"a": 1, "x-foo": 2}\', accept: true}\n'
    )
    result = run_cli("test", cases, "--backend", "outlines_core")
    shown = " ".join(result.stdout.split())  # the table's width wraps long lines
    assert "warning: outlines_core: 'patternProperties' is ignored by outlines_core" in shown, result.output
    file_record = _records(run_cli("test", cases, "--backend", "outlines_core", "--json"))[-1]
    assert "'patternProperties' is ignored by outlines_core" in file_record["backends"][0]["warnings"]


@pytest.mark.parametrize(
    "cases,where",
    [
        ("[" * 600 + "]" * 600, f":2:{7 + 512}:"),
        ("{a: " * 5000 + "1" + "}" * 5000, f":2:{8 + 4 * 511}:"),  # the file's mapping is level 1
        # a list of one mapping a level (2 levels each): level 513 is the 256th mapping
        ("\n" + "".join(" " * i + "- a:\n" for i in range(0, 2 * 1000, 2)) + " " * 2000 + "b\n", ":258:513:"),
    ],
    ids=["flow-sequences", "flow-mappings", "block"],
)
def test_a_test_file_nested_past_the_json_depth_limit_is_exit_2_at_the_first_deep_level(
    run_cli, tmp_path, cases, where
):
    """PyYAML's composer recurses per level: 500 levels were a RecursionError (exit 3), 300 read fine."""
    from sgcli.constraints.spec import MAX_JSON_DEPTH

    path = tmp_path / "t.test.yaml"
    path.write_text("grammar: {kind: regex, text: a}\ncases: " + cases + "\n")
    result = run_cli("test", path, "--backend", "llguidance")
    assert result.exit_code == 2, result.output
    assert f"t.test.yaml{where} YAML nested more than {MAX_JSON_DEPTH} levels deep" in result.output


def test_a_schema_written_as_yaml_as_deep_as_json_may_be_is_read(tmp_path):
    """The depth limit is JSON's: a schema 250 levels of `properties` deep (500 + the file's own levels) is taken."""
    from sgcli.grammar_dev.grammar_tests import load_suite

    schema = "{type: object, properties: {a: " * 250 + "{type: string}" + "}}" * 250
    path = tmp_path / "t.test.yaml"
    path.write_text(f"grammar: {{kind: schema, text: {schema}}}\ncases:\n  - {{input: '1', accept: false}}\n")
    assert load_suite(str(path)).spec.text.count("properties") == 250


def test_case_inputs_show_as_written_in_the_table(run_cli, tmp_path):
    """The case column showed `"\\["` as `"\\["` with one backslash eaten (rich's markup read it), a raw DEL,
    and a raw U+2028 that broke the row; now each input is its JSON string, what a terminal hides escaped."""
    cases = tmp_path / "display.test.yaml"
    cases.write_text(
        'grammar: {kind: ebnf, text: "root ::= \\"\\\\\\\\\\" [\\\\[\\\\]] | \\"\\\\x7F\\""}\n'
        "cases:\n"
        '  - {input: "\\\\[", accept: true}\n'
        '  - {input: "\\x7F", accept: true}\n'
        '  - {input: "a\\u2028b", accept: false}\n'
    )
    result = run_cli("test", cases, "--backend", "llguidance")
    assert result.exit_code == 0, result.output
    assert '"\\\\["' in result.stdout and '"\\u007f"' in result.stdout and '"a\\u2028b"' in result.stdout
    assert "\x7f" not in result.stdout and "\u2028" not in result.stdout


def test_a_regex_text_a_backend_refuses_is_not_called_another_spelling(run_cli, tmp_path):
    """A regex text has one spelling: where outlines-core refuses `AB-123.xyz` under
    `[A-Z]{2}-[0-9]{3}(\\.[a-z]+)?` (its dropped continuation after an accepting state), the note said
    "refuses this spelling ... string escapes, number forms", which is JSON's story."""
    cases = tmp_path / "plate.test.yaml"
    cases.write_text(
        "grammar: {kind: regex, text: '[A-Z]{2}-[0-9]{3}(\\.[a-z]+)?'}\n"
        "cases:\n  - {input: 'AB-123.xyz', accept: true}\n"
    )
    records = [r for r in _records(run_cli("test", cases, "--backend", "all", "--json")) if r["type"] == "case"]
    failed = [r for r in records if not r["passed"]]
    assert [r["backend"] for r in failed] == ["outlines_core"]  # llguidance and xgrammar take it
    assert "reads this regex otherwise" in failed[0]["independent"] and "spelling" not in failed[0]["independent"]


def test_a_json_value_no_spelling_of_which_is_taken_is_called_a_narrowing(run_cli, tmp_path):
    """outlines-core writes a top-level number as an integer: `4.9` has no other spelling, and the note
    said "refuses this spelling of it" (a tour). Where the compact spelling is taken, the note shows it."""
    cases = tmp_path / "n.test.yaml"
    cases.write_text("grammar: {kind: json_schema, text: {type: number}}\ncases:\n  - {input: '4.9', accept: true}\n")
    records = [
        r for r in _records(run_cli("test", cases, "--backend", "outlines_core", "--json")) if r["type"] == "case"
    ]
    assert not records[0]["passed"]
    assert "narrower than the schema here" in records[0]["independent"]
    assert "spelling" not in records[0]["independent"]
    escaped = tmp_path / "s.test.yaml"
    escaped.write_text(
        "grammar: {kind: json_schema, text: {type: string}}\ncases:\n  - {input: '\"\\u0041\"', accept: true}\n"
    )
    records = [
        r for r in _records(run_cli("test", escaped, "--backend", "llguidance", "--json")) if r["type"] == "case"
    ]
    assert not records[0]["passed"] and 'it takes "\\"A\\""' in records[0]["independent"]


def test_a_case_expected_refused_that_the_check_finds_valid_asks_about_the_case(run_cli, tmp_path):
    """`accept: false` on an input the regex matches failed on every backend with no word, where the
    mirror case (`accept: true` on an invalid input) asks whether the case is right."""
    cases = tmp_path / "ws.test.yaml"
    cases.write_text("grammar: {kind: regex, text: 'a b'}\ncases:\n  - {input: 'a b', accept: false}\n")
    records = [r for r in _records(run_cli("test", cases, "--backend", "llguidance", "--json")) if r["type"] == "case"]
    assert not records[0]["passed"]
    assert records[0]["independent"] == "regex finds the input valid too: is `accept: false` right?"
