"""`sgcli masks`: the dry run that steps a matcher through a text's tokens."""

from __future__ import annotations

import json

import pytest

from sgcli.backends.matching import backends_for

SCHEMA = '{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}'


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def schema_file(tmp_path):
    path = tmp_path / "a.json"
    path.write_text(SCHEMA)
    return path


def _trace(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def _json_schema_backends():
    from sgcli.constraints.spec import ConstraintSpec, Kind

    return backends_for(ConstraintSpec(Kind.JSON_SCHEMA, SCHEMA))


@pytest.mark.parametrize("backend", _json_schema_backends())
def test_rejected_text_names_the_token_the_byte_and_the_allowed_set(run_cli, schema_file, smol_tokenizer, backend):
    text = '{"a": x'
    result = run_cli("masks", "--schema", schema_file, "--text", text, "--backend", backend, "--json")
    assert result.exit_code == 1
    *steps, summary = _trace(result)
    assert summary["verdict"] == "rejected"
    rejected = summary["rejected"]
    ids = smol_tokenizer.encode(text)
    # The token holding 'x' is the one rejected; the space before it was fine, so the first
    # bad byte is the 'x' itself.
    index = rejected["token_index"]
    assert ids[index] == rejected["token"] and "x" in rejected["text"]
    assert rejected["byte_offset"] == text.index("x")
    allowed_texts = {t["text"] for t in rejected["allowed"]["sample"]}
    assert rejected["allowed"]["n_allowed"] > 0 and allowed_texts
    assert all(t.strip() == "" or t.lstrip()[0] in "-0123456789" for t in allowed_texts), allowed_texts
    assert "x" not in rejected["next_bytes"] and "0-9" in rejected["next_bytes"]
    assert [s["allowed"] for s in steps] == [True] * index + [False]


def test_human_output_names_the_rejected_token_and_what_was_allowed(run_cli, schema_file):
    result = run_cli("masks", "--schema", schema_file, "--text", '{"a": x', "--top", "5")
    assert result.exit_code == 1
    out = result.stdout
    assert 'rejected at token 3 " x"' in out and "first bad byte: 6 (x)" in out
    assert "allowed there:" in out and '"0"' in out and "next byte must be one of" in out


def _regex_backends(pattern: str):
    from sgcli.constraints.spec import ConstraintSpec, Kind

    return backends_for(ConstraintSpec(Kind.REGEX, pattern))


@pytest.mark.parametrize("backend", _regex_backends("é+"))
def test_first_bad_byte_inside_a_character_is_the_same_on_every_backend(run_cli, backend):
    """outlines-core refuses the lone \\xc3 after an accepting state: sgcli blamed byte 2 (\\xc3)
    while saying the next byte must be \\xc3; the bad byte is 3 (\\xa8 of è), where é has \\xa9."""
    result = run_cli("masks", "--regex", "é+", "--text", "éèé", "--backend", backend, "--json")
    assert result.exit_code == 1, result.output
    rejected = _trace(result)[-1]["rejected"]
    assert (rejected["byte_offset"], rejected["next_bytes"]) == (3, "[\\xa9]")


@pytest.mark.parametrize("regex,text,shown", [("é+", "éèé", "3 (\\xa8)"), ("a+", "a文", "1 (\\xe6)")])
def test_a_non_ascii_bad_byte_is_shown_as_an_escape(run_cli, regex, text, shown):
    """It was printed as a Latin-1 character: 3 (¨), 1 (æ)."""
    result = run_cli("masks", "--regex", regex, "--text", text)
    assert result.exit_code == 1, result.output
    assert f"first bad byte: {shown}" in result.stdout


def test_accepted_text_walks_to_acceptance(run_cli, schema_file, smol_tokenizer):
    text = '{"a": 12}'
    result = run_cli("masks", "--schema", schema_file, "--text", text, "--json")
    assert result.exit_code == 0
    *steps, summary = _trace(result)
    assert summary["verdict"] == "accepted" and summary["end"]["can_stop"]
    assert [s["token"] for s in steps] == smol_tokenizer.encode(text)
    assert all(s["allowed"] for s in steps) and all(s["n_allowed"] >= 1 for s in steps)
    assert "".join(s["text"] for s in steps) == text
    assert [s["offset"] for s in steps] == [sum(len(t["text"].encode()) for t in steps[:i]) for i in range(len(steps))]


@pytest.mark.parametrize("backend", _json_schema_backends())
def test_a_valid_text_a_backend_never_spells_that_way_is_told_apart_from_an_invalid_one(run_cli, tmp_path, backend):
    """`"\\u0041"` is a valid string of at most 5 characters, but every backend's grammar writes the character
    itself: masks said only "rejected", as for a text that breaks the schema."""
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "string", "maxLength": 5}')
    args = ("masks", "--schema", schema, "--backend", backend)
    summary = _trace(run_cli(*args, "--text", '"\\u0041"', "--json"))[-1]
    assert summary["verdict"] == "rejected", summary
    assert summary["independent"] == {"valid": True, "validated_by": "jsonschema", "errors": [], "unchecked": None}
    assert "refuses this spelling of it" in " ".join(run_cli(*args, "--text", '"\\u0041"').stdout.split())
    bad = run_cli(*args, "--text", '"abcdef"')
    assert bad.exit_code == 1 and "this spelling" not in bad.stdout
    assert _trace(run_cli(*args, "--text", '"abcdef"', "--json"))[-1]["independent"]["valid"] is False
    good = _trace(run_cli(*args, "--text", '"abc"', "--json"))[-1]
    assert good["verdict"] == "accepted" and good["independent"]["valid"] is True


