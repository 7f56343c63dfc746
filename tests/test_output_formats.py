"""One CLI dialect: every command takes --output-format concise|json|json-lines (ruff's names; text
and jsonl the older spellings of the same), lint adds its own; --json stays an alias."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parent.parent / "sgcli" / "grammars"


def _flat(text: str) -> str:
    """Rich's boxes and line wraps removed, so a message can be matched as one line."""
    return " ".join(re.sub("[\u2500-\u257f]", " ", text).split())


def _jsonl(stdout: str) -> list:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


@pytest.fixture
def files(tmp_path):
    (tmp_path / "g.gbnf").write_text('root ::= "a" [0-9]+\n')
    (tmp_path / "chat.json").write_text('[{"role": "user", "content": "Hi"}]')
    return tmp_path


STREAMS = {  # commands that print a stream of records
    "backends": lambda f: ["backends"],
    "rule --all": lambda f: ["rule", "--all"],
    "compile": lambda f: ["compile", f / "g.gbnf", "-b", "llguidance"],
    "masks": lambda f: ["masks", "--ebnf", f / "g.gbnf", "--text", "a12", "-b", "llguidance"],
    "test": lambda f: ["test", LIB / "iso8601.test.yaml", "-b", "llguidance"],
    "compare-backends": lambda f: ["compare-backends", "--no-generate", "--regex", "[0-9]+", "-b", "llguidance"],
    "cache info": lambda f: ["cache", "info"],
    "config": lambda f: ["config"],
}
DOCUMENTS = {  # commands that print one document
    "rule CODE": lambda f: ["rule", "G001"],
    "convert": lambda f: ["convert", f / "g.gbnf", "--to", "lark", "--no-check"],
    "tokenizer inspect": lambda f: ["tokenizer", "inspect", "default"],
    "template render": lambda f: ["template", "render", "--messages", f / "chat.json"],
}


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_streams_give_jsonl_and_a_json_array(run_cli, files, name, monkeypatch, tmp_path):
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))
    args = STREAMS[name](files)
    lines = run_cli(*args, "--output-format", "jsonl")
    assert lines.exit_code in (0, 1), lines.stderr
    records = _jsonl(lines.stdout)
    document = run_cli(*args, "--output-format", "json")
    assert document.exit_code == lines.exit_code
    parsed = json.loads(document.stdout)
    if name in ("cache info", "config"):  # one document whose rows are the JSONL lines
        assert isinstance(parsed, dict)
    else:
        assert isinstance(parsed, list) and len(parsed) == len(records) and parsed
        assert [sorted(r) for r in parsed] == [sorted(r) for r in records]


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_documents_give_one_json_object(run_cli, files, name):
    args = DOCUMENTS[name](files)
    for fmt in ("json", "jsonl"):
        result = run_cli(*args, "--output-format", fmt)
        assert result.exit_code == 0, result.stderr
        (obj,) = _jsonl(result.stdout)
        assert isinstance(obj, dict)
    assert _jsonl(run_cli(*args, "--json").stdout) == [obj]


def test_json_flag_is_the_alias_for_streams(run_cli):
    assert run_cli("backends", "--json").stdout == run_cli("backends", "--output-format", "jsonl").stdout
    result = run_cli("backends", "--json", "--output-format", "json")
    assert result.exit_code == 2 and "--json conflicts" in result.stderr


def test_unknown_format_is_a_usage_error_listing_the_choices(run_cli):
    result = run_cli("backends", "--output-format", "yaml")
    assert result.exit_code == 2
    assert "text" in result.stderr and "jsonl" in result.stderr


def test_lint_takes_the_common_spellings(run_cli, files):
    bad = files / "u.gbnf"
    bad.write_text('root ::= "a"\nunused ::= "b"\n')
    jsonl = run_cli("lint", bad, "-b", "llguidance", "--output-format", "jsonl")
    assert jsonl.exit_code == 1 and _jsonl(jsonl.stdout)[0]["code"] == "G002"
    text = run_cli("lint", bad, "-b", "llguidance", "--output-format", "text")
    assert text.stdout.startswith(f"{bad}:2:1: G002")


def test_compare_backends_takes_repeated_backend(run_cli):
    result = run_cli(
        "compare-backends", "--no-generate", "--regex", "[0-9]+", "-b", "llguidance", "-b", "xgrammar", "--json"
    )
    assert result.exit_code == 0, result.stderr
    assert [r["backend"] for r in _jsonl(result.stdout)] == ["llguidance", "xgrammar"]


