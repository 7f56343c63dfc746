"""End to end: `sgcli generate` on the real embedded model (SmolLM2-135M-Instruct)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parent.parent
CAPITAL = ROOT / "examples" / "capital.json"
RECORD_KEYS = {
    "id",
    "prompt",
    "output",
    "parsed",
    "valid",
    "validated_by",
    "unchecked",
    "weakened",
    "errors",
    "finish_reason",
    "backend",
    "model",
    "usage",
    "timings",
}


def records(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


@pytest.mark.model
def test_schema_generation_streams_valid_json(run_cli):
    result = run_cli("generate", "--schema", CAPITAL, "What is the capital of France?")
    assert result.exit_code == 0, result.output
    jsonschema.validate(json.loads(result.stdout), json.loads(CAPITAL.read_text()))
    assert "finish: stop" in result.stderr and "valid" in result.stderr
    compact = json.dumps(json.loads(result.stdout), separators=(",", ":"), ensure_ascii=False)
    assert result.stdout == compact + "\n"  # the default layout: no whitespace between JSON tokens (issue 29)


@pytest.mark.model
def test_json_record_shape(run_cli):
    result = run_cli("generate", "--json", "--regex", "(Paris|London)", "Capital of France?")
    assert result.exit_code == 0, result.output
    (rec,) = records(result.stdout)
    assert RECORD_KEYS <= rec.keys()
    assert rec["output"] in ("Paris", "London") and rec["valid"] is True and rec["errors"] == []
    assert rec["finish_reason"] == "stop" and rec["model"] == "SmolLM2-135M-Instruct"
    # the default backend is auto, which takes llguidance first; the output was checked by the regex package
    assert (rec["backend"], rec["fallbacks"], rec["validated_by"]) == ("llguidance", [], "regex")
    assert rec["usage"]["prompt_tokens"] > 5 and rec["usage"]["completion_tokens"] >= 1
    assert set(rec["timings"]) >= {"load_ms", "compile_ms", "first_token_ms", "tokens_per_s"}
    assert all(rec["timings"][k] >= 0 for k in ("load_ms", "compile_ms", "first_token_ms"))
    # process start to first token holds the model load and the decode's own wait for that token
    t = rec["timings"]
    assert t["start_to_first_token_ms"] >= t["load_ms"] + t["first_token_ms"] - 20  # /proc: 10 ms ticks


@pytest.mark.model
def test_max_tokens_truncation_is_reported_and_exits_1(run_cli):
    result = run_cli("generate", "--json", "--max-tokens", "3", "--schema", CAPITAL, "What is the capital of France?")
    assert result.exit_code == 1
    (rec,) = records(result.stdout)
    assert rec["finish_reason"] == "length" and rec["valid"] is False
    assert any("max-tokens" in e for e in rec["errors"])
    assert rec["usage"]["completion_tokens"] == 3


@pytest.mark.model
def test_batch_answers_every_line_in_order(run_cli, tmp_path):
    lines = [json.dumps({"id": f"q{i}", "prompt": f"Say the number {i}."}) for i in range(4)]
    lines.insert(2, json.dumps({"id": "chat", "messages": [{"role": "user", "content": "Say 7."}]}))
    batch = tmp_path / "prompts.jsonl"
    batch.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    result = run_cli("generate", "--regex", "[0-9]{1,2}", "--input", batch, "--output", out)
    assert result.exit_code == 0, result.output
    recs = records(out.read_text())
    assert [r["id"] for r in recs] == ["q0", "q1", "chat", "q2", "q3"]
    assert all(r["valid"] and r["output"].isdigit() for r in recs)
    assert recs[2]["prompt"] == [{"role": "user", "content": "Say 7."}]


@pytest.mark.model
def test_batch_with_a_bad_line_still_answers_the_others(run_cli, tmp_path):
    batch = tmp_path / "b.jsonl"
    batch.write_text('{"id": 1, "prompt": "Hi"}\n{"id": 2, "prompt": \n{"id": 3, "prompt": "Yo"}\n')
    result = run_cli("generate", "--choice", "A", "--choice", "B", "--input", batch)
    assert result.exit_code == 1
    recs = records(result.stdout)
    assert [r["id"] for r in recs] == [1, "line-2", 3]
    assert recs[0]["valid"] and recs[2]["valid"] and recs[1]["valid"] is None  # nothing ran on line 2
    assert recs[1]["errors"][0].startswith(f"{batch}:2:") and recs[1]["unchecked"]
    assert "3 records: 2 valid, 0 invalid, 1 error ·" in result.stderr  # the batch's closing line
    assert f"✗ {batch}:2:" in result.stderr  # and where the error is


@pytest.mark.model
def test_batch_from_stdin(run_cli):
    data = "\n".join(json.dumps({"id": i, "prompt": "Pick"}) for i in range(2))
    result = run_cli("generate", "--choice", "x", "--choice", "y", "--input", "-", input=data)
    assert result.exit_code == 0, result.output
    assert [r["id"] for r in records(result.stdout)] == [0, 1]


@pytest.mark.model
def test_schema_from_stdin(run_cli):
    result = run_cli(
        "generate",
        "--json",
        "--schema",
        "-",
        "--max-tokens",
        "8",
        "Pick a number",
        input='{"type": "integer", "minimum": 1, "maximum": 9}',
    )
    rec = records(result.stdout)[0]
    assert result.exit_code == 0, result.output
    assert 1 <= rec["parsed"] <= 9


@pytest.mark.model
def test_ebnf_and_pydantic_and_grammar_flags(run_cli, tmp_path):
    g = tmp_path / "yn.gbnf"
    g.write_text('root ::= "yes" | "no"\n')
    r1 = run_cli("generate", "--json", "--ebnf", g, "Is the sky blue?")
    assert r1.exit_code == 0 and records(r1.stdout)[0]["output"] in ("yes", "no")
    r2 = run_cli("generate", "--json", "--grammar", g, "Is the sky blue?")
    assert r2.exit_code == 0 and records(r2.stdout)[0]["output"] in ("yes", "no")
    mod = tmp_path / "answer_model.py"
    mod.write_text("from pydantic import BaseModel\nclass Answer(BaseModel):\n    ok: bool\n")
    r3 = run_cli(
        "generate",
        "--json",
        "--json-whitespace",
        "compact",
        "--strict-properties",
        "--pydantic",
        f"{mod}:Answer",
        "Is it ok?",
    )
    assert r3.exit_code == 0, r3.output
    assert isinstance(records(r3.stdout)[0]["parsed"]["ok"], bool)


# --- every error path: exit 2, one message, no traceback -------------------------------------


def _user_error(result, *needles):
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    flat = " ".join(re.sub("[\u2500-\u257f]", " ", result.stderr).split())  # rich's box and wraps removed
    for needle in needles:
        assert needle in result.stderr or needle in flat, result.stderr
    return result.stderr


def test_malformed_schema_json_names_file_line_col(run_cli, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "type": "object",\n  "properties": {"a": }\n}\n')
    _user_error(run_cli("generate", "--schema", bad, "x"), f"{bad}:3:23", "invalid JSON")


def test_schema_failing_meta_validation_names_the_keyword_position(run_cli, tmp_path):
    bad = tmp_path / "meta.json"
    bad.write_text('{\n  "type": "object",\n  "properties": {\n    "a": {"type": "strnig"}\n  }\n}\n')
    _user_error(run_cli("generate", "--schema", bad, "x"), f"{bad}:4:19", "invalid JSON Schema at /properties/a/type:")


def test_grammar_syntax_error_names_line_and_column(run_cli, tmp_path):
    g = tmp_path / "g.ebnf"
    g.write_text('root ::= item\nitem ::= "a" | undefined_rule\n')
    _user_error(run_cli("generate", "--ebnf", g, "x"), f"{g}:2:", "undefined_rule")


def test_bad_regex_names_position(run_cli):
    _user_error(run_cli("generate", "--regex", "(ab", "x"), "--regex:1:", "parenthesis")


def test_unknown_model_path(run_cli):
    _user_error(run_cli("generate", "--model", "./no/such/model", "--regex", "a", "x"), "model path not found")
    _user_error(
        run_cli("generate", "--model", "missing.gguf", "--regex", "a", "x"), "model file not found: missing.gguf"
    )
    _user_error(  # a file, not a hub id: the hub is not asked
        run_cli("generate", "--model", "missing.json", "--regex", "a", "x"), "model file not found: missing.json"
    )


def test_unreadable_input_files(run_cli, tmp_path):
    _user_error(run_cli("generate", "--regex", "a", "--input", tmp_path / "nope.jsonl"), "input file not found")
    _user_error(run_cli("generate", "--schema", tmp_path / "nope.json", "x"), "JSON Schema file not found")
    d = tmp_path / "dir.json"
    d.mkdir()
    _user_error(run_cli("generate", "--schema", d, "x"), "is a directory")
    # inline JSON that is no schema, and an empty value: said as such, not "file not found" or "a directory"
    _user_error(run_cli("generate", "--schema", "[1]", "x"), "a JSON Schema must be an object or a boolean, not list")
    _user_error(run_cli("generate", "--schema", "", "x"), "--schema is empty")


def test_two_constraints_name_both(run_cli):
    _user_error(run_cli("generate", "--regex", "a", "--choice", "b", "x"), "--regex and --choice both given")


def test_missing_kind_or_text(run_cli, tmp_path):
    txt = tmp_path / "grammar.txt"
    txt.write_text('root ::= "a"')
    _user_error(run_cli("generate", "--grammar", txt, "x"), "cannot tell the grammar kind", ".txt")
    empty = tmp_path / "empty.ebnf"
    empty.write_text("\n")
    _user_error(run_cli("generate", "--ebnf", empty, "x"), "is empty")
    _user_error(run_cli("generate", "x"), "no constraint given")
    _user_error(run_cli("generate", "--regex", "a"), "no prompt given")


def test_flag_validation(run_cli):
    _user_error(run_cli("generate", "--regex", "a", "--max-tokens", "0", "x"), "--max-tokens")
    _user_error(run_cli("generate", "--regex", "a", "--backend", "nosuch", "x"), "'nosuch' is not one of")


def test_module_entry_point_and_help():
    result = subprocess.run(
        [sys.executable, "-m", "sgcli", "generate", "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0
    assert "Examples" in result.stdout and "--schema" in result.stdout


def test_invalid_schema_in_a_subprocess_has_no_traceback(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    result = subprocess.run(
        [sys.executable, "-m", "sgcli", "generate", "--schema", str(bad), "x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and f"{bad}:1:2" in result.stderr


# --- the text a person reads on a terminal ---------------------------------------------------


class _Sink:
    """What `Terminal.answer_end` writes to: stdout (path None) or a file, as RecordWriter."""

    def __init__(self, path=None):
        self.path, self.text = path, ""

    def write_text(self, text: str) -> None:
        self.text += text

    def write(self, record: dict) -> None:
        self.text += json.dumps(record) + "\n"


def _end(record: dict, monkeypatch, *, terminal: bool, json_out: bool = False, path=None) -> str:
    import io

    from rich.console import Console

    from sgcli.cli import common
    from sgcli.cli.report import Terminal

    monkeypatch.setattr(common, "out", Console(file=io.StringIO(), force_terminal=terminal))
    sink = _Sink(path)
    Terminal(quiet=True).answer_end(sink, record, json_out=json_out)
    return sink.text


def test_a_terminal_shows_json_output_again_pretty_printed_and_pipes_keep_the_exact_text(monkeypatch):
    output = '{"capital":"Paris","tags":["a","é"]}'
    record = {"output": output, "parsed": json.loads(output), "valid": True}
    pretty = json.dumps(json.loads(output), indent=2, ensure_ascii=False)
    assert _end(record, monkeypatch, terminal=True) == "\n" + pretty + "\n"  # after the streamed text
    assert _end(record, monkeypatch, terminal=False) == "\n"  # piped: the stream alone, as generated
    assert _end(record, monkeypatch, terminal=True, path=Path("out.txt")) == "\n"  # --output FILE
    assert json.loads(_end(record, monkeypatch, terminal=True, json_out=True))["output"] == output  # --json
    already = {"output": pretty, "parsed": json.loads(pretty), "valid": True}
    assert _end(already, monkeypatch, terminal=True) == "\n"  # nothing new to show
    for text in ('"Paris"', "42", "yes"):  # scalars and non-JSON read the same either way
        scalar = {"output": text, "parsed": None if text == "yes" else json.loads(text), "valid": True}
        assert _end(scalar, monkeypatch, terminal=True) == "\n"


def test_help_reflows_docstrings_and_keeps_brackets():
    """Help is read on 80-column terminals: a docstring's source line breaks must not survive as ragged
    lines, list items and sentence ends keep theirs, and `[tool.sgcli]` is not eaten as rich markup."""
    from sgcli.cli.coercion import reflowed

    doc = "Summary.\n\nOne sentence wrapped\nacross lines (see\n--flag) ends.\nExit codes: 0 ok.\n- an item\n- another"
    assert reflowed(doc) == (
        "Summary.\n\nOne sentence wrapped across lines (see --flag) ends.\nExit codes: 0 ok.\n- an item\n- another"
    )
    env = {**os.environ, "COLUMNS": "80", "TERM": "dumb"}
    shown = {}
    for args in (["--help"], ["config", "--help"], ["generate", "--help"]):
        result = subprocess.run([sys.executable, "-m", "sgcli", *args], capture_output=True, text=True, env=env)
        assert result.returncode == 0, result.stderr
        shown[args[0]] = result.stdout
    assert "Exit codes: 0 ok" in shown["--help"] and "[tool.sgcli]" in shown["--help"]
    assert "[tool.sgcli] table" in shown["config"]
    # the source wraps after "regex,"; reflowed, rich wraps the paragraph at the terminal's width instead
    assert "regex,\n ...);" not in shown["generate"] and "...); the record's validated_by" in shown["generate"]


def test_pydantic_models_with_postponed_annotations_load(tmp_path):
    """`from __future__ import annotations` (string annotations, common in pydantic code) made
    `--pydantic file.py:M` exit 3: pydantic resolves them in sys.modules[M.__module__], and the file's
    module was never registered there. A model pydantic cannot build a schema for is exit 2 naming it."""
    from sgcli.constraints.sources import from_pydantic
    from sgcli.errors import UserError

    models = tmp_path / "json.py"  # a file named as a standard module: loaded under a name of its own
    models.write_text(
        "from __future__ import annotations\nfrom typing import Optional\nfrom pydantic import BaseModel\n"
        "class Item(BaseModel):\n    name: str\n"
        "class M(BaseModel):\n    x: Optional[int] = None\n    items: list[Item] = []\n"
        "class Broken(BaseModel):\n    y: Undefined\n"
    )
    schema = json.loads(from_pydantic(f"{models}:M").text)
    assert set(schema["properties"]) == {"x", "items"} and "Item" in schema["$defs"]
    assert json.loads('{"a": 1}') == {"a": 1}  # the real json module is untouched
    with pytest.raises(UserError, match="pydantic cannot build its JSON Schema"):
        from_pydantic(f"{models}:Broken")
