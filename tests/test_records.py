"""Every JSON output matches its pydantic model in sgcli/records.py, and the README lists the record's keys."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema

from sgcli.records import BackendRow, Diagnostic, GenerationRecord, field_table, json_schema

ROOT = Path(__file__).resolve().parent.parent


def test_readme_field_list_is_generated_from_the_model():
    readme = (ROOT / "README.md").read_text()
    section = re.search(r"<!-- record-fields:[^\n]*-->\n(.*?)\n<!-- /record-fields -->", readme, flags=re.S)
    assert section is not None
    assert section.group(1) == field_table()


def test_real_record_matches_model_and_json_schema(tiny_lm, smol_tokenizer):
    from sgcli.backends import get_backend
    from sgcli.constraints.spec import ConstraintSpec, Kind
    from sgcli.engine.sampling import SamplingParams
    from sgcli.engine.session import Done, Request, Session

    spec = ConstraintSpec(Kind.REGEX, "[0-9]{1,3}", "--regex")
    compiled = get_backend("llguidance").compile(spec, smol_tokenizer.vocab.padded(tiny_lm.logits_width))
    session = Session(tiny_lm, smol_tokenizer, compiled, SamplingParams(1.0, 1.0, 0, 7), max_tokens=8)
    (done,) = [e for e in session.stream(Request("r1", "pick a number")) if isinstance(e, Done)]
    record = done.record
    GenerationRecord.model_validate(record)
    jsonschema.validate(record, json_schema("record"))
    assert set(record) <= set(GenerationRecord.model_fields)


def test_bad_batch_line_record_has_the_same_keys_as_a_normal_record():
    from sgcli.engine.requests import BadLine, read_requests

    (bad,) = list(read_requests('{"id": 1, "prompt": 5}\n', "in.jsonl"))
    assert isinstance(bad, BadLine)
    record = bad.record()
    GenerationRecord.model_validate(record)
    from sgcli.engine.records import LOCAL_ONLY

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
