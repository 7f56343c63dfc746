"""Every JSON output matches its pydantic model in sgcli/records/, and the README lists the record's keys."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from sgcli import RECORD_SCHEMA_VERSION
from sgcli.records import (
    MODELS,
    BackendRow,
    CompareRow,
    CompileRow,
    Diagnostic,
    GenerationRecord,
    TestCaseResult,
    TestFileResult,
    json_schema,
    with_field_lists,
)

ROOT = Path(__file__).resolve().parent.parent


def test_field_lists_are_generated_from_the_models():
    listed = []
    for doc in ("README.md", "docs/json-outputs.md"):
        text = (ROOT / doc).read_text()
        listed += re.findall(r"<!-- fields: ([\w-]+) ", text)
        assert text == with_field_lists(text), f"run: python -m sgcli.records {doc}"
    assert sorted(listed) == sorted(MODELS)  # every model has its list, once
    assert "<!-- fields: record " in (ROOT / "README.md").read_text()


def test_real_record_matches_model_and_json_schema(tiny_lm, smol_tokenizer):
    from sgcli.backends import get_backend
    from sgcli.constraints.spec import ConstraintSpec, Kind
    from sgcli.engine.sampling import SamplingParams
    from sgcli.engine.session import Done, Request, Session

    spec = ConstraintSpec(Kind.REGEX, "[0-9]{1,3}", "--regex")
    compiled = get_backend("llguidance").compile(spec, smol_tokenizer.vocab.padded(tiny_lm.logits_width))
    from sgcli.batch.requests import PromptOptions

    params = SamplingParams(1.0, 0.9, 5, 7, max_tokens=8, stop=("zz",))
    options = PromptOptions(system="Be brief.")
    session = Session(tiny_lm, smol_tokenizer, compiled, params, max_tokens=8, prompt_options=options)
    (done,) = [e for e in session.stream(Request("r1", "pick a number")) if isinstance(e, Done)]
    record = done.record
    GenerationRecord.model_validate(record)
    jsonschema.validate(record, json_schema("record"))
    assert set(record) <= set(GenerationRecord.model_fields)
    # a record said nothing of how it was sampled: with its prompt, it could not be asked for again
    assert record["sampling"] == {
        "temperature": 1.0,
        "top_p": 0.9,
        "top_k": 5,
        "seed": 7,
        "max_tokens": 8,
        "stop": ["zz"],
        "system": "Be brief.",
    }


def test_bad_batch_line_record_has_the_same_keys_as_a_normal_record():
    from sgcli.batch.requests import BadLine, read_requests

    (bad,) = list(read_requests('{"id": 1, "prompt": 5}\n', "in.jsonl"))
    assert isinstance(bad, BadLine)
    record = bad.record()
    GenerationRecord.model_validate(record)
    from sgcli.batch.records import LOCAL_ONLY

    # only where they apply: reasoning mode, a server, the in-process model (the session adds those)
    required = set(GenerationRecord.model_fields) - {"reasoning", "think_budget", "engine", *LOCAL_ONLY}
    assert set(record) == required


def test_a_record_with_an_unknown_key_is_rejected():
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        GenerationRecord.model_validate({"finish_reason": "stop", "surprise": 1})


def test_lint_json_lines_match_the_diagnostic_model(run_cli, tmp_path):
    bad = tmp_path / "g.gbnf"
    bad.write_text('root ::= "a" | "a"\nunused ::= "b"\n')
    result = run_cli("lint", str(bad), "--backend", "llguidance", "--output-format", "json-lines")
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert result.exit_code == 1 and lines
    for line in lines:
        Diagnostic.model_validate(line)
        jsonschema.validate(line, json_schema("diagnostic"))


def test_backends_json_rows_match_the_model(run_cli):
    result = run_cli("backends", "--json")
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert result.exit_code == 0 and {r["backend"] for r in rows} >= {"llguidance", "none"}
    for row in rows:
        BackendRow.model_validate(row)


def test_schema_command_prints_the_models_json_schema(run_cli):
    result = run_cli("schema", "record")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == json_schema("record")
    assert run_cli("schema", "nope").exit_code == 2


def _rows(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _valid(model, row: dict) -> None:
    model.model_validate(row)
    jsonschema.validate(row, model.model_json_schema())
    assert row["schema_version"] == RECORD_SCHEMA_VERSION


def test_compare_rows_match_the_model_with_one_key_set(run_cli, tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}')
    args = ["compare-backends", "--no-generate", "--schema", schema, "--whitespace", "flexible,indent=2"]
    result = run_cli(*args, "--text", '{"a": 1}', "--output-format", "jsonl")
    rows = _rows(result.stdout)
    assert result.exit_code == 1 and len(rows) >= 4, result.stderr  # the text has no indent: a finding
    assert {r["valid"] for r in rows if r["variant"] == "indent=2" and not r["skipped"]} == {False}
    assert any(r["skipped"] for r in rows) and any(r["compile_ms"] for r in rows)  # llguidance has no --indent
    for row in rows:
        _valid(CompareRow, row)
        assert set(row) == set(CompareRow.model_fields)  # skipped rows too: nulls, never missing keys


def test_compile_rows_match_the_model(run_cli, tmp_path):
    (tmp_path / "ok.gbnf").write_text('root ::= "a"\n')
    (tmp_path / "bad.gbnf").write_text('root ::= "a" @\n')
    result = run_cli("compile", tmp_path / "ok.gbnf", tmp_path / "bad.gbnf", "--print", "--output-format", "jsonl")
    rows = _rows(result.stdout)
    assert result.exit_code == 1
    assert {r["status"] for r in rows} >= {"ok", "error", "unsupported"}  # outlines_core takes no GBNF
    for row in rows:
        _valid(CompileRow, row)
        assert (row.get("compile_ms") is not None) == (row["status"] in ("ok", "error"))


def test_test_results_match_the_models(run_cli):
    cases = ROOT / "sgcli" / "grammars" / "iso8601.test.yaml"
    result = run_cli("test", cases, "--backend", "llguidance", "--backend", "outlines_core", "--output-format", "jsonl")
    rows = _rows(result.stdout)
    assert result.exit_code == 0, result.stdout
    by_type = {"case": TestCaseResult, "file": TestFileResult}
    for row in rows:
        _valid(by_type[row["type"]], row)
    assert rows[-1]["type"] == "file" and rows[-1]["path"] == str(cases)
    assert {b["backend"] for b in rows[-1]["backends"]} == {"llguidance", "outlines_core"}
    assert sum(r["type"] == "case" for r in rows) == rows[-1]["passed"] + rows[-1]["failed"] > 0


def _by_type(rows: list[dict], prefix: str) -> None:
    for row in rows:
        _valid(MODELS[f"{prefix}-{row['type']}"], row)


@pytest.mark.parametrize("text", [None, "yes", "ye", "yo"])  # first step, accepted, prefix, rejected
def test_masks_records_match_the_models(run_cli, tmp_path, text):
    (tmp_path / "g.gbnf").write_text('root ::= "yes" | "no"\n')
    args = ["masks", "--ebnf", tmp_path / "g.gbnf", "-b", "llguidance", "--output-format", "jsonl"]
    result = run_cli(*args, *(["--text", text] if text else []))
    rows = _rows(result.stdout)
    assert result.exit_code == (1 if text == "yo" else 0), result.stderr
    _by_type(rows, "mask")
    assert rows[-1]["type"] == "summary" and ("rejected" in rows[-1]) == (text == "yo")


def test_rule_and_config_json_match_the_models(run_cli, tmp_path, monkeypatch):
    from sgcli import config

    for row in _rows(run_cli("rule", "--all", "--output-format", "jsonl").stdout):
        _valid(MODELS["rule"], row)
    _valid(MODELS["rule"], json.loads(run_cli("rule", "G001", "--json").stdout))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sgcli.toml").write_text('backend = "xgrammar"\n')
    config.reset()
    try:
        document = json.loads(run_cli("config", "--output-format", "json").stdout)
        _valid(MODELS["config"], document)
        assert document["path"] == str(tmp_path / "sgcli.toml")
        for row in _rows(run_cli("config", "--output-format", "jsonl").stdout):
            _valid(MODELS["config-setting"], row)
    finally:
        config.reset()  # the next command, in another test, reads its own working directory's


def test_cache_json_matches_the_models(run_cli, tmp_path, monkeypatch):
    from sgcli.cache.paths import cache_folder

    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))
    cache_folder(tmp_path / "cache" / "compiled")
    (tmp_path / "cache" / "compiled" / "e").write_text("x")
    _valid(MODELS["cache-info"], json.loads(run_cli("cache", "info", "--output-format", "json").stdout))
    (row,) = _rows(run_cli("cache", "info", "--output-format", "jsonl").stdout)
    _valid(MODELS["cache-section"], row)
    assert row["entries"] == 1 and row["size_bytes"] == 1
    (row,) = _rows(run_cli("cache", "clear", "--output-format", "jsonl").stdout)
    _valid(MODELS["cache-cleared-section"], row)
    cache_folder(tmp_path / "cache" / "compiled")
    _valid(MODELS["cache-cleared"], json.loads(run_cli("cache", "clear", "--output-format", "json").stdout))


def test_tokenizer_reports_match_the_models(run_cli):
    result = run_cli("tokenizer", "inspect", "default", "--text", "Hi there", "--output-format", "json")
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    _valid(MODELS["tokenizer"], report)
    assert report["tokenization"]["round_trip"] is True and report["size"] > 1000
    result = run_cli("tokenizer", "diff", "default", "default", "--text", "Hi", "--output-format", "jsonl")
    assert result.exit_code == 0, result.stderr
    (diff,) = _rows(result.stdout)
    _valid(MODELS["tokenizer-diff"], diff)
    assert diff["same"] is True and diff["tokenization"]["same"] is True


def test_schema_command_knows_every_model(run_cli):
    for name in MODELS:
        result = run_cli("schema", name)
        assert result.exit_code == 0 and json.loads(result.stdout) == json_schema(name)
    from sgcli.cli.schema_cmd import NAMES

    assert [n.strip() for n in NAMES.split(",")] == list(MODELS)  # what `sgcli schema --help` lists


def test_schema_without_a_name_lists_every_output(run_cli):
    result = run_cli("schema")
    assert result.exit_code == 0, result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()] == list(MODELS)
    rows = [json.loads(line) for line in run_cli("schema", "--json").stdout.splitlines()]
    assert [r["name"] for r in rows] == list(MODELS)
    for row in rows:
        jsonschema.validate(row, json_schema("schema-name"))
        assert row["description"]
    typo = run_cli("schema", "recrod")
    assert typo.exit_code == 2 and "Did you mean 'record'?" in typo.stderr


def test_convert_and_template_render_json_match_their_schemas(run_cli, tmp_path):
    """Both printed JSON without `schema_version`, and `sgcli schema` listed neither."""
    (tmp_path / "g.gbnf").write_text('root ::= "a" [0-9]+\n')
    (tmp_path / "chat.json").write_text('[{"role": "user", "content": "Hi"}]')
    outputs = {
        "convert": [("convert", tmp_path / "g.gbnf", "--to", "lark", "--json"), ("--no-check",)],
        "template-render": [("template", "render", "--messages", tmp_path / "chat.json", "--json"), ("--tokens",)],
    }
    for name, (args, more) in outputs.items():
        printed = json.loads(run_cli("schema", name).stdout)
        for extra in ((), more):
            result = run_cli(*args, *extra)
            assert result.exit_code == 0, result.output
            document = json.loads(result.stdout)
            jsonschema.validate(document, printed)
            _valid(MODELS[name], document)
    checked = json.loads(run_cli("convert", tmp_path / "g.gbnf", "--to", "lark", "--json").stdout)
    assert checked["from"] == "ebnf" and checked["round_trip"]["ok"] is True