def test_a_valid_prefix_is_not_a_rejection(run_cli, schema_file):
    result = run_cli("masks", "--schema", schema_file, "--text", '{"a": 1', "--json")
    assert result.exit_code == 0
    summary = _trace(result)[-1]
    assert summary["verdict"] == "prefix" and not summary["end"]["can_stop"]
    assert any(t["text"] == "}" for t in summary["end"]["sample"]) or summary["end"]["n_allowed"] > 8


def test_text_dash_reads_what_a_pipe_gives_and_one_stdin_only(run_cli, schema_file):
    """`--text -` was the one-character text "-"; with the grammar from stdin as well, the grammar was
    read as the text's bytes' schema ("a JSON Schema must be an object ..."), or compare-backends
    judged the text as the grammar (exit 1, a finding)."""
    piped = run_cli("masks", "--schema", schema_file, "--text", "-", "--json", input='{"a": 1}\n')
    assert piped.exit_code == 0, piped.output
    assert _trace(piped)[-1]["verdict"] == "accepted"  # echo's newline dropped, as $(...) drops it
    for command in (["masks", "--schema", "-"], ["masks", "-"], ["compare-backends", "--no-generate", "--ebnf", "-"]):
        both = run_cli(*command, "--text", "-", input='root ::= "a"')
        assert both.exit_code == 2, both.output
        assert "are '-': only one input can come from stdin" in both.output and "--text" in both.output


def test_without_text_shows_the_first_step(run_cli, schema_file):
    result = run_cli("masks", "--schema", schema_file, "--backend", "xgrammar", "--json")
    assert result.exit_code == 0
    (summary,) = _trace(result)
    assert summary["verdict"] == "start"
    assert summary["end"]["forced"] == "{"  # an object must open with a brace
    assert {t["text"][0] for t in summary["end"]["sample"]} == {"{"}
    human = run_cli("masks", "--schema", schema_file)
    assert "first step" in human.stdout and "forced" in human.stdout


def test_grammar_argument_and_library_names(run_cli):
    result = run_cli("masks", "@iso8601", "--text", "2024-13", "--json")
    assert result.exit_code == 1
    rejected = _trace(result)[-1]["rejected"]
    assert rejected["byte_offset"] == 6  # '3' after '1': months stop at 12
    assert rejected["next_bytes"] == "[0-2]"


def test_bad_usage_exits_2(run_cli, schema_file, tmp_path):
    assert run_cli("masks", "--text", "x").exit_code == 2  # no grammar
    assert run_cli("masks", schema_file, "--regex", "a", "--text", "a").exit_code == 2  # two grammars
    assert run_cli("masks", "--regex", "a", "--backend", "nope").exit_code == 2
    assert run_cli("masks", tmp_path / "missing.json").exit_code == 2


@pytest.mark.parametrize(
    "command",
    [
        ["masks", "--ebnf", "{g}", "--text", "zzz"],
        ["compile", "{g}"],
        ["compile", "{g}", "--backend", "all", "--backend", "none"],
        ["test", "{t}", "--backend", "none"],
        ["bench", "{g}", "--backend", "none"],
    ],
)
def test_backend_none_has_no_matcher_to_dry_run(run_cli, tmp_path, monkeypatch, command):
    """It said "accepted: the text is a complete match" for `root ::= ""` and "zzz", and compile "ok"."""
    grammar = tmp_path / "emp.gbnf"
    grammar.write_text('root ::= ""\n')
    suite = tmp_path / "emp.test.yaml"
    suite.write_text('grammar: emp.gbnf\ncases:\n  - {input: "a", accept: false}\n')
    monkeypatch.setenv("SGCLI_BACKEND", "none")
    result = run_cli(*[part.format(g=grammar, t=suite) for part in command])
    assert result.exit_code == 2, result.output
    assert "backend 'none' constrains nothing" in result.output and "llguidance" in result.output


