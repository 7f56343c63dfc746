"""`sgcli backends`: the capability table, straight from what each adapter declares."""

from __future__ import annotations

import importlib.metadata
import json

from helpers import cli_options

# The installed distribution behind each backend, named here independently of the adapters.
DISTRIBUTIONS = {"llguidance": "llguidance", "xgrammar": "xgrammar", "outlines_core": "outlines-core", "none": "sgcli"}


def test_json_rows_follow_the_declared_capabilities(run_cli):
    result = run_cli("backends", "--json")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["backend"] for r in rows] == ["llguidance", "xgrammar", "outlines_core", "none"]
    by = {r["backend"]: r for r in rows}
    assert by["outlines_core"]["kinds"] == ["json_schema", "regex", "choice"]
    assert by["llguidance"]["kinds"] == [
        "json_schema",
        "regex",
        "ebnf",
        "lark",
        "choice",
        "structural_tag",
        "llguidance",
    ]
    assert by["xgrammar"]["kinds"] == ["json_schema", "regex", "ebnf", "lark", "choice", "structural_tag"]
    assert "whitespace_pattern" in by["llguidance"]["json_options"] and "indent" not in by["llguidance"]["json_options"]
    assert "indent" in by["xgrammar"]["json_options"] and "whitespace_pattern" not in by["xgrammar"]["json_options"]
    assert [r["auto_rank"] for r in rows] == [1, 2, 3, None]
    assert not any(r["default"] for r in rows)  # the default is `auto`, not one backend
    flags = {r["backend"]: (r["enforces"], r["jump_forward"], r["cacheable"]) for r in rows}
    assert flags == {
        "llguidance": (True, True, False),
        "xgrammar": (True, True, True),
        "outlines_core": (True, False, True),  # no forced-bytes query; its Index serializes (cache, bounded child)
        "none": (False, False, False),
    }
    for r in rows:
        assert r["available"] is True and r["unavailable_reason"] is None
        assert r["version"] == importlib.metadata.version(DISTRIBUTIONS[r["backend"]])
        assert r["notes"] and r["description"]


def test_table_names_every_backend(run_cli):
    result = run_cli("backends")
    assert result.exit_code == 0
    versions = [importlib.metadata.version(d) for d in DISTRIBUTIONS.values()]
    for text in ["llguidance", "xgrammar", "default: --backend auto", "outlines_core", "none", *versions]:
        assert text in result.stdout, text


def test_kinds_column_says_which_commands_take_kind(run_cli):
    """Only compile and lint take --kind: the table must not head the column as if every command did."""
    for args in (["backends"], ["backends", "--engines"]):
        text = " ".join(run_cli(*args).stdout.split())
        assert "(--kind)" not in text
        assert "compile's --kind names them (lint's --kind takes all but choice" in text


def test_a_library_below_sgclis_floor_is_unavailable_naming_the_floor(monkeypatch):
    """The README's CPU recipe installs xgrammar with --no-deps, which skips pip's floor: 0.1.25 failed
    the README's own example test while `sgcli backends` listed it as usable."""
    from sgcli.backends import get_backend, listed_unavailable_reason

    backend = get_backend("llguidance")
    monkeypatch.setattr(backend, "_version", "1.0.3", raising=False)
    for reason in (backend.unavailable_reason(), listed_unavailable_reason(backend)):
        assert reason is not None and "llguidance 1.0.3 is older than the 1.8 sgcli needs" in reason
        assert "pip install 'llguidance>=1.8'" in reason
    monkeypatch.setattr(backend, "_version", "1.8.0", raising=False)
    assert backend.unavailable_reason() is None


def test_the_commands_said_to_take_kind_flags_take_them():
    """The footer and the README said `test` took --schema, --regex, ...: it takes a test file ('No such
    option: --schema'); each command named as taking the kind flags must take them, and test must not be named."""
    import re
    from pathlib import Path

    from sgcli.cli.backends_cmd import KINDS_NOTE

    footer = re.search(r"; (.*?) take each by its own flag", KINDS_NOTE).group(1)
    readme = " ".join((Path(__file__).resolve().parent.parent / "README.md").read_text().split())
    sentence = re.search(r"Every command that takes a constraint \((.*?)\) takes .*?with one set of rules", readme)
    all_but = re.search(r"all but (.*?) the same kind flags", sentence.group(0))
    said = set(re.findall(r"[a-z-]+", footer.replace(" and ", ", ")))
    excluded = set(re.findall(r"`([a-z-]+)`", all_but.group(1))) if all_but else set()
    readme_said = set(re.findall(r"`([a-z-]+)`", sentence.group(1))) - excluded
    assert said == readme_said and "test" not in said, (said, readme_said)
    for command in said:
        assert {"--schema", "--regex", "--choice", "--sub"} <= set(cli_options(command)), command
    assert "--schema" not in cli_options("test") and "--sub" in cli_options("test")
