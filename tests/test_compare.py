"""`sgcli compare-backends`: same constraint across backends and whitespace variants."""

from __future__ import annotations

import json

import pytest

from sgcli.records import CompareRow

ROW_KEYS = {
    "backend",
    "variant",
    "compile_ms",
    "cache",
    "mask_ms_p50",
    "mask_ms_p99",
    "tokens",
    "tokens_per_s",
    "finish_reason",
    "valid",
    "output",
    "agree",
    "warnings",
    "error",
    "skipped",
}
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "rank": {"type": "integer"}},
    "required": ["city", "rank"],
    "additionalProperties": False,
}


@pytest.fixture
def schema_file(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(SCHEMA))
    return path


def rows(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_no_generate_walks_the_text_through_every_backend(run_cli, schema_file, smol_tokenizer):
    text = '{"city":"Paris","rank":1}'  # generate's default layout: compact
    result = run_cli("compare-backends", "--no-generate", "--schema", schema_file, "--text", text, "--json")
    assert result.exit_code == 0, result.output
    out = rows(result.stdout)
    assert [r["backend"] for r in out] == ["llguidance", "xgrammar", "outlines_core"]
    n_tokens = len(smol_tokenizer.vocab.encode(text))
    for r in out:
        assert ROW_KEYS <= r.keys() and r["error"] is None
        assert r["valid"] is True and r["tokens"] == n_tokens and r["rejected_at_token"] is None
        assert r["compile_ms"] > 0 and 0 <= r["mask_ms_p50"] <= r["mask_ms_p99"]
        assert isinstance(r["agree"], bool) and r["allowed_first"] >= 1
    assert out[0]["agree"] is True  # the reference row


def test_no_generate_says_a_prefix_is_one(run_cli, schema_file):
    """A text the grammar takes whole but cannot stop after was `valid: false` with no error at all."""
    result = run_cli("compare-backends", "--no-generate", "--schema", schema_file, "--text", '{"city":"Pa', "--json")
    assert result.exit_code == 1, result.output
    for r in rows(result.stdout):
        assert r["valid"] is False and r["rejected_at_token"] is None
        assert r["errors"] == ["a prefix: the grammar takes every token of the text but cannot stop after it"]


def test_whitespace_variants_show_what_each_backend_cannot_do(run_cli, schema_file):
    result = run_cli(
        "compare-backends",
        "--no-generate",
        "--schema",
        schema_file,
        "--json",
        "--whitespace",
        "flexible,compact,indent=2",
        "--text",
        '{"city":"Paris","rank":1}',
    )
    out = rows(result.stdout)
    assert [(r["backend"], r["variant"]) for r in out] == [
        (b, v) for b in ("llguidance", "xgrammar", "outlines_core") for v in ("flexible", "compact", "indent=2")
    ]
    skipped = {(r["backend"], r["variant"]): r["error"] for r in out if r["skipped"]}
    assert skipped == {
        ("llguidance", "indent=2"): "llguidance does not support the JSON option --indent",
        ("outlines_core", "indent=2"): "outlines_core does not support the JSON option --indent",
    }
    by = {(r["backend"], r["variant"]): r for r in out}
    assert all(
        by[(b, v)]["valid"] for b in ("llguidance", "xgrammar", "outlines_core") for v in ("flexible", "compact")
    )
    indented = by[("xgrammar", "indent=2")]
    assert indented["valid"] is False and indented["rejected_at_token"] == 0  # the first token '{"' lacks the newline
    assert result.exit_code == 1


def test_rejected_text_exits_1_and_says_where(run_cli, schema_file):
    result = run_cli(
        "compare-backends",
        "--no-generate",
        "--schema",
        schema_file,
        "--json",
        "--backends",
        "llguidance,outlines",
        "--text",
        '{"city": 3}',
    )
    assert result.exit_code == 1
    out = rows(result.stdout)
    assert [r["backend"] for r in out] == ["llguidance", "outlines_core"]
    assert all(r["valid"] is False and r["rejected_at_token"] is not None for r in out)


def test_table_lists_every_backend(run_cli, schema_file):
    result = run_cli("compare-backends", "--no-generate", "--schema", schema_file)
    assert result.exit_code == 0, result.output
    for name in ("llguidance", "xgrammar", "outlines_core", "compile", "p50", "p99", "times in ms"):
        assert name in result.stdout
    # piped, the table keeps its cells whole (it was cut at 80 columns: `outlines_cor`, `agre`, `no (token`)
    result = run_cli("compare-backends", "--no-generate", "--schema", schema_file, "--text", '{"city": 1}')
    header = next(line for line in result.stdout.splitlines() if "backend" in line).split()
    assert header[-4:] == ["steps", "allowed", "ok", "agree"], result.stdout
    assert "outlines_core" in result.stdout and "(token " in result.stdout


@pytest.mark.model
def test_generation_rows_with_the_default_model(run_cli):
    result = run_cli(
        "compare-backends",
        "--choice",
        "yes",
        "--choice",
        "no",
        "--max-tokens",
        "4",
        "--json",
        "Is water wet? Answer yes or no.",
    )
    assert result.exit_code == 0, result.output
    out = rows(result.stdout)
    assert [r["backend"] for r in out] == ["llguidance", "xgrammar", "outlines_core"]
    for r in out:
        CompareRow.model_validate(r)  # the same model (and key set) as the --no-generate rows
        assert set(r) == set(CompareRow.model_fields) and r["error"] is None
        assert r["output"] in ("yes", "no") and r["valid"] is True and r["finish_reason"] == "stop"
        assert r["tokens"] >= 1 and r["tokens_per_s"] is not None and r["mask_ms_p50"] <= r["mask_ms_p99"]
        assert r["agree"] is (r["output"] == out[0]["output"])


def test_generation_rows_compile_what_generate_compiles(run_cli, schema_file, monkeypatch):
    """A generating comparison compiles as `generate` does (JsonOptions.for_generation: xgrammar's
    strict_mode), in every layout variant; --no-generate judges a given text, as masks and test do."""
    from sgcli.cli import compare

    seen = []
    monkeypatch.setattr(compare, "run_compare", lambda request, reporter: seen.append(request) or [])
    monkeypatch.setattr(compare, "_report", lambda *a, **k: None)
    result = run_cli("compare-backends", "--schema", schema_file, "--whitespace", "compact,flexible", "Capital?")
    assert result.exit_code == 0, result.output
    assert seen[-1].spec.json_options.for_generation
    assert [opts.for_generation for _, opts in seen[-1].variants] == [True, True]
    text = '{"city":"Paris","rank":1}'
    result = run_cli("compare-backends", "--no-generate", "--schema", schema_file, "--text", text)
    assert result.exit_code == 0, result.output
    assert not seen[-1].spec.json_options.for_generation


@pytest.mark.parametrize(
    "names,expected",
    [
        (["all", "none"], ["llguidance", "xgrammar", "outlines_core", "none"]),
        (["none", "auto", "xgrammar"], ["none", "llguidance", "xgrammar", "outlines_core"]),
        (["outlines", "none", "outlines_core"], ["outlines_core", "none"]),
        (None, ["llguidance", "xgrammar", "outlines_core"]),
    ],
)
def test_all_beside_named_backends_is_their_union_in_order(names, expected):
    """`-b all -b none` dropped none: 'all' discarded every name beside it."""
    from sgcli.app.compare import pick_backends
    from sgcli.constraints.spec import ConstraintSpec, Kind

    assert pick_backends(names, ConstraintSpec(Kind.REGEX, "[0-9]{2}", "--regex")) == expected


@pytest.mark.parametrize("variant", ["indent=²", "indent=٣", "max-whitespace=¹"])
def test_a_variant_with_non_ascii_digits_is_refused(run_cli, schema_file, variant):
    """`indent=²` passed str.isdigit and int() raised (exit 3); `indent=٣` was taken as indent 3."""
    result = run_cli("compare-backends", "--no-generate", "--schema", schema_file, "--whitespace", variant)
    assert result.exit_code == 2, result.output
    assert f"unknown --whitespace variant '{variant}'" in result.output


@pytest.mark.parametrize("generate", [False, True])
def test_every_row_skipped_exits_2_before_anything_loads(run_cli, schema_file, monkeypatch, generate):
    """`-b llguidance --indent 2` gave a table of skipped rows and exit 0 (with a prompt, after loading the model)."""
    monkeypatch.setattr("sgcli.cli.compare.run_compare", lambda *a, **k: pytest.fail("loaded anyway"))
    mode = ["hi"] if generate else ["--no-generate"]
    args = ["compare-backends", "--schema", schema_file, "-b", "llguidance", "-b", "outlines_core", "--indent", "2"]
    result = run_cli(*args, *mode)
    assert result.exit_code == 2, result.output
    assert "nothing to compare: llguidance does not support the JSON option --indent; outlines_core" in result.output
    assert "backends that can: xgrammar" in result.output


def test_a_row_says_whether_its_compile_time_is_a_cache_load(run_cli, schema_file, monkeypatch, tmp_path):
    """The compile column mixed on-disk cache loads (67 ms) with compiles (4883 ms) and never said which."""
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))
    args = ["compare-backends", "--no-generate", "--schema", schema_file, "-b", "xgrammar", "-b", "outlines_core"]
    first = rows(run_cli(*args, "--json").stdout)
    assert all(r["cache"] in ("miss", "not stored", "not cacheable") for r in first)
    assert all(r["cache"] == "off" for r in rows(run_cli(*args, "--json", "--no-cache").stdout))
    table = " ".join(run_cli(*args).stdout.split())
    assert "backend compile cache p50" in table and "a load from the on-disk cache where cache is hit" in table


