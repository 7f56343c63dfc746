"""One `--backend` on every command: choices from the registry in --help, typos exit 2 naming
them, repeatable where a command runs several, configuration still supplies it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from sgcli import config
from sgcli.backends import known_names
from sgcli.cli.app import app

GRAMMAR = 'root ::= "yes" | "no"\n'
# Each command that takes --backend, with arguments that would otherwise be valid, and the
# words it takes beside the backend names ('auto' for one backend; 'all' and 'auto' for several).
COMMANDS = {
    "generate": (["--ebnf", "g.gbnf", "hi"], ["auto"]),
    "masks": (["--ebnf", "g.gbnf", "yes"], ["auto"]),
    "compile": (["g.gbnf"], ["all", "auto"]),
    "lint": (["g.gbnf"], ["all", "auto"]),
    "test": (["cases.yaml"], ["all", "auto"]),
    "bench": (["."], ["all", "auto"]),
    "compare-backends": (["--no-generate", "--ebnf", "g.gbnf"], ["all", "auto"]),
}


@pytest.fixture(autouse=True)
def _project(tmp_path, monkeypatch):
    for key in config.KEYS.values():
        if key.env and key.env != "SGCLI_CACHE_DIR":
            monkeypatch.delenv(key.env, raising=False)
    (tmp_path / "g.gbnf").write_text(GRAMMAR)
    monkeypatch.chdir(tmp_path)
    config.reset()
    yield
    config.reset()


def _flat(text: str) -> str:
    """Rich's boxes and line wraps removed, so a message can be matched as one line."""
    return " ".join(re.sub("[\u2500-\u257f]", " ", text).split())


def test_every_backend_option_is_the_shared_one():
    group = get_command(app)
    with_backend = {
        name
        for name, cmd in group.commands.items()
        if any("--backend" in getattr(p, "opts", ()) for p in getattr(cmd, "params", ()))
    }
    assert with_backend == set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_lists_the_choices(command):
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0
    extra = COMMANDS[command][1]
    assert "|".join([*known_names(), *extra]) in result.output


@pytest.mark.parametrize("command", COMMANDS)
def test_a_typo_is_exit_2_naming_the_choices(run_cli, command):
    args, extra = COMMANDS[command]
    result = run_cli(command, *args, "--backend", "xgramar")
    assert result.exit_code == 2
    choices = ", ".join(f"'{n}'" for n in [*known_names(), *extra])
    assert f"'xgramar' is not one of {choices}" in _flat(result.stderr)


def test_compare_keeps_the_comma_form_and_checks_each_name(run_cli):
    result = run_cli("compare-backends", "--no-generate", "--ebnf", "g.gbnf", "--backends", "llguidance,xgramar")
    assert result.exit_code == 2
    assert "'xgramar' is not one of" in _flat(result.stderr)
    rows = {}
    for args in (["--backends", "xgrammar,llguidance"], ["-b", "xgrammar", "--backend", "llguidance"]):
        result = run_cli("compare-backends", "--no-generate", "--ebnf", "g.gbnf", *args, "--output-format", "jsonl")
        assert result.exit_code == 0, result.stderr
        rows[args[0]] = sorted(json.loads(line)["backend"] for line in result.stdout.splitlines())
    assert rows["--backends"] == rows["-b"] == ["llguidance", "xgrammar"]


def _compiled_by(run_cli, *args) -> list[str]:
    result = run_cli("compile", "g.gbnf", *args, "--output-format", "jsonl")
    assert result.exit_code == 0, result.stderr
    return [json.loads(line)["backend"] for line in result.stdout.splitlines()]


def test_repeatable_and_all(run_cli):
    assert _compiled_by(run_cli, "-b", "xgrammar", "-b", "llguidance") == ["xgrammar", "llguidance"]
    everything = _compiled_by(run_cli, "--backend", "all")
    assert {"xgrammar", "llguidance"} <= set(everything) and "none" not in everything
    assert _compiled_by(run_cli) == everything  # no --backend: all
    assert _compiled_by(run_cli, "-b", "auto") == everything  # generate's 'auto' (say, from a config file): the default


def test_configuration_file_then_env_then_flag(run_cli, tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.sgcli]\nbackend = "xgrammar"\n')
    config.reset()
    assert _compiled_by(run_cli) == ["xgrammar"]  # a repeatable option takes the file's single name
    monkeypatch.setenv("SGCLI_BACKEND", "llguidance")
    assert _compiled_by(run_cli) == ["llguidance"]
    assert _compiled_by(run_cli, "--backend", "xgrammar") == ["xgrammar"]