def test_char_class_is_compact_and_escaped():
    from sgcli.grammar_dev.dryrun import char_class

    assert char_class({ord(c) for c in "0123456789-"}) == "[\\-0-9]"
    assert char_class({9, 10, 32, ord("]")}) == "[\\t\\n \\]]"
    assert char_class({ord("a"), ord("b")}) == "[ab]"
    assert char_class(set()) == "[]"


def test_a_choice_reaches_an_alternative_an_earlier_one_is_a_prefix_of(run_cli, tmp_path):
    """outlines-core never reached `yesterday` after `yes` (its regex stopped at the first alternative):
    the choices are written longest first."""
    result = run_cli("masks", "--choice", "yes", "--choice", "yesterday", "-b", "outlines_core", "--text", "yesterday")
    assert result.exit_code == 0 and "accepted" in result.stdout, result.output


def test_a_text_no_token_writes_is_said_so(run_cli):
    result = run_cli("masks", "--regex", "a.b", "--text", "a\x04b")
    assert "no token writes 0x04" in " ".join(result.stdout.split())


def test_an_empty_tokenizer_is_refused_not_read_as_the_default(run_cli):
    """`--tokenizer "$TOK"` with TOK unset ran on the embedded model's tokenizer without a word."""
    result = run_cli("masks", "--regex", "a", "--text", "a", "--tokenizer", "")
    assert result.exit_code == 2 and "--tokenizer is empty" in result.stderr


@pytest.mark.parametrize("backend", _regex_backends("ab"))
@pytest.mark.parametrize(("pattern", "text"), [("ab", "a"), ("capital", "cap"), ("abcd", "abc"), ("x(ab)?", "xa")])
def test_a_prefix_the_mask_would_split_otherwise_is_a_prefix(run_cli, backend, pattern, text):
    """llguidance's mask allows only its own split of forced text ("ab" for TEXT "a"): `masks` called a
    valid prefix rejected (exit 1), its first bad byte 1, past the end of TEXT."""
    result = run_cli("masks", "--regex", pattern, "--text", text, "--backend", backend, "--json")
    assert result.exit_code == 0, result.output
    summary = _trace(result)[-1]
    assert summary["verdict"] == "prefix" and "rejected" not in summary


@pytest.mark.parametrize("backend", _regex_backends("hello world"))
def test_a_text_past_where_the_grammar_may_stop_must_end_there(run_cli, backend):
    """It said "no byte may follow", reading whether the grammar could stop before the rejected token."""
    result = run_cli("masks", "--regex", "hello world", "--text", "hello worlds", "--backend", backend)
    assert result.exit_code == 1, result.output
    assert "first bad byte: 11 (s)" in result.stdout and "the text must end there" in result.stdout


def test_a_raw_byte_and_the_text_backslash_x_read_apart():
    """Both were shown `\\xe6` (errors="backslashreplace"): the human text doubles a real backslash."""
    from sgcli.grammar_dev.dryrun import piece_text

    assert piece_text(b"\xe6") == '"\\xe6"' and piece_text(b"\\xe6") == '"\\\\xe6"'
    assert piece_text("a文\n".encode()) == '"a文\\n"'


def test_json_gives_each_tokens_bytes_and_whether_it_is_special(run_cli):
    """A stop token read as the text it spells (Tekken's `</s>`), and a stray byte as a backslash-x."""
    result = run_cli("masks", "--regex", "a+", "--text", "a文", "--json")
    assert result.exit_code == 1
    rejected = _trace(result)[-1]["rejected"]
    assert (rejected["text"], rejected["hex"], rejected["special"]) == ("文", "e69687", False)
    sample = {s["text"]: s for s in rejected["allowed"]["sample"]}
    assert sample["a"]["hex"] == "61" and not sample["a"]["special"]
    assert sample["<|im_end|>"]["special"] and sample["<|im_end|>"]["hex"] == b"<|im_end|>".hex()
    assert '"<|im_end|>"(special)' in run_cli("masks", "--regex", "a+", "--text", "a文").stdout


def test_the_help_schema_example_is_accepted(run_cli, monkeypatch):
    """masks --help's first example typed `{"capital": "Pa` under capital.json, whose first property is
    "country": rejected at token 1. An example must show a walk that stays in the grammar."""
    import shlex
    from pathlib import Path

    from sgcli.cli.masks_cmd import EXAMPLES

    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    line = next(line for line in EXAMPLES.splitlines() if "examples/capital.json" in line)
    words = shlex.split(line)
    assert words[:2] == ["sgcli", "masks"]
    result = run_cli(*words[1:], "--json")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("backend", _json_schema_backends())
