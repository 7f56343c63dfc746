"""`sgcli convert`: GBNF -> Lark, regex -> EBNF, JSON Schema -> EBNF, and the round-trip check."""

from __future__ import annotations

import json

import corpora
import pytest

from sgcli.constraints.spec import ConstraintSpec, Kind


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))


def _record(result) -> dict:
    (line,) = [ln for ln in result.stdout.splitlines() if ln.strip()]
    return json.loads(line)


@pytest.mark.parametrize("path", corpora.files("gbnf", "grammars", "*.gbnf"), ids=lambda p: getattr(p, "name", None))
def test_real_gbnf_grammars_convert_to_lark_every_lark_backend_compiles(path, smol_tokenizer):
    path = corpora.resolve(path)
    from sgcli.backends import get_backend
    from sgcli.grammar_dev.gbnf_to_lark import convert
    from sgcli.grammar_dev.matching import backends_for

    lark = convert(path.read_text(), str(path))
    assert lark.startswith("start:") or "\nstart:" in lark
    spec = ConstraintSpec(Kind.LARK, lark, f"{path.name} as Lark")
    names = backends_for(spec)
    assert names
    for name in names:
        get_backend(name).compile(spec, smol_tokenizer.vocab)  # raises a UserError if it does not


def test_gbnf_to_lark_renames_rules_and_translates_repetitions():
    from sgcli.grammar_dev.gbnf_to_lark import convert

    lark = convert('root ::= my-item{2,3} rest\nmy-item ::= [a-c\\]] | "\\x41"\nrest ::= "x"{2,} | "y"?\n')
    assert lark.splitlines() == [
        "start: my_item ~ 2..3 rest",
        'my_item: /[a-c\\]]/ | "A"',
        'rest: ("x" ~ 2 "x"*) | "y"?',
    ]


@pytest.mark.parametrize(
    "text, where, what",
    [
        ('root ::= "a" (\n', "1:15", "missing ')'"),
        ('root ::= "a" itm\nitem ::= "x"\n', "1:14", "undefined rule 'itm'"),
        ('start ::= "a"\n', "1:1", "no 'root' rule"),
        ('root ::= "a"\nroot ::= "b"\n', "2:1", "defined twice"),
        ('root ::= "a\n', "1:10", "unterminated string"),
    ],
)
def test_gbnf_mistakes_are_positioned(run_cli, tmp_path, text, where, what):
    path = tmp_path / "bad.gbnf"
    path.write_text(text)
    result = run_cli("convert", path, "--to", "lark")
    assert result.exit_code == 2
    assert f"{path}:{where}:" in result.stderr and what in result.stderr, result.stderr


@pytest.mark.parametrize(
    "ref, to", [("@json", "lark"), ("@arithmetic", "lark"), ("@iso8601", "ebnf"), ("@tool_call", "ebnf")]
)
def test_library_grammars_convert_and_round_trip(run_cli, ref, to):
    result = run_cli("convert", ref, "--to", to, "--samples", "4", "--json")
    record = _record(result)
    check = record["round_trip"]
    assert result.exit_code == 0, check
    assert check["ok"] and not check["failures"] and check["backends"]
    assert check["checked"]["cases"] > 0  # the library's test file is picked up beside the grammar
    assert check["checked"]["source samples"] > 0 and check["checked"]["converted samples"] > 0
    assert record["to"] == ("lark" if to == "lark" else "ebnf") and record["text"].strip()


def test_schema_to_ebnf_follows_json_layout(run_cli, tmp_path):
    schema = tmp_path / "point.json"
    schema.write_text('{"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}')
    result = run_cli("convert", schema, "--to", "ebnf", "--samples", "5")
    assert result.exit_code == 0
    assert "root ::=" in result.stdout and '"\\"x\\""' in result.stdout
    assert "round trip ok" in result.stderr


def test_the_round_trip_catches_a_wrong_conversion(smol_tokenizer):
    from sgcli.grammar_dev.convert import round_trip
    from sgcli.grammar_dev.grammar_tests import Case

    source = ConstraintSpec(Kind.REGEX, "[0-9]{2,4}", "--regex")
    too_narrow = ConstraintSpec(Kind.EBNF, "root ::= [0-9] [0-9] [0-9]", "narrow.ebnf")
    report = round_trip(
        source, too_narrow, smol_tokenizer.vocab, samples=10, cases=[Case(0, "12", True, ""), Case(1, "123", True, "")]
    )
    assert not report.ok
    assert any("case 1 is accepted by the source but rejected" in f for f in report.failures)
    assert any("source sample is rejected" in f for f in report.failures)
    same = ConstraintSpec(Kind.EBNF, "root ::= [0-9] [0-9] ([0-9] [0-9]?)?", "same.ebnf")
    assert round_trip(source, same, smol_tokenizer.vocab, samples=10).ok


def test_cli_reports_the_check_and_exits_1_when_the_round_trip_fails(run_cli, tmp_path, monkeypatch):
    import sgcli.grammar_dev.convert as convert

    (tmp_path / "digits.regex").write_text("[0-9]{2,4}\n")
    cases = tmp_path / "c.test.yaml"
    cases.write_text("grammar: digits.regex\ncases:\n  - {input: '12', accept: true}\n")
    ok = run_cli("convert", tmp_path / "digits.regex", "--to", "ebnf", "--cases", cases, "--samples", "3")
    assert ok.exit_code == 0 and "cases from" in ok.stderr and "round trip ok" in ok.stderr
    # A converter with a bug: the check must say so and fail the command.
    monkeypatch.setitem(convert.CONVERTERS, (Kind.REGEX, Kind.EBNF), lambda spec: "root ::= [0-9] [0-9] [0-9]\n")
    bad = run_cli("convert", tmp_path / "digits.regex", "--to", "ebnf", "--cases", cases, "--samples", "3")
    assert bad.exit_code == 1
    assert "round trip FAILED" in bad.stderr and "case 1 is accepted by the source but rejected" in bad.stderr


def test_unsupported_conversions_exit_2(run_cli):
    assert run_cli("convert", "@csv", "--to", "ebnf").exit_code == 2
    assert run_cli("convert", "@json", "--to", "yaml").exit_code == 2
    result = run_cli("convert", "@iso8601", "--to", "lark")
    assert result.exit_code == 2 and "available:" in result.stderr
