"""`sgcli lint` and `sgcli rule` from the command line: formats, exit codes, selection."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

CASES = Path(__file__).resolve().parent / "lint_cases"
UNDEFINED = str(CASES / "g001_undefined_rule.gbnf")
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def two_findings(tmp_path):
    """A GBNF file with an undefined rule (G001 at 1:14) and an unused one (G002 at 2:1)."""
    g = tmp_path / "two.gbnf"
    g.write_text('root ::= "a" missing\nspare ::= "b"\n')
    return str(g)


def test_undefined_rule_prints_file_line_col_code_and_exits_1(run_cli):
    result = run_cli("lint", UNDEFINED, "--backend", "xgrammar")
    assert result.exit_code == 1
    assert result.stdout == f"{UNDEFINED}:2:19: G001 `greeting` is used but never defined\n"
    assert "Found 1 diagnostic in 1 file (1 error, 0 warnings)." in result.stderr


def test_clean_file_exits_0(run_cli, tmp_path):
    g = tmp_path / "ok.gbnf"
    g.write_text('root ::= "yes" | "no"\n')
    result = run_cli("lint", g)
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert "All checks passed (1 file)." in result.stderr


def test_json_output_is_valid_json_with_every_field(run_cli, two_findings):
    result = run_cli("lint", two_findings, "--output-format", "json")
    assert result.exit_code == 1
    records = json.loads(result.stdout)
    assert [(r["code"], r["line"], r["col"]) for r in records] == [("G001", 1, 14), ("G002", 2, 1)]
    assert records[0]["rule"] == "undefined-rule" and records[0]["severity"] == "error"
    assert records[0]["end_col"] == 21 and records[0]["path"] == two_findings
    # llguidance reads GBNF through sgcli's reader: its refusal is the finding itself, and no note repeats it
    assert records[0]["notes"] == []
    again = json.loads(run_cli("lint", two_findings, "--output-format", "json", "-b", "xgrammar").stdout)
    assert "xgrammar says" in " ".join(again[0]["notes"])  # a backend's own words, folded in
    assert set(records[1]) >= {"code", "rule", "severity", "path", "line", "col", "message", "hint", "backend"}


def test_json_output_for_a_clean_file_is_an_empty_list(run_cli, tmp_path):
    g = tmp_path / "ok.gbnf"
    g.write_text('root ::= "a"\n')
    result = run_cli("lint", g, "--output-format", "json")
    assert (result.exit_code, json.loads(result.stdout)) == (0, [])


def test_json_lines_output(run_cli, two_findings):
    result = run_cli("lint", two_findings, "--output-format", "json-lines")
    lines = result.stdout.splitlines()
    assert [json.loads(line)["code"] for line in lines] == ["G001", "G002"]


def test_github_output_is_workflow_commands(run_cli, two_findings):
    result = run_cli("lint", two_findings, "--output-format", "github")
    first, second = result.stdout.splitlines()
    assert first.startswith(
        f"::error file={two_findings},line=1,col=14,endLine=1,endColumn=21,"
        "title=sgcli G001 (undefined-rule)::`missing` is used but never defined"
    )
    assert second.startswith(f"::warning file={two_findings},line=2,col=1,")


def test_full_output_shows_the_source_line_and_a_caret(run_cli, two_findings):
    result = run_cli("lint", two_findings, "--output-format", "full", "--select", "G001")
    out = result.stdout
    assert f"{two_findings}:1:14: G001 [error] `missing` is used but never defined" in out
    assert '1 | root ::= "a" missing\n  |              ^^^^^^^\n' in out
    assert "= hint: define `missing`" in out
    assert "= rule: undefined-rule (sgcli rule G001)" in out


@pytest.mark.parametrize(
    "args, codes",
    [
        (["--select", "G002"], ["G002"]),
        (["--ignore", "G001", "--ignore", "S"], ["G002"]),
        # the backend's own error is no longer folded in (by default llguidance checks GBNF; xgrammar needs -b all)
        (["--ignore", "G001"], ["S001", "G002"]),
        (["--ignore", "G001", "--backend", "all"], ["S001", "S001", "G002"]),
        (["--select", "G", "--ignore", "G002"], ["G001"]),
        (["--ignore", "G", "--select", "G002"], ["G002"]),  # the more specific selector wins
        (["--select", "g001,g002"], ["G001", "G002"]),
        (["--select", "W"], []),
    ],
)
def test_select_and_ignore(run_cli, two_findings, args, codes):
    result = run_cli("lint", two_findings, "--output-format", "json", *args)
    assert [r["code"] for r in json.loads(result.stdout)] == codes
    assert result.exit_code == (1 if codes else 0)


def test_selecting_only_structure_rules_runs_no_backend(run_cli, monkeypatch):
    case = CASES / "s001_compile_error.gbnf"  # xgrammar rejects its empty alternative (S001)
    assert run_cli("lint", case, "--backend", "all").exit_code == 1

    def no_backend(*args, **kwargs):
        raise AssertionError("a backend was compiled although only G rules were selected")

    monkeypatch.setattr("sgcli.lint.backend_checks.compile_with", no_backend)
    result = run_cli("lint", case, "--select", "G", "--backend", "all")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["missing.gbnf"], "GBNF file not found: missing.gbnf"),
        ([str(CASES / "g001_undefined_rule.gbnf"), "--select", "X9"], "no rule code starts with 'X9'"),
        (
            [str(CASES / "g001_undefined_rule.gbnf"), "--ignore", "Q"],
            "Invalid value for '--ignore' (env var: 'SGCLI_LINT_IGNORE'): no rule code starts with 'Q'",
        ),
        ([str(CASES / "g001_undefined_rule.gbnf"), "--backend", "nope"], "'nope'"),
        (
            [str(CASES / "g001_undefined_rule.gbnf"), "--backend", "outlines_core"],
            "backend 'outlines_core' does not support EBNF/GBNF",
        ),
        ([str(CASES / "g001_undefined_rule.gbnf"), "--max-tokens", "5"], "--max-tokens needs --tokenizer"),
        ([str(CASES / "g001_undefined_rule.gbnf"), "--output-format", "xml"], "'xml' is not one of 'concise', 'full'"),
        (
            [str(CASES / "g001_undefined_rule.gbnf"), "--kind", "cobol"],
            "--kind cobol: not a kind of file sgcli can lint",
        ),
    ],
)
def test_bad_usage_and_unreadable_input_exit_2(run_cli, args, message):
    result = run_cli("lint", *args)
    assert result.exit_code == 2
    assert message in " ".join(re.sub("[\u2500-\u257f]", " ", result.stderr).split())  # rich's box unwrapped


def test_unreadable_file_among_good_ones_still_lints_the_rest_and_exits_2(run_cli, two_findings):
    result = run_cli("lint", two_findings, "nowhere.gbnf", "--output-format", "json")
    assert result.exit_code == 2
    assert [r["code"] for r in json.loads(result.stdout)] == ["G001", "G002"]


def test_unknown_extension_exits_2(run_cli, tmp_path):
    f = tmp_path / "grammar.txt"
    f.write_text('root ::= "a"\n')
    result = run_cli("lint", f)
    assert result.exit_code == 2 and "cannot tell the grammar kind" in result.stderr
    assert run_cli("lint", f, "--kind", "ebnf").exit_code == 0


def test_schema_minimum_reported_as_not_enforced_by_outlines_core(run_cli):
    args = ["lint", CASES / "j001_minimum.json", "--json-whitespace", "compact", "--output-format", "json"]
    result = run_cli(*args, "--backend", "all")
    (record,) = json.loads(result.stdout)
    assert (record["code"], record["backend"], record["line"], record["col"]) == ("J001", "outlines_core", 3, 3)
    assert "`minimum` is silently ignored by outlines_core" in record["message"]
    assert result.exit_code == 1


def test_rule_explains_a_code(run_cli):
    result = run_cli("rule", "w001")
    assert result.exit_code == 0
    assert result.stdout.startswith("W001 unbounded-whitespace (warning; family W: unbounded whitespace")
    assert "ws ::= [ \\t\\n]{0,20}" in result.stdout  # the fix


def test_rule_all_lists_every_code(run_cli):
    from sgcli.lint.rules import RULES

    result = run_cli("rule", "--all", "--json")
    assert [json.loads(line)["code"] for line in result.stdout.splitlines()] == list(RULES)
    table = run_cli("rule", "--all").stdout
    assert all(code in table for code in RULES)


def test_rule_unknown_code_exits_2(run_cli):
    result = run_cli("rule", "G999")
    assert result.exit_code == 2
    assert "no rule G999" in result.stderr and "G001" in result.stderr
    assert run_cli("rule").exit_code == 2


def test_lint_with_llguidance_does_not_import_torch():
    """The pre-commit path: `sgcli lint --backend llguidance` on every kind of file."""
    files = [
        CASES / n
        for n in (
            "g001_undefined_rule.gbnf",
            "w001_ignore_whitespace.lark",
            "r001_lookahead.regex",
            "j001_minimum.json",
        )
    ]
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "sgcli", "lint", "--backend", "llguidance", *map(str, files)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "llguidance" in imported  # the backend really ran
    assert "torch" not in imported and "transformers" not in imported
    assert "G001" in proc.stdout and "R001" in proc.stdout


def test_pre_commit_hook_definition():
    import yaml

    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "sgcli-lint" and hook["entry"] == "sgcli lint"
    assert hook["args"][:2] == ["--backend", "llguidance"]
    import re

    for name in ("a.gbnf", "a.ebnf", "a.lark", "a.regex", "a.schema.json"):
        assert re.search(hook["files"], name), name
    assert not re.search(hook["files"], "package.json")


def test_docs_describe_every_rule():
    from sgcli.lint.rules import RULES

    doc = (ROOT / "docs" / "lint.md").read_text()
    for code, rule in RULES.items():
        assert f"| {code} | {rule.name} | {rule.severity} |" in doc, code


def _unavailable(monkeypatch, *names):
    """Make backends look not installed (as in the light install), whatever this venv holds."""
    from sgcli.backends import get_backend

    for name in names:
        reason = f"cannot import {name} (test); pip install 'sgcli[{name}]'"
        monkeypatch.setattr(get_backend(name), "unavailable_reason", lambda reason=reason: reason)


def test_default_lint_judges_the_backend_generate_would_choose(run_cli, tmp_path):
    """The default is generate's own `auto`: outlines_core's J001 on `minimum` is asked for, not a default."""
    from sgcli.backends.auto import compile_auto
    from sgcli.constraints.sources import from_file
    from sgcli.lint.runner import byte_vocab

    escape = tmp_path / "escape.json"  # `\Z`, which llguidance's regexes do not read
    escape.write_text('{\n  "type": "string",\n  "pattern": "a\\\\Z"\n}\n')
    for path, expected in ((CASES / "j001_minimum.json", None), (escape, "xgrammar")):
        result = run_cli("lint", path, "--json-whitespace", "compact", "--output-format", "json")
        judged = {d["backend"] for d in json.loads(result.stdout) if d["backend"]}
        compiled, fallbacks = compile_auto(from_file(str(path)), byte_vocab())
        assert judged <= {compiled.backend} and (expected is None or compiled.backend == expected), result.stdout
        assert bool(fallbacks) == (expected is not None)
        for fallback in fallbacks:  # llguidance refuses `\\Z`: generate falls back, lint says so, as a note
            assert f"would use {compiled.backend}: {fallback['backend']} rejects it" in result.stderr
    # outlines_core is named only where auto tried it (it ranks before xgrammar, which leaves `\\Z` to the checker)
    assert all("outlines_core" not in line or "rejects it" in line for line in result.stderr.splitlines())


@pytest.mark.parametrize("case", ["j001_minimum.json", "g002_unused_rule.gbnf", "w001_ignore_whitespace.lark"])
def test_default_lint_is_the_same_whatever_else_is_installed(run_cli, monkeypatch, case):
    full = run_cli("lint", CASES / case, "--output-format", "json")
    _unavailable(monkeypatch, "xgrammar", "outlines_core")
    light = run_cli("lint", CASES / case, "--output-format", "json")
    assert (light.exit_code, light.stdout) == (full.exit_code, full.stdout)
    assert "outlines_core" not in full.stderr + light.stderr and "xgrammar" not in full.stderr + light.stderr


def test_backends_not_installed_are_named_once_in_a_footer(run_cli, monkeypatch, tmp_path):
    _unavailable(monkeypatch, "outlines_core")
    files = [CASES / "j001_minimum.json", CASES / "w002_json_whitespace.json", CASES / "g002_unused_rule.gbnf"]
    result = run_cli("lint", *files, "--backend", "all", "--output-format", "json")
    assert not [d for d in json.loads(result.stdout) if d["backend"] == "outlines_core"]
    footer = [line for line in result.stderr.splitlines() if "not installed" in line]
    assert footer == [
        "note: not installed, so not judged: outlines_core (cannot import outlines_core (test); "
        "pip install 'sgcli[outlines_core]')"
    ]
    assert len([line for line in result.stderr.splitlines() if "outlines_core" in line]) == 1  # the footer only


def test_a_named_backend_that_is_not_installed_is_one_usage_error(run_cli, monkeypatch):
    from sgcli.backends import get_backend

    monkeypatch.setattr(get_backend("outlines_core"), "module", "no_such_module_sgcli_test")
    result = run_cli("lint", CASES / "j001_minimum.json", CASES / "w002_json_whitespace.json", "-b", "outlines_core")
    assert result.exit_code == 2
    assert result.stderr.count("backend 'outlines_core' is not usable") == 1, result.stderr


def test_the_projects_own_grammars_lint_clean(run_cli):
    """Every grammar of sgcli/grammars/, the JSON Schema among them, counted (JSON layout: compact)."""
    library = ROOT / "sgcli" / "grammars"
    grammars = [p for p in library.iterdir() if not p.name.endswith(".test.yaml")]
    result = run_cli("lint", library, "--json-whitespace", "compact")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert result.stderr.strip().splitlines()[-1] == f"All checks passed ({len(grammars)} files)."
    assert "did not run" not in result.stderr


def test_a_gbnf_error_is_placed_where_it_is_for_llguidance(run_cli, tmp_path):
    """llguidance said 'invalid regex "[z-a]"' with no line:col of a GBNF file (hostile_inputs.py: "lint:
    GBNF bad char class" named the file only); sgcli's own reader now prints GBNF for it, so the
    backwards range is named at its place."""
    path = tmp_path / "g.gbnf"
    path.write_text('# chars\nroot ::= "x" [z-a]\n')
    result = run_cli("lint", path, "--backend", "llguidance")
    assert result.exit_code == 1
    assert f"{path}:2:14: S001 llguidance rejects it: cannot read this EBNF/GBNF: character range" in result.output


def test_a_backend_message_without_a_position_is_placed_at_the_piece_it_quotes():
    """The fallback for a message that quotes a piece found once in the file, and only then."""
    from sgcli.lint.backend_checks import _quoted_position

    text = '# chars\nroot ::= "x" [z-a]\n'
    assert _quoted_position('invalid regex "[z-a]" (in regex)', text) == (2, 14)
    assert _quoted_position('invalid regex "x"', text + 'y ::= "x"\n') == (None, None)  # twice: nowhere


def test_an_undefined_lark_name_is_one_finding_at_the_name(run_cli, tmp_path):
    """llguidance places its "unknown name" error at the rule's body (or its first line), so it stood as
    a second error beside G001 (2026-12-06): folded into G001 by the name it quotes."""
    grammar = tmp_path / "a.lark"
    grammar.write_text('start: foo\nfoo: "a" undefined7\n')
    result = run_cli("lint", grammar, "--backend", "llguidance", "--output-format", "json")
    records = json.loads(result.stdout)
    assert [(r["code"], r["line"], r["col"]) for r in records] == [("G001", 2, 10)], records


def test_readme_says_what_lint_compiles_against_without_a_tokenizer(run_cli):
    """The README said lint's --tokenizer defaulted to the embedded model's; lint compiles against
    a 256-byte vocabulary without one, as its help says."""
    help_text = " ".join(run_cli("lint", "--help").stdout.split())
    assert "256-byte vocabulary" in help_text
    readme = " ".join((ROOT / "README.md").read_text().split())
    paragraph = readme[readme.index("Grammar development, no model needed") :][:600]
    assert "`lint` compiles against a 256-byte vocabulary" in paragraph


def test_kind_help_lists_exactly_the_kinds_lint_takes():
    """lint --kind's help listed json_schema, regex, ebnf, lark, while it took structural_tag and llguidance
    too (and refused choice, which `sgcli backends` said it named)."""
    from helpers import cli_options

    from sgcli.cli.backends_cmd import KINDS_NOTE
    from sgcli.cli.lint_cmd import _kind
    from sgcli.constraints.spec import Kind
    from sgcli.errors import UserError

    listed = cli_options("lint")["--kind"].help.split(": ", 1)[1].split(" (also ")[0].split(", ")
    for kind in Kind:
        try:
            taken = _kind(kind.value) is kind
        except UserError:
            taken = False
        assert taken == (kind.value in listed), kind
    assert "lint's --kind takes all but choice" in KINDS_NOTE


def test_the_backend_that_constrains_nothing_is_refused(run_cli, monkeypatch):
    """`--backend none` judged nothing and said "All checks passed" (exit 0), where compile, test and
    bench refuse it: now exit 2 here too, from the flag and from SGCLI_BACKEND alike."""
    grammar = ROOT / "examples" / "answer.gbnf"
    for args in (["-b", "none"], ["-b", "llguidance", "-b", "none"]):
        result = run_cli("lint", grammar, *args)
        assert result.exit_code == 2 and "constrains nothing" in result.output, result.output
    monkeypatch.setenv("SGCLI_BACKEND", "none")
    result = run_cli("lint", grammar)
    assert result.exit_code == 2 and "constrains nothing" in result.output, result.output
