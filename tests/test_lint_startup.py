"""`sgcli lint` with default settings never imports torch or transformers (seconds of start-up)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _imported(args: list[str], tmp_path: Path) -> set[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "sgcli", "lint", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    lines = [line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")]
    return {name.split(".")[0] for name in lines}


def test_default_lint_of_a_schema_imports_neither_torch_nor_transformers(tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}\n')
    modules = _imported([str(schema)], tmp_path)
    assert "llguidance" in modules  # the schema was really checked by a backend
    assert not {"torch", "transformers", "xgrammar"} & modules


def test_default_lint_of_a_grammar_imports_neither_torch_nor_transformers(tmp_path):
    grammar = tmp_path / "g.gbnf"
    grammar.write_text('root ::= "yes" | "no"\n')
    modules = _imported([str(grammar)], tmp_path)
    assert "llguidance" in modules and not {"torch", "transformers"} & modules
