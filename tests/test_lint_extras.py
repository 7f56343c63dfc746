"""lint over folders (respecting .gitignore), noqa comments, --exit-zero, --statistics, SARIF."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import jsonschema
import pytest

from sgcli import RECORD_SCHEMA_VERSION
from sgcli.records import json_schema

UNUSED = 'root ::= "a"\nunused ::= "b"\n'


@pytest.fixture
def tree(tmp_path):
    g = tmp_path / "g"
    (g / "sub").mkdir(parents=True)
    (g / "a.gbnf").write_text(UNUSED)
    (g / "ignored.gbnf").write_text(UNUSED)
    (g / ".gitignore").write_text("ignored.gbnf\n")
    (g / "data.json").write_text("{}")  # not a *.schema.json: data, not linted in a folder
    (g / "sub" / "c.lark").write_text('start: "a"\nunused: "b"\n')
    return g


def _lint(run_cli, *args):
    return run_cli("lint", *map(str, args), "--backend", "llguidance")


def test_folder_lists_grammar_files_git_does_not_ignore(run_cli, tree):
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    result = _lint(run_cli, tree)
    assert result.exit_code == 1
    paths = {line.split(":")[0] for line in result.stdout.splitlines()}
    assert paths == {str(tree / "a.gbnf"), str(tree / "sub" / "c.lark")}


def test_folder_outside_git_skips_hidden_folders(run_cli, tree):
    (tree / ".cache").mkdir()
    (tree / ".cache" / "x.gbnf").write_text(UNUSED)
    result = _lint(run_cli, tree)
    paths = {line.split(":")[0] for line in result.stdout.splitlines()}
    assert str(tree / ".cache" / "x.gbnf") not in paths
    assert str(tree / "a.gbnf") in paths


@pytest.mark.parametrize(
    ("line2", "silenced"),
    [
        ('unused ::= "b" # noqa: G002', True),
        ('unused ::= "b" # noqa: G', True),
        ('unused ::= "b" # noqa', True),
        ('unused ::= "b" # noqa: W002', False),
        ('unused ::= "b" # a comment', False),
    ],
)
def test_noqa_comment_in_gbnf(run_cli, tmp_path, line2, silenced):
    path = tmp_path / "g.gbnf"
    path.write_text(f'root ::= "a"\n{line2}\n')
    result = _lint(run_cli, path)
    assert (result.exit_code == 0) is silenced, result.stdout
    assert ("G002" in result.stdout) is not silenced


def test_noqa_comment_in_lark(run_cli, tmp_path):
    path = tmp_path / "g.lark"
    path.write_text('start: "a"\nunused: "b" // noqa: G002\n')
    assert _lint(run_cli, path).exit_code == 0


def test_exit_zero_and_statistics(run_cli, tree):
    assert _lint(run_cli, tree / "a.gbnf", "--exit-zero").exit_code == 0
    stats = _lint(run_cli, tree / "a.gbnf", tree / "sub" / "c.lark", "--statistics")
    assert stats.exit_code == 1
    assert stats.stdout.splitlines() == ["2\tG002\tunused-rule"]
    as_json = _lint(run_cli, tree / "a.gbnf", tree / "sub" / "c.lark", "--statistics", "--output-format", "json")
    version = {"schema_version": RECORD_SCHEMA_VERSION}  # its rows had none, and no `sgcli schema` model
    assert as_json.exit_code == 1 and json.loads(as_json.stdout) == [
        {**version, "code": "G002", "name": "unused-rule", "count": 2}
    ]
    lines = _lint(run_cli, tree / "a.gbnf", "--statistics", "--json").stdout.splitlines()
    assert [json.loads(line) for line in lines] == [{**version, "code": "G002", "name": "unused-rule", "count": 1}]
    for line in lines:
        jsonschema.validate(json.loads(line), json_schema("lint-statistics"))
    assert _lint(run_cli, tree / "a.gbnf", "--statistics", "--output-format", "sarif").exit_code == 2


def test_sarif_output_is_sarif_2_1_0(run_cli, tree):
    result = _lint(run_cli, tree / "a.gbnf", "--output-format", "sarif")
    doc = json.loads(result.stdout)
    assert doc["version"] == "2.1.0"
    (run,) = doc["runs"]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["G002"]
    (res,) = run["results"]
    assert res["ruleId"] == "G002" and res["level"] == "warning"
    region = res["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (2, 1)


def test_unreadable_file_is_never_all_checks_passed(run_cli, tree):
    result = _lint(run_cli, tree / "missing.gbnf")
    assert result.exit_code == 2
    assert "All checks passed" not in result.stderr
    assert "could not be linted" in result.stderr


def test_empty_folder_is_a_usage_error(run_cli, tmp_path):
    result = _lint(run_cli, tmp_path)
    assert result.exit_code == 2 and "no grammar files" in result.stderr


def test_a_folder_lints_json_schemas_by_content_and_counts_what_it_leaves_out(run_cli, tmp_path):
    (tmp_path / "a.gbnf").write_text('root ::= "a"\n')
    (tmp_path / "person.json").write_text('{"type": "object", "properties": {"a": {"minimum": 1}}}')
    (tmp_path / "draft.json").write_text('{"$schema": "https://json-schema.org/draft/2020-12/schema"}')
    (tmp_path / "data.json").write_text('{"name": "x", "type": "module"}')
    (tmp_path / "rows.json").write_text("[1, 2]")
    result = run_cli("lint", tmp_path, "--json-whitespace", "compact", "--output-format", "json")
    assert result.exit_code == 0, result.stdout + result.stderr
    notes = [line for line in result.stderr.splitlines() if "not linted" in line]
    assert notes == [
        f"note: {tmp_path / 'data.json'}: not linted, not taken for a JSON Schema: no schema keyword at its top "
        "level; name the file to lint it",
        f"note: {tmp_path / 'rows.json'}: not linted, not taken for a JSON Schema: its JSON is not an object; "
        "name the file to lint it",
    ]
    concise = run_cli("lint", tmp_path, "--json-whitespace", "compact")
    assert concise.stderr.strip().splitlines()[-1] == "All checks passed (3 files, 2 skipped)."
    named = run_cli("lint", tmp_path / "rows.json")  # named on the command line: always linted
    assert named.exit_code == 1 and "S003" in named.stdout


def test_a_fifo_in_a_linted_folder_is_skipped_and_said_not_waited_on(run_cli, tmp_path):
    """A named pipe blocks the first read until someone writes to it: `lint DIR` hung forever."""
    (tmp_path / "capital.schema.json").write_text('{"type": "string", "maxLength": 5}')
    os.mkfifo(tmp_path / "pipe.json")
    os.mkfifo(tmp_path / "g.gbnf")
    result = run_cli("lint", tmp_path)
    assert result.exit_code == 0, result.output
    assert f"note: {tmp_path / 'g.gbnf'}: not linted, not a regular file" in result.stderr
    assert f"note: {tmp_path / 'pipe.json'}: not linted, not a regular file" in result.stderr
    assert "(1 file, 2 skipped)" in result.stderr


def test_an_unreadable_json_in_a_linted_folder_is_an_error_not_a_pass(run_cli, tmp_path, monkeypatch):
    """It was skipped as 'not readable as JSON' and the run said 'All checks passed', exit 0."""
    (tmp_path / "a.schema.json").write_text('{"type": "string", "maxLength": 5}')
    locked = tmp_path / "locked.json"
    locked.write_text('{"type": "string"}')
    for name in ("read_bytes", "open"):  # as chmod 000 does for anyone but root
        monkeypatch.setattr(Path, name, _refusing(getattr(Path, name), "locked.json"))
    result = run_cli("lint", tmp_path)
    assert result.exit_code == 2, result.output
    assert "locked.json: Permission denied" in result.stderr and "All checks passed" not in result.stderr


def _refusing(method, name):
    def refusing(self, *args, **kwargs):
        if self.name == name:
            raise PermissionError(13, "Permission denied", str(self))
        return method(self, *args, **kwargs)

    return refusing


def test_a_folder_takes_a_schema_whose_top_level_is_if_then_else():
    """`{"if": ..., "then": ...}` was passed over as "no schema keyword at its top level" (2026-12-06)."""
    import json

    from sgcli.lint.discover import not_a_schema

    def why(doc, tmp=__import__("tempfile").mkdtemp()):
        path = f"{tmp}/s.json"
        with open(path, "w") as f:
            json.dump(doc, f)
        return not_a_schema(path)

    assert why({"if": {"const": 1}, "then": {"type": "integer"}}) is None
    assert why({"propertyNames": {"maxLength": 3}}) is None
    assert why({"name": "config", "version": 2}) is not None
