"""`generate` reads and compiles the constraint and runs the lint rules that predict certain
failure before it loads the model: a grammar mistake never costs a model load."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import patch_everywhere

from sgcli.errors import UserError

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def no_model(monkeypatch):
    """The model loader refuses to run; `calls` records each attempt."""
    import sgcli.engine.loader

    calls = []

    def refuse(*args, **kwargs):
        calls.append(args)
        raise UserError("model loader reached")

    patch_everywhere(monkeypatch, sgcli.engine.loader, "load_model", refuse)
    return calls


def test_undefined_rule_exits_2_before_torch_or_a_grammar_library_loads(tmp_path):
    broken = tmp_path / "broken.gbnf"
    broken.write_text('root ::= "a" itm\nitem ::= "x"\n')
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "sgcli", "generate", "--ebnf", str(broken), "x"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2
    assert f"{broken}:1:14:" in proc.stderr and "`itm` is used but never defined" in proc.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert not imported & {"torch", "transformers", "xgrammar", "llguidance", "tokenizers"}, imported


@pytest.mark.parametrize(
    "text, where",
    [('root ::= "a\n', ":1:"), ('root ::= "a" (\n', ":")],
    ids=["unterminated-string", "open-group"],
)
def test_syntax_errors_exit_2_without_loading_the_model(run_cli, tmp_path, no_model, text, where):
    broken = tmp_path / "broken.gbnf"
    broken.write_text(text)
    result = run_cli("generate", "--ebnf", broken, "x")
    assert result.exit_code == 2, result.stderr
    assert str(broken) + where in result.stderr
    assert not no_model


def test_an_empty_language_exits_2_without_loading_the_model(run_cli, tmp_path, no_model):
    empty = tmp_path / "empty.gbnf"
    empty.write_text("root ::= [^\\x00-\\U0010FFFF]\n")
    result = run_cli("generate", "--ebnf", empty, "-b", "xgrammar", "x")
    assert result.exit_code == 2
    assert "accepts no text at all" in result.stderr
    assert not no_model


def test_a_schema_that_admits_no_value_exits_2_at_the_keyword_before_anything_loads(run_cli, tmp_path, no_model):
    """`auto` fell back past llguidance's and xgrammar's refusals to outlines-core, which compiles an empty
    enum: the model loaded and the run ended exit 1. Now one message at the keyword, whatever the backend."""
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "object", "properties": {"a": {"enum": []}}, "required": ["a"]}')
    result = run_cli("generate", "--schema", schema, "x")
    assert result.exit_code == 2, result.output
    assert f"{schema}:1:41: the JSON Schema admits no value: `enum` lists no value" in result.stderr
    assert "required property 'a'" in result.stderr
    assert not no_model


def test_a_budget_too_small_is_reported_before_the_model_loads(run_cli, tmp_path, no_model):
    schema = tmp_path / "long.json"
    schema.write_text('{"type": "object", "properties": {"a": {"type": "string", "minLength": 30}}, "required": ["a"]}')
    result = run_cli("generate", "--schema", schema, "-n", "5", "x")
    assert "L001" in result.stderr and "--max-tokens 5 cuts every output" in result.stderr
    assert result.stderr.index("L001") < result.stderr.index("model loader reached")
    assert len(no_model) == 1  # a warning, not a refusal: the run goes on to the model
    enough = run_cli("generate", "--schema", schema, "-n", "64", "x")
    assert "L001" not in enough.stderr and "model loader reached" in enough.stderr


@pytest.mark.parametrize("command", ["generate", "masks", "test"])
def test_a_rule_that_never_ends_is_exit_2_before_anything_loads(run_cli, tmp_path, command):
    """`root ::= "x" root` compiled on every backend, ran generations to --max-tokens, and xgrammar's
    forced-text search grew to 19.6 GB before the kernel killed it: now G011, exit 2, at the rule."""
    grammar = tmp_path / "never.gbnf"
    grammar.write_text('root ::= "a" | "b" item\nitem ::= "c" item\n')
    if command == "generate":
        args = ("generate", "--ebnf", grammar, "--backend", "xgrammar", "-n", "5", "x")
    elif command == "masks":
        args = ("masks", grammar, "--backend", "xgrammar", "--text", "bc")
    else:
        cases = tmp_path / "never.test.yaml"
        cases.write_text("grammar: never.gbnf\ncases:\n  - {input: a, accept: true}\n")
        args = ("test", cases)
    result = run_cli(*args)
    assert result.exit_code == 2, result.output
    assert "never.gbnf:2:1" in result.stderr and "G011" in result.stderr and "`item` never ends" in result.stderr