@pytest.mark.model
def test_generate_takes_output_format_jsonl(run_cli):
    result = run_cli("generate", "--choice", "yes", "--choice", "no", "Is water wet?", "--output-format", "jsonl")
    (record,) = _jsonl(result.stdout)
    assert record["output"] in ("yes", "no") and record["valid"] is True


def _leaf_commands():
    from typer.main import get_command

    from sgcli.cli.app import app

    def walk(cmd, path):
        subs = getattr(cmd, "commands", None)
        if not subs:
            yield path
        for name, sub in (subs or {}).items():
            yield from walk(sub, [*path, name])

    return list(walk(get_command(app), []))


@pytest.mark.parametrize("command", [" ".join(p) for p in _leaf_commands()])
def test_every_command_takes_output_format_and_json(command):
    from typer.testing import CliRunner

    from sgcli.cli.app import app

    result = CliRunner().invoke(app, [*command.split(), "--help"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "--output-format" in result.output and "--json" in result.output
    assert all(fmt in result.output for fmt in ("concise", "json-lines", "text", "json", "jsonl"))


def test_the_walk_sees_every_command():
    assert {" ".join(p) for p in _leaf_commands()} >= {"generate", "lint", "schema", "cache clear", "tokenizer diff"}


def test_schema_and_cache_clear_formats(run_cli, monkeypatch, tmp_path):
    one_line = run_cli("schema", "compare", "--output-format", "jsonl").stdout
    assert one_line.count("\n") == 1
    assert json.loads(one_line) == json.loads(run_cli("schema", "compare", "--json").stdout)
    from sgcli.cache.paths import cache_folder

    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))
    cache_folder(tmp_path / "cache" / "compiled")
    (tmp_path / "cache" / "compiled" / "x.entry").write_text("x")
    result = run_cli("cache", "clear", "--output-format", "json")
    assert result.exit_code == 0
    (cleared,) = json.loads(result.stdout)["cleared"]
    assert (cleared["section"], cleared["path"]) == ("compiled", str(tmp_path / "cache" / "compiled"))
    assert not (tmp_path / "cache" / "compiled").exists()


def test_lint_json_alias(run_cli, files):
    bad = files / "u.gbnf"
    bad.write_text('root ::= "a"\nunused ::= "b"\n')
    alias = run_cli("lint", bad, "-b", "llguidance", "--json")
    assert alias.stdout == run_cli("lint", bad, "-b", "llguidance", "--output-format", "jsonl").stdout
    assert _jsonl(alias.stdout)[0]["code"] == "G002"
    assert run_cli("lint", bad, "--json", "--output-format", "sarif").exit_code == 2


@pytest.mark.parametrize("name", sorted(STREAMS) + sorted(DOCUMENTS))
def test_ruff_names_and_the_older_spellings_print_the_same(run_cli, files, name, monkeypatch, tmp_path):
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache" / "compiled").mkdir(parents=True)  # `cache info` has a section to print
    args = (STREAMS.get(name) or DOCUMENTS[name])(files)
    lines, jsonl = run_cli(*args, "--output-format", "json-lines"), run_cli(*args, "--output-format", "jsonl")
    assert lines.exit_code == jsonl.exit_code and lines.exit_code in (0, 1), lines.stderr
    assert [sorted(r) for r in _jsonl(lines.stdout)] == [sorted(r) for r in _jsonl(jsonl.stdout)] != []
    concise, text = run_cli(*args, "--output-format", "concise"), run_cli(*args, "--output-format", "text")
    assert concise.exit_code == text.exit_code and concise.stdout.strip()
    assert not concise.stdout.lstrip().startswith(("{", "["))  # for people, not JSON


def test_one_vocabulary_lint_adds_its_own(run_cli, files):
    from sgcli.cli.common import FORMAT_ALIASES, FORMATS
    from sgcli.lint import FORMATS as LINT_FORMATS

    assert set(FORMATS) | set(FORMAT_ALIASES) <= set(LINT_FORMATS)
    result = run_cli("compile", files / "g.gbnf", "-b", "llguidance", "--output-format", "concise")
    assert result.exit_code == 0 and "llguidance" in result.stdout
    full = run_cli("compile", files / "g.gbnf", "--output-format", "full")  # lint's own: named as not one of these
    assert full.exit_code == 2
    assert "'full' is not one of 'concise', 'json', 'json-lines', 'text', 'jsonl'." in _flat(full.stderr)


def test_a_misspelt_format_gets_a_did_you_mean(run_cli, files):
    for args in (["backends"], ["lint", files / "g.gbnf"]):
        result = run_cli(*args, "--output-format", "jsn-lines")
        assert result.exit_code == 2
        assert "Did you mean 'json-lines'?" in _flat(result.stderr) and "Value error" not in result.stderr