def test_the_none_row_judges_text_by_the_independent_check(run_cli, schema_file):
    """`-b none --text hello` said valid: true (none's masks take anything) for text that is not JSON."""
    args = ["compare-backends", "--no-generate", "--schema", schema_file, "-b", "none", "-b", "llguidance", "--json"]
    result = run_cli(*args, "--text", "hello")
    none, llg = rows(result.stdout)
    assert none["valid"] is False and "not JSON" in none["errors"][0] and llg["valid"] is False
    assert any("constrains nothing" in w for w in none["warnings"]) and result.exit_code == 1
    good = rows(run_cli(*args, "--text", '{"city":"Paris","rank":1}').stdout)
    assert [r["valid"] for r in good] == [True, True]


def test_a_regex_row_has_no_json_layout_variant(run_cli, tmp_path):
    """A `--regex` run's rows read variant "flexible", and its summary "agree (flexible)": no layout shapes a regex."""
    args = ["compare-backends", "--no-generate", "--regex", "[a-z]+", "--text", "abc", "-b", "llguidance"]
    result = run_cli(*args, "-b", "xgrammar", "--json")
    assert [r["variant"] for r in rows(result.stdout)] == ["-", "-"]
    assert "agree: llguidance, xgrammar" in result.stderr and "flexible" not in result.stderr
    (tmp_path / "g.lark").write_text('start: %json {"type": "integer"}\n')  # an inline %json is laid out
    inline = ["compare-backends", "--no-generate", "--lark", tmp_path / "g.lark", "--text", "1", "-b", "llguidance"]
    assert [r["variant"] for r in rows(run_cli(*inline, "--json").stdout)] == ["compact"]
