"""One constraint option set: every grammar command takes the same kinds, --sub and JSON-layout
flags, with the same conflict rules."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import WEATHER_TAGS, patch_everywhere

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))


def _commands(schema: Path) -> dict[str, list]:
    """Each command that takes a constraint, given `schema` the way that command takes it."""
    suite = schema.parent / "s.test.yaml"
    suite.write_text(f"grammar: {schema.name}\ncases:\n  - {{input: '{{}}', accept: true}}\n")
    return {
        "generate": ["generate", "--schema", schema, "x"],
        "compare-backends": ["compare-backends", "--schema", schema, "x"],
        "lint": ["lint", schema],
        "lint --schema": ["lint", "--schema", schema],
        "compile": ["compile", schema],
        "compile --schema": ["compile", "--schema", schema],
        "masks": ["masks", "--schema", schema],
        "test": ["test", suite],
    }


@pytest.mark.parametrize(
    "layout, named",
    [
        (["--json-whitespace", "compact", "--indent", "2"], ["--json-whitespace compact", "--indent"]),
        (["--whitespace-pattern", "[ ]?", "--max-whitespace", "2"], ["--whitespace-pattern", "--max-whitespace"]),
        (["--whitespace-pattern", "[ "], ["--whitespace-pattern is not a valid regex"]),
    ],
)
def test_every_command_refuses_contradictory_layouts_alike(run_cli, tmp_path, monkeypatch, layout, named):
    import sgcli.tokenizers

    def no_tokenizer(*_a, **_k):
        raise AssertionError("the tokenizer loaded before the flags were checked")

    patch_everywhere(monkeypatch, sgcli.tokenizers, "load_tokenizer", no_tokenizer)
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "object"}')
    messages = set()
    for name, args in _commands(schema).items():
        result = run_cli(*args, *layout)
        assert result.exit_code == 2, (name, result.stdout, result.stderr)
        assert all(flag in result.stderr for flag in named), (name, result.stderr)
        messages.add(result.stderr.strip().splitlines()[0])
    assert len(messages) == 1, messages  # the same words from every command


def test_generation_commands_default_to_compact_json_and_text_checks_to_flexible():
    from sgcli.cli.constraint_options import ConstraintFlags, GenerationConstraintFlags
    from sgcli.constraints.spec import JsonOptions
    from sgcli.errors import UserError

    assert GenerationConstraintFlags().layout() == JsonOptions("compact")
    assert GenerationConstraintFlags(indent=2).layout() == JsonOptions("flexible", indent=2)  # no clash with a default
    assert GenerationConstraintFlags(max_whitespace=4).layout() == JsonOptions("flexible", max_whitespace=4)
    assert GenerationConstraintFlags(json_whitespace="flexible").layout() == JsonOptions("flexible")
    with pytest.raises(UserError, match="--json-whitespace compact and --indent"):
        GenerationConstraintFlags(json_whitespace="compact", indent=2).layout()  # given, both: still a clash
    assert ConstraintFlags().layout() == JsonOptions("flexible")  # masks, test: the schema's whole language
    on_server = GenerationConstraintFlags()
    on_server.for_server()
    assert on_server.layout() == JsonOptions("flexible")  # a server's layout is its own: nothing asked for


@pytest.mark.parametrize("flag", ["schema", "lark", "structural_tag", "grammar"])
def test_every_kind_flag_keeps_the_layout(tmp_path, flag):
    """`--structural-tag` dropped the layout: a tag's JSON took any whitespace under generate's compact
    default, and a random model wrote whitespace until --max-tokens (2026-12-06)."""
    from sgcli.cli.constraint_options import GenerationConstraintFlags
    from sgcli.constraints.spec import JsonOptions

    files = {
        "schema": ("s.json", '{"type": "object"}'),
        "lark": ("g.lark", 'start: "a"\n'),
        "structural_tag": ("t.json", json.dumps(WEATHER_TAGS)),
        "grammar": ("s.json", '{"type": "object"}'),
    }
    name, text = files[flag]
    (tmp_path / name).write_text(text)
    spec = GenerationConstraintFlags(**{flag: str(tmp_path / name)}).spec()
    assert spec.json_options == JsonOptions("compact"), spec.json_options


def test_compare_backends_judges_generates_layout_and_masks_the_schemas_language(run_cli, tmp_path):
    schema = tmp_path / "a.json"
    schema.write_text('{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}')
    compare = ["compare-backends", "--no-generate", "--schema", schema, "-b", "llguidance", "--json", "--text"]
    (row,) = [json.loads(line) for line in run_cli(*compare, '{"a":1}').stdout.splitlines()]
    assert (row["variant"], row["valid"]) == ("compact", True)
    (spaced,) = [json.loads(line) for line in run_cli(*compare, '{"a": 1}').stdout.splitlines()]
    assert spaced["valid"] is False  # generate's default layout has no whitespace to walk
    assert run_cli("masks", "--schema", schema, "-b", "llguidance", "--text", '{"a": 1}').exit_code == 0


def test_lint_takes_sub_grammars(run_cli):
    lark, answer = EXAMPLES / "reasoning_json.lark", EXAMPLES / "answer.schema.json"
    without = run_cli("lint", lark, "--backend", "llguidance")
    assert without.exit_code == 1 and "G001" in without.stdout and "@answer" in without.stdout
    result = run_cli("lint", lark, "--sub", f"answer={answer}")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "All checks passed" in result.stderr


def test_lint_takes_a_constraint_flag(run_cli):
    bad = run_cli("lint", "--regex", "(a|b", "--backend", "llguidance")
    assert bad.exit_code == 1 and "--regex" in bad.stdout
    assert run_cli("lint", "--regex", "(a|b)", "--backend", "llguidance").exit_code == 0
    nothing = run_cli("lint")
    assert nothing.exit_code == 2 and "no grammar given" in nothing.stderr


@pytest.mark.parametrize("backend", ["xgrammar", "llguidance"])
def test_masks_walks_a_structural_tag(run_cli, tmp_path, backend):
    tags = tmp_path / "tags.json"
    tags.write_text(json.dumps(WEATHER_TAGS))
    good = run_cli(
        "masks", "--structural-tag", tags, "-b", backend, "--text", 'hi <function=weather>{"city": "Paris"}</function>'
    )
    assert good.exit_code == 0 and "accepted" in good.stdout, good.stdout + good.stderr
    bad = run_cli(
        "masks", "--structural-tag", tags, "-b", backend, "--text", 'hi <function=weather>{"town": "Paris"}</function>'
    )
    assert bad.exit_code == 1 and "rejected" in bad.stdout


def test_masks_and_compile_take_a_whitespace_pattern(run_cli, tmp_path):
    schema = tmp_path / "a.json"
    schema.write_text('{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}')
    common = ["--schema", schema, "--whitespace-pattern", "[\t]{1,2}", "-b", "llguidance"]
    assert run_cli("masks", *common, "--text", '{\t"a":\t1}').exit_code == 0
    rejected = run_cli("masks", *common, "--text", '{ "a": 1}')
    assert rejected.exit_code == 1 and "rejected" in rejected.stdout
    compiled = run_cli("compile", "--schema", schema, "--whitespace-pattern", "[\t]{1,2}", "--json")
    rows = {r["backend"]: r for r in map(json.loads, compiled.stdout.splitlines())}
    assert rows["llguidance"]["status"] == "ok" and rows["outlines_core"]["status"] == "ok"
    assert rows["xgrammar"]["status"] == "unsupported" and "--whitespace-pattern" in rows["xgrammar"]["message"]


def test_test_command_applies_layout_flags(run_cli, tmp_path):
    (tmp_path / "a.json").write_text('{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}')
    suite = tmp_path / "a.test.yaml"
    suite.write_text("grammar: a.json\ncases:\n  - {input: '{\"a\": 1}', accept: true}\n")
    assert run_cli("test", suite, "-b", "llguidance").exit_code == 0
    compact = run_cli("test", suite, "-b", "llguidance", "--json-whitespace", "compact")
    assert compact.exit_code == 1 and "FAIL" in compact.stdout


def test_schema_takes_inline_json_as_llm_and_vllm_do(run_cli, tmp_path):
    inline = '{"type": "integer", "minimum": 3}'
    result = run_cli("compile", "--schema", inline, "-b", "llguidance", "--output-format", "json-lines")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["path"] == "--schema"
    masks = run_cli("masks", "--schema", inline, "--text", "12", "-b", "llguidance")
    assert masks.exit_code == 0, masks.stderr
    (tmp_path / "s.json").write_text(inline)  # the same schema from a file: the same lint
    assert run_cli("lint", "--schema", inline).stdout.replace("--schema", "F") == run_cli(
        "lint", "--schema", tmp_path / "s.json"
    ).stdout.replace(str(tmp_path / "s.json"), "F")


@pytest.mark.parametrize(
    ("inline", "expected"),
    [
        ('{"type": "integer"', "error: --schema:1:19: invalid JSON"),
        ('{"type": "integer", "minimum": "x"}', "error: --schema:1:32: invalid JSON Schema at /minimum:"),
        ('{"properties": {"a": {"type": "bogus"}}}', "--schema:1:31: invalid JSON Schema at /properties/a/type:"),
        ('{"$schema": 5}', "error: --schema:1:13: invalid JSON Schema at /$schema:"),
    ],
)
def test_bad_inline_schema_is_exit_2_at_its_column(run_cli, inline, expected):
    result = run_cli("compile", "--schema", inline, "-b", "llguidance")
    assert result.exit_code == 2 and expected in result.stderr, result.stderr


_TYPES = "(array, boolean, integer, null, number, object, string)"


@pytest.mark.parametrize(
    ("inline", "expected"),
    [  # the first mistake in the file, and how many follow it (jsonschema's walk met `properties` first)
        (
            '{"minimum": "x", "properties": {"a": {"type": "bogus"}, "b": {"type": ["string", "intrinsic"]}}}',
            "--schema:1:13: invalid JSON Schema at /minimum: 'x' is not of type 'number' (and 2 more)",
        ),
        (
            '{"type": ["string", "intrinsic"]}',
            f"--schema:1:21: invalid JSON Schema at /type/1: 'intrinsic' is not a JSON Schema type {_TYPES}\n",
        ),
        (
            '{"items": {"type": "strin"}}',
            f"--schema:1:20: invalid JSON Schema at /items/type: 'strin' is not a JSON Schema type {_TYPES}\n",
        ),
    ],
)
def test_an_invalid_schema_is_refused_at_its_first_mistake_in_words_for_its_author(run_cli, inline, expected):
    result = run_cli("compile", "--schema", inline, "-b", "llguidance")
    assert result.exit_code == 2 and expected in result.stderr, result.stderr


def test_a_schema_with_many_mistakes_is_refused_at_the_same_place_on_every_run():
    """jsonschema walks a draft-07 `properties` in set order: check_schema's error moved with the hash seed."""
    import subprocess
    import sys

    props = {name: {"type": ["string", "intrinsic"]} for name in "abcdefgh"}
    schema = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "properties": props})
    code = (
        "import sys; from sgcli.constraints.schema_input import check_schema; from sgcli.constraints.spec import "
        "ConstraintSpec, Kind; from sgcli.errors import UserError\ntry: check_schema(ConstraintSpec(Kind.JSON_SCHEMA, "
        "sys.argv[1], 's.json'))\nexcept UserError as e: print(e.location, e.message)"
    )
    seen = set()
    for seed in range(4):
        env = {**os.environ, "PYTHONHASHSEED": str(seed)}
        run = subprocess.run([sys.executable, "-c", code, schema], capture_output=True, text=True, env=env, check=True)
        seen.add(run.stdout.strip())
    assert len(seen) == 1, seen
    first = "/properties/a/type/1: 'intrinsic' is not a JSON Schema type"
    assert seen.pop() == f"s.json:1:96 invalid JSON Schema at {first} {_TYPES} (and 7 more)"