def _tested_by(run_cli, *args) -> list[str]:
    Path("cases.yaml").write_text("grammar: g.gbnf\ncases:\n  - {input: 'yes', accept: true}\n")
    result = run_cli("test", "cases.yaml", *args, "--output-format", "jsonl")
    assert result.exit_code == 0, result.stderr
    return [b["backend"] for b in json.loads(result.stdout.splitlines()[-1])["backends"]]


def test_test_takes_the_file_then_env_then_flag(run_cli, tmp_path, monkeypatch):
    """`test` took the file's backend but not SGCLI_BACKEND: the file overrode the environment, unlike
    compile, bench and lint and every other setting (flag > env > file > default)."""
    assert len(_tested_by(run_cli)) > 1  # nothing set: every backend
    (tmp_path / "sgcli.toml").write_text('backend = "llguidance"\n')
    config.reset()
    assert _tested_by(run_cli) == ["llguidance"]
    monkeypatch.setenv("SGCLI_BACKEND", "xgrammar")
    assert _tested_by(run_cli) == ["xgrammar"]
    assert _tested_by(run_cli, "-b", "llguidance") == ["llguidance"]


def test_compare_backends_compares_every_backend_whatever_is_configured(run_cli, tmp_path, monkeypatch):
    (tmp_path / "sgcli.toml").write_text('backend = "llguidance"\n')
    monkeypatch.setenv("SGCLI_BACKEND", "xgrammar")
    config.reset()
    result = run_cli("compare-backends", "--no-generate", "--ebnf", "g.gbnf", "--output-format", "jsonl")
    assert result.exit_code == 0, result.stderr
    assert {"llguidance", "xgrammar"} <= {json.loads(line)["backend"] for line in result.stdout.splitlines()}


def test_lint_checks_each_named_backend(run_cli):
    assert run_cli("lint", "g.gbnf", "-b", "xgrammar", "-b", "llguidance").exit_code == 0
    result = run_cli("lint", "g.gbnf", "-b", "xgrammar", "-b", "outlines_core")
    assert result.exit_code == 2
    assert "backend 'outlines_core' does not support EBNF/GBNF" in result.stderr


@pytest.mark.parametrize(("alias", "name"), [("guidance", "llguidance"), ("outlines", "outlines_core")])
def test_vllm_and_sglang_names_are_the_same_backends(run_cli, alias, name):
    """vLLM's --structured-outputs-config.backend and SGLang's --grammar-backend spell them so."""
    from sgcli.serving.vllm import VLLM_SERVER_BACKENDS

    assert alias in VLLM_SERVER_BACKENDS
    result = run_cli("compile", "--regex", "[0-9]+", "-b", alias, "--output-format", "json-lines")
    assert result.exit_code == 0, result.stderr
    assert [json.loads(line)["backend"] for line in result.stdout.splitlines()] == [name]
    result = run_cli(
        "compare-backends", "--no-generate", "--regex", "[0-9]+", "--backends", f"{alias},xgrammar", "--json"
    )
    assert sorted(json.loads(line)["backend"] for line in result.stdout.splitlines()) == sorted([name, "xgrammar"])


def test_the_pip_name_of_outlines_core_works_too(run_cli):
    result = run_cli("compile", "--regex", "[0-9]+", "-b", "outlines-core", "--output-format", "json-lines")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["backend"] == "outlines_core"


@pytest.mark.parametrize("command", COMMANDS)
def test_a_typo_gets_a_did_you_mean(run_cli, command):
    args, _ = COMMANDS[command]
    result = run_cli(command, *args, "--backend", "llguidence")
    assert result.exit_code == 2
    assert "Did you mean 'llguidance'?" in _flat(result.stderr) and "Value error" not in result.stderr


def test_all_where_one_backend_is_taken_says_which_commands_take_it(run_cli, monkeypatch):
    """SGCLI_BACKEND=all suits lint, compile, test and bench; masks and generate refused it with only the
    list of names (and `sgcli config` too), which read as if 'all' were unknown."""
    result = run_cli("masks", "--regex", "a", "--text", "a", "-b", "all")
    flat = " ".join(result.output.replace("│", " ").split())
    assert result.exit_code == 2 and "'all' runs every backend in lint, compile, test and bench" in flat, flat
    monkeypatch.setenv("SGCLI_BACKEND", "all")
    result = run_cli("masks", "--regex", "a", "--text", "a")
    assert result.exit_code == 2 and "this command takes one" in " ".join(result.output.split())
    result = run_cli("lint", "--regex", "a")
    assert result.exit_code == 0, result.output  # where it applies, it is taken