def test_properties_out_of_the_schemas_order_are_rejected(run_cli, tmp_path, backend):
    """What README and docs/guarantee.md say: every backend writes properties in the order the schema
    lists them, so a valid instance with its keys in another order is rejected at its first key."""
    schema = tmp_path / "two.json"
    schema.write_text('{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}')
    ordered = run_cli("masks", "--schema", schema, "--text", '{"a": 1, "b": 2}', "-b", backend, "--json")
    reordered = run_cli("masks", "--schema", schema, "--text", '{"b": 2, "a": 1}', "-b", backend, "--json")
    assert (ordered.exit_code, reordered.exit_code) == (0, 1), (ordered.output, reordered.output)


def test_a_warning_about_several_places_names_each_once(run_cli):
    """examples/component.json: "Unknown format: path (2 times)" was shown twice, each time at one place."""
    from pathlib import Path

    from sgcli.backends.base import CompileWarning, warning_lines

    component = Path(__file__).resolve().parent.parent / "examples" / "component.json"
    result = run_cli("masks", "--schema", component, "-b", "llguidance")
    lines = [line for line in result.stderr.splitlines() if "Unknown format" in line]
    assert lines == [
        "warning: llguidance: Unknown format: path (2 times) "
        "(at /properties/templateUrl/format and /properties/styleUrls/items/format)"
    ], result.stderr
    three = [CompileWarning("m", p) for p in ("/a", "/b", "/c")] + [CompileWarning("n")]
    assert warning_lines(three) == ["m (at /a, /b and /c)", "n"]


@pytest.mark.parametrize(
    "module, args",
    [("masks_cmd", ("masks", "--regex", "a+", "--text", "aa")), ("compile_cmd", ("compile", "--regex", "a+"))],
)
def test_a_slow_tokenizer_conversion_is_said_on_stderr(run_cli, monkeypatch, smol_tokenizer, module, args):
    """The first command in a fresh cache converted the GGUF tokenizer for 12-19 s and said nothing when
    stderr was not a terminal (a CI log): the loader's progress reaches stderr as a note."""
    import importlib

    cmd = importlib.import_module(f"sgcli.cli.{module}")

    def slow_load(ref, *, progress=None, **_):
        assert progress is not None
        progress("converting the GGUF tokenizer (once; cached afterwards)")
        return smol_tokenizer

    monkeypatch.setattr(cmd, "load_tokenizer", slow_load)
    result = run_cli(*args)
    assert result.exit_code == 0, result.output
    assert "note: converting the GGUF tokenizer (once; cached afterwards)" in result.stderr


def test_a_matcher_that_fails_at_its_first_mask_is_reported_as_the_compile_saw_it(tmp_path, smol_tokenizer):
    """llguidance 1.9.1 panics at the first mask of a `[lazy]` rule over `/[^\\n]*/`; the bounded compile
    keeps that first step, and a second matcher from the same prototype then said only "PoisonError".
    The dry run reports the first step's own error (whatever this llguidance version says there)."""
    from sgcli.backends import get_backend
    from sgcli.backends.matching import first_mask_error
    from sgcli.constraints.spec import ConstraintSpec, Kind
    from sgcli.grammar_dev.dryrun import dry_run

    spec = ConstraintSpec(Kind.LARK, 'start: "<a>" text "</a>"\ntext[lazy]: /[^\\n]*/\n', "lazy.lark")
    compiled = get_backend("llguidance").compile(spec, smol_tokenizer.vocab)
    failed = first_mask_error(compiled)
    run = dry_run(compiled, "<a>hi</a>")
    assert run.error == failed
    assert "PoisonError" not in (run.error or "") and "<backtrace>" not in (run.error or "")


@pytest.mark.parametrize("backend", _regex_backends("ab"))
@pytest.mark.parametrize(("text", "bad"), [("abcd", 3), ("abx", 2)])
def test_a_token_refused_for_its_split_before_the_text_goes_wrong_says_both(run_cli, backend, text, bad):
    """llguidance refused token 0 ("ab": it forces "abc") and `masks` said the text wanted another split,
    blaming that token for a byte (3, "d") past its end: no split of "abcd" is accepted."""
    result = run_cli("masks", "--regex", "abc", "--text", text, "--backend", backend, "--json")
    assert result.exit_code == 1, result.output
    rejected = _trace(result)[-1]["rejected"]
    assert rejected["byte_offset"] == bad
    note = rejected["note"] or ""
    assert "split differently" not in note or f"TEXT goes wrong after it anyway, at byte {bad}" in note