def test_a_schema_file_name_is_still_a_file(run_cli, tmp_path):
    result = run_cli("compile", "--schema", tmp_path / "missing.json")
    assert result.exit_code == 2 and "not found" in result.stderr


@pytest.mark.parametrize("layout", [["--indent", "2"], ["--max-whitespace", "1"], ["--strict-properties"]])
def test_a_layout_flag_on_a_grammar_without_json_is_refused_by_every_command(run_cli, tmp_path, monkeypatch, layout):
    """A JSON layout flag given with a GBNF grammar would change nothing: exit 2, never ignored."""
    import sgcli.tokenizers

    def no_tokenizer(*_a, **_k):
        raise AssertionError("the tokenizer loaded before the flags were checked")

    patch_everywhere(monkeypatch, sgcli.tokenizers, "load_tokenizer", no_tokenizer)
    grammar = tmp_path / "g.gbnf"
    grammar.write_text('root ::= "yes" | "no"\n')
    suite = tmp_path / "g.test.yaml"
    suite.write_text("grammar: g.gbnf\ncases:\n  - {input: 'yes', accept: true}\n")
    commands = {
        "generate": ["generate", "--grammar", grammar, "x"],
        "compare-backends": ["compare-backends", "--grammar", grammar, "x"],
        "lint --grammar": ["lint", "--grammar", grammar],
        "compile": ["compile", grammar],
        "masks": ["masks", "--grammar", grammar],
        "test": ["test", suite],
        "convert": ["convert", grammar, "--to", "lark"],
    }
    why = {  # --strict-properties said "its own text decides its whitespace", no reason for a property rule
        "--indent": "has no JSON to lay out; its own text decides its whitespace",
        "--max-whitespace": "has no JSON to lay out; its own text decides its whitespace",
        "--strict-properties": "has no JSON object for --strict-properties to close (the flag shapes JSON objects",
    }
    for name, args in commands.items():
        result = run_cli(*args, *layout)
        assert result.exit_code == 2, (name, result.stdout, result.stderr)
        assert f"{layout[0]}: {grammar} (EBNF/GBNF) {why[layout[0]]}" in result.stderr, (name, result.stderr)


def test_a_layout_flag_applies_to_a_lark_grammars_json_sub_schemas(run_cli, tmp_path):
    lark = tmp_path / "g.lark"
    lark.write_text("start: @answer\n")
    schema = tmp_path / "a.json"
    schema.write_text('{"type": "object", "properties": {"a": {"type": "integer"}}}')
    result = run_cli("compile", lark, "--sub", f"answer={schema}", "--strict-properties", "-b", "llguidance")
    assert result.exit_code == 0, result.stderr
    assert "has no JSON to lay out" not in result.stderr


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r", "\r\n\r\n", ""])
def test_a_regex_files_final_line_ending_is_not_part_of_the_pattern(tmp_path, ending):
    # "\r\n" (Windows) kept "\r" in the pattern: every output had to end in a carriage return
    from sgcli.constraints.sources import from_file

    path = tmp_path / "yn.regex"
    path.write_bytes(f"(yes|no){ending}".encode())
    assert from_file(str(path)).text == "(yes|no)"
