"""Start-up: `sgcli lint` with default settings, `sgcli backends` and `sgcli --help` never import torch or
transformers (seconds), and lint not numpy either (a tenth of a second); checked with `python -X importtime`."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _imported(args: list[str], tmp_path: Path, command: str = "lint") -> set[str]:
    """The top-level packages a `sgcli COMMAND ARGS` process imported."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "sgcli", *([command] if command else []), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    lines = [line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    return {name.split(".")[0] for name in lines} | {name for name in lines if name.startswith("sgcli.")}


def test_default_lint_of_a_schema_imports_neither_torch_nor_transformers(tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}\n')
    modules = _imported([str(schema)], tmp_path)
    assert "llguidance" in modules  # the schema was really checked by a backend
    assert not {"torch", "transformers", "xgrammar", "numpy"} & modules


def test_default_lint_of_a_schema_imports_neither_pydantic_nor_rich(tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}\n')
    modules = _imported([str(schema)], tmp_path)
    assert "llguidance" in modules  # typer's pydantic adapters and rich's consoles come only when needed
    assert not {"pydantic", "rich"} & modules


@pytest.mark.parametrize("terminal", [False, True])
def test_the_summary_line_is_what_rich_prints(terminal, capsys):
    from rich.console import Console

    from sgcli.cli.common import plain_err
    from sgcli.lint import Diagnostic
    from sgcli.lint.render import summary

    d = Diagnostic("W002", "m", "f.json", 1, 1)
    for line in (summary([], 1), summary([d, d], 3), summary([d], 1, 2), "a [b] :smile x:y"):
        plain_err(line)
        console = Console(file=io.StringIO(), highlight=False, soft_wrap=True, force_terminal=terminal, width=20)
        console.print(line, highlight=False, markup=False)
        assert capsys.readouterr().err == console.file.getvalue()


def test_default_lint_of_a_grammar_imports_neither_torch_nor_transformers(tmp_path):
    grammar = tmp_path / "g.gbnf"
    grammar.write_text('root ::= "yes" | "no"\n')
    modules = _imported([str(grammar)], tmp_path)
    assert "llguidance" in modules and not {"torch", "transformers"} & modules


def test_backends_lists_every_backend_without_importing_the_libraries(tmp_path):
    import json

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "sgcli", "backends", "--json"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    rows = {row["backend"]: row for row in map(json.loads, proc.stdout.splitlines())}
    import importlib.metadata

    for name, dist in (("xgrammar", "xgrammar"), ("llguidance", "llguidance"), ("outlines_core", "outlines-core")):
        assert rows[name]["available"] and rows[name]["version"] == importlib.metadata.version(dist)
    modules = _imported([], tmp_path, command="backends")
    assert not {"torch", "transformers", "xgrammar", "llguidance", "outlines_core"} & modules


def test_help_imports_no_model_or_grammar_library(tmp_path):
    modules = _imported(["--help"], tmp_path, command="")
    assert "typer" in modules
    assert not {"torch", "transformers", "xgrammar", "llguidance", "outlines_core", "numpy"} & modules


def test_listed_availability_of_a_missing_library_is_the_import_failure():
    from sgcli.backends import get_backend, listed_unavailable_reason

    class Missing(type(get_backend("llguidance"))):
        module = "sgcli_test_no_such_library"

    reason = listed_unavailable_reason(Missing())
    assert reason is not None and "sgcli_test_no_such_library" in reason
    assert reason == Missing().unavailable_reason()
    assert listed_unavailable_reason(get_backend("xgrammar")) is None


def test_a_command_line_builds_only_the_subcommand_it_names(tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "integer"}\n')
    modules = _imported([str(schema)], tmp_path)
    assert "sgcli.cli.lint_cmd" in modules
    assert not {"sgcli.cli.generate", "sgcli.cli.compare", "sgcli.cli.bench_cmd"} & modules
    from sgcli.cli.app import _COMMANDS, app  # the importable app still has every command

    names = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    assert names == set(_COMMANDS)
