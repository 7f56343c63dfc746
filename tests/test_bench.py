"""`sgcli bench`: counts, ordered percentiles, failures with reasons, JSONL, plots, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LIB_JSON = ROOT / "sgcli" / "grammars" / "json.gbnf"

BACKENDS = ("llguidance", "xgrammar")
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
ITEMS = [
    {"name": "person", "schema": PERSON, "instances": [{"name": "Ada", "age": 36}, {"name": "Bob", "age": 7}]},
    {"name": "generated", "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}},
    {"name": "digits", "grammar": "[0-9]+", "kind": "regex", "instances": ["123", "4"]},
    {"name": "undefined", "grammar": "root ::= foo", "kind": "ebnf"},
]


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))


def _jsonl(tmp_path: Path, items: list) -> Path:
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    return path


def _records(output: str) -> list[dict]:
    return [json.loads(line) for line in output.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def jsonl_run(tmp_path_factory):
    """One bench run over ITEMS with both backends, shared by the tests that read its records."""
    import os

    from typer.testing import CliRunner

    from sgcli.cli.app import app

    tmp = tmp_path_factory.mktemp("bench")
    os.environ["SGCLI_CACHE_DIR"] = str(tmp / "cache")
    try:
        args = ["bench", str(_jsonl(tmp, ITEMS)), "--backend", "all", "--output-format", "jsonl"]
        result = CliRunner().invoke(app, args, catch_exceptions=False)
    finally:
        del os.environ["SGCLI_CACHE_DIR"]
    return result


def _backend_rows(result) -> dict[str, dict]:
    return {r["backend"]: r for r in _records(result.stdout) if r["type"] == "backend"}


def test_counts_and_failure_reasons(jsonl_run):
    assert jsonl_run.exit_code == 1, jsonl_run.output  # an item failed to compile: a finding
    rows = _backend_rows(jsonl_run)
    for name in BACKENDS:
        row = rows[name]
        assert row["compiled"] == 3 and row["failed"] == 1
        assert row["failed_by_reason"] == {"compile error": 1}
        # 2 + 2 given instances and at least one generated for the schema without any
        assert row["instances_walked"] >= 5 and row["instances_rejected"] == 0
    failed = [
        r
        for r in _records(jsonl_run.stdout)
        if r["type"] == "item" and r["status"] == "failed" and r["backend"] in BACKENDS
    ]
    assert {r["item"] for r in failed} == {"undefined"}
    for r in failed:
        assert "items.jsonl:4" in r["message"] and "foo" in r["message"]


def test_records_match_the_models(jsonl_run):
    from sgcli.records import BenchBackend, BenchItem

    records = _records(jsonl_run.stdout)
    assert {r["type"] for r in records} == {"item", "backend"}
    for r in records:
        (BenchItem if r["type"] == "item" else BenchBackend).model_validate(r)


def test_percentiles_present_and_ordered(jsonl_run):
    for name, row in _backend_rows(jsonl_run).items():
        mask = row["mask_ms"]
        assert mask["n"] > 0, name
        assert 0 < mask["p50"] <= mask["p99"] <= mask["max"], (name, mask)
        cold = row["compile_cold_ms"]
        if row["compiled"]:
            assert cold["n"] == row["compiled"] and 0 < cold["p50"] <= cold["p99"], (name, cold)
    # xgrammar is cacheable; the cache keeps an entry only where loading beats compiling
    cached = _backend_rows(jsonl_run)["xgrammar"]["compile_cached_ms"]
    items = [r for r in _records(jsonl_run.stdout) if r["type"] == "item" and r["backend"] == "xgrammar"]
    assert all("cache" in r for r in items if r["status"] == "compiled")
    assert cached["n"] == sum(r.get("cache") == "hit" for r in items)
    if cached["n"]:
        assert 0 < cached["p50"] <= cached["p99"]


def test_items_record_instance_sources(jsonl_run):
    items = {(r["item"], r["backend"]): r for r in _records(jsonl_run.stdout) if r["type"] == "item"}
    assert items[("person", "llguidance")]["instance_source"] == "given"
    assert items[("generated", "llguidance")]["instance_source"] == "generated"
    # a mask per token and one after the last: more masks than instances
    assert items[("person", "xgrammar")]["masks"] > 2 * 2
    for r in items.values():
        if r["status"] == "compiled":
            assert 0 < r["mask_ms_p50"] <= r["mask_ms_max"], r


def test_an_instance_the_independent_check_rejects_is_an_input_error(tmp_path, run_cli):
    """It was walked and reported as "valid instance 1 rejected", blaming the backend: sgcli.validation
    judges given instances first, as it judges generate's outputs."""
    path = _jsonl(
        tmp_path,
        [
            {"grammar": "[0-9]+", "kind": "regex", "instances": ["12", "x1"]},
            {"schema": {"type": "integer"}, "instances": ["str"]},
            {"name": "good", "grammar": "[0-9]+", "kind": "regex", "instances": ["12"]},
        ],
    )
    result = run_cli("bench", path, "--backend", "llguidance", "--json")
    assert result.exit_code == 2, result.output
    items = {r["item"]: r for r in _records(result.stdout) if r["type"] == "item"}
    assert items["items.jsonl:1"]["reason"] == "input error"
    assert (
        "items.jsonl:1:1: instance 1 is not valid: output does not match the regex" in items["items.jsonl:1"]["message"]
    )
    assert "items.jsonl:2:1: instance 0 is not valid: " in items["items.jsonl:2"]["message"]
    assert "'str' is not of type 'integer'" in items["items.jsonl:2"]["message"]
    assert items["good"]["status"] == "compiled"
    assert _backend_rows(result)["llguidance"]["instances_rejected"] == 0


def test_a_test_file_case_the_independent_check_rejects_is_an_input_error_at_its_line(tmp_path, run_cli):
    (tmp_path / "d.regex").write_text("[0-9]+\n")
    (tmp_path / "d.test.yaml").write_text(
        "grammar: d.regex\ncases:\n  - {input: '1', accept: true}\n  - {input: 'x', accept: true}\n"
    )
    result = run_cli("bench", tmp_path / "d.regex", "--backend", "llguidance")
    assert result.exit_code == 2, result.output
    assert "d.test.yaml:4: instance 1 is not valid" in result.output


def test_a_choice_item_lists_one_choice_a_line(tmp_path, run_cli):
    """It was the empty-string grammar, and the instances "a" and "b" were rejected."""
    path = _jsonl(tmp_path, [{"grammar": "a\nb", "kind": "choice", "instances": ["a", "b"]}])
    result = run_cli("bench", path, "--backend", "llguidance", "--json")
    assert result.exit_code == 0, result.output
    row = _backend_rows(result)["llguidance"]
    assert row["instances_walked"] == 2 and row["instances_rejected"] == 0


@pytest.mark.slow  # ~5-12 s: make test-slow, run by CI
def test_folder_input_with_test_files_and_table(tmp_path, run_cli):
    for name in ("json.gbnf", "json.test.yaml", "tool_call.json"):
        shutil.copy(ROOT / "sgcli" / "grammars" / name, tmp_path / name)
    (tmp_path / "README.md").write_text("not a grammar")
    result = run_cli("bench", tmp_path, "--backend", "llguidance", "--no-cache")
    assert result.exit_code == 0, result.output
    assert "sgcli bench · 2 items" in result.stdout and "llguidance" in result.stdout
    result = run_cli("bench", tmp_path, "--backend", "llguidance", "--output-format", "json")
    doc = json.loads(result.stdout)
    items = {r["item"]: r for r in doc if r["type"] == "item"}
    assert items["json.gbnf"]["instance_source"] == "test file" and items["json.gbnf"]["instances"] >= 5
    assert items["tool_call.json"]["instance_source"] == "generated"


@pytest.mark.parametrize("suffix,magic", [(".png", b"\x89PNG\r\n\x1a\n"), (".svg", b"<svg")])
def test_plot_file(tmp_path, run_cli, suffix, magic):
    path = _jsonl(tmp_path, ITEMS[:1])
    plot = tmp_path / f"bench{suffix}"
    result = run_cli("bench", path, "--backend", "llguidance", "--plot", plot)
    assert result.exit_code == 0, result.output
    data = plot.read_bytes()
    assert data.startswith(magic) if suffix == ".png" else magic in data[:2000]


@pytest.mark.parametrize(
    "content,expected",
    [
        ('{"schema": \n', "items.jsonl:1"),
        ('{"instances": []}\n', "exactly one of 'schema' or 'grammar'"),
        ('{"grammar": "a", "kind": "nonsense"}\n', "items.jsonl:1"),
        ('{"schema": {"type": 5}}\n', "invalid JSON Schema"),
        ('{"grammar": "[0-9]", "kind": "regex", "instances": [1]}\n', "must be strings"),
        ("\n", "has no items"),
        (
            '{"grammar": "x", "kind": "regex", "instances": ["\\ud800"]}\n',
            "items.jsonl:1:50: llguidance: input error: lone surrogate",
        ),
        ('{"grammar": "x", "kind": "regex", "instnces": ["x"]}\n', "unknown key 'instnces'. Did you mean 'instances'?"),
    ],
)
def test_bad_jsonl_exits_2(tmp_path, run_cli, content, expected):
    path = tmp_path / "items.jsonl"
    path.write_text(content)
    result = run_cli("bench", path, "--backend", "llguidance")
    assert result.exit_code == 2, result.output
    assert expected in result.output
    assert "Traceback" not in result.output


def test_a_bad_line_or_file_is_an_input_error_and_the_rest_is_measured(tmp_path, run_cli):
    """Nothing the user gave is lost: one unreadable JSONL line or folder file (a remote $ref, bad
    JSON) is reported, per backend, as an input error at its position; every other item is measured."""
    import json

    lines = tmp_path / "items.jsonl"
    lines.write_text('{"schema": {"type": "integer"}}\n{"schema": \n{"schema": {"type": "boolean"}}\n')
    folder = tmp_path / "schemas"
    folder.mkdir()
    (folder / "good.json").write_text('{"type": "string", "maxLength": 4}')
    (folder / "remote.json").write_text('{"properties": {"a": {"$ref": "https://example.com/a.json"}}}')
    for given, bad, needle in ((lines, "items.jsonl:2", "items.jsonl:2"), (folder, "remote.json", "remote.json:1")):
        result = run_cli("bench", given, "--backend", "llguidance", "--json")
        assert result.exit_code == 2, result.output
        records = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
        items = {r["item"]: r for r in records if r["type"] == "item"}
        assert items[bad]["status"] == "failed" and items[bad]["reason"] == "input error"
        assert needle in items[bad]["message"], items[bad]
        assert sum(r["status"] == "compiled" for r in items.values()) == len(items) - 1


def test_bad_paths_exit_2(tmp_path, run_cli):
    assert run_cli("bench", tmp_path / "missing.jsonl").exit_code == 2
    (tmp_path / "notes.txt").write_text("x")
    assert run_cli("bench", tmp_path / "notes.txt").exit_code == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_cli("bench", empty)
    assert result.exit_code == 2 and "no schema or grammar files" in result.output
    items = _jsonl(tmp_path, ITEMS[:1])
    result = run_cli("bench", items, "--plot", tmp_path / "out.pdf")
    assert result.exit_code == 2 and ".png or .svg" in result.output
    result = run_cli("bench", items, "--backend", "nosuch")
    assert result.exit_code == 2


def test_missing_matplotlib_names_the_extra(tmp_path, run_cli, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    result = run_cli("bench", _jsonl(tmp_path, ITEMS[:1]), "--plot", tmp_path / "p.png")
    assert result.exit_code == 2
    assert "sgcli's [bench] extra" in result.output


def _generation_of(backend: str, tiny_lm, smol_tokenizer) -> dict:
    """bench's generation summary for one regex item on `backend`."""
    from sgcli.grammar_dev import bench

    vocab = smol_tokenizer.vocab.padded(tiny_lm.logits_width)
    items = [bench.Item("digits", bench.ConstraintSpec(bench.Kind.REGEX, "[0-9]{3,5}", "<test>"), ["123"], "given")]
    results = bench.run(items, [backend], vocab)
    bench.generate(results, items, tiny_lm, smol_tokenizer, max_tokens=8, n_items=1)
    return bench.summary(results[0])["generation"]


def test_generate_measures_tokens_per_s(tiny_lm, smol_tokenizer):
    from sgcli.grammar_dev import bench

    g = _generation_of("llguidance", tiny_lm, smol_tokenizer)
    assert g["items"] == 1 and g["tokens_per_s"] > 0
    assert g["completed"] == 1  # a random model inside [0-9]{3,5} still ends where the grammar can stop
    if bench.has_jump_forward():
        assert g["tokens_per_s_jump_forward"] > 0
    else:
        assert g["tokens_per_s_jump_forward"] is None and "jump_forward" in g["note"]


@pytest.mark.model
def test_generate_cli_with_default_model(tmp_path, run_cli, monkeypatch):
    monkeypatch.delenv("SGCLI_CACHE_DIR")  # the converted default model lives in the user's cache; --no-cache
    path = _jsonl(tmp_path, ITEMS[:1])
    args = ("-b", "llguidance", "--generate", "--max-tokens", "12", "--threads", "1", "--no-cache", "--json")
    result = run_cli("bench", path, *args)
    assert result.exit_code == 0, result.output
    g = _backend_rows(result)["llguidance"]["generation"]
    assert g["tokens_per_s"] > 0 and g["max_tokens"] == 12


def test_generate_flag_errors(tmp_path, run_cli):
    path = _jsonl(tmp_path, ITEMS[:1])
    assert "only used with --generate" in run_cli("bench", path, "--model", "x").output
    revision = run_cli("bench", path, "--revision", "v1")
    assert revision.exit_code == 2 and "--revision is only used with --generate" in revision.output
    result = run_cli("bench", path, "--generate", "--tokenizer", "x")
    assert result.exit_code == 2 and "own tokenizer" in result.output


def test_percentile_is_nearest_rank():
    from sgcli.grammar_dev.bench import percentile

    values = [float(v) for v in range(100, 0, -1)]  # order must not matter
    assert (percentile(values, 0.5), percentile(values, 0.99), percentile(values, 1.0)) == (50.0, 99.0, 100.0)
    assert percentile([7.0], 0.99) == 7.0 and percentile([], 0.5) is None


def test_compile_limit_is_tallied_and_exits_2(tmp_path, run_cli):
    # a bound past 10,000 makes it compile in a forked child, which no compile outruns in 0.1 ms (a small
    # schema compiles in process, and one xgrammar has cached in memory can finish within that)
    big = {"name": "long", "schema": {"type": "string", "maxLength": 100_000}, "instances": ['"x"']}
    path = _jsonl(tmp_path, [big])
    result = run_cli("bench", path, "-b", "xgrammar", "--compile-timeout", "0.0001", "--json")
    assert result.exit_code == 2, result.output
    row = _backend_rows(result)["xgrammar"]
    assert row["compiled"] == 0 and row["failed_by_reason"] == {"compile limit (--compile-timeout)": 1}


def test_generate_runs_the_grammar_generate_would_compile(smol_tokenizer):
    """Instances are walked under the schema's whole language (flexible); --generate decodes under
    generate's default layout (compact), so a model cannot run on in whitespace."""
    from sgcli.backends import compile_for
    from sgcli.constraints.spec import ConstraintSpec, Kind
    from sgcli.grammar_dev import bench

    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(PERSON), "person")
    walked = compile_for("llguidance", spec, smol_tokenizer.vocab)[0]
    generating = bench._as_generate_compiles(walked)
    options = generating.spec.json_options
    assert walked.spec.json_options.whitespace == "flexible"
    assert (options.whitespace, options.for_generation, generating.backend) == ("compact", True, "llguidance")
    regex = compile_for("llguidance", ConstraintSpec(Kind.REGEX, "[0-9]+", "digits"), smol_tokenizer.vocab)[0]
    assert bench._as_generate_compiles(regex) is regex


def test_a_single_file_is_one_item(tmp_path, run_cli):
    for name in (LIB_JSON, "@json"):  # a library grammar by its name too, as compile and lint take it
        result = run_cli("bench", name, "--backend", "llguidance", "--output-format", "json")
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        (item,) = [r for r in doc if r["type"] == "item"]
        assert item["item"] == "json.gbnf" and item["instance_source"] == "test file"
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}')
    (row,) = [
        r
        for r in json.loads(run_cli("bench", schema, "-b", "llguidance", "--output-format", "json").stdout)
        if r["type"] == "item"
    ]
    assert row["instance_source"] == "generated"
    other = tmp_path / "notes.txt"
    other.write_text("x")
    bad = run_cli("bench", other)
    assert bad.exit_code == 2 and "neither a schema or grammar file, a folder, nor a .jsonl file" in bad.output


def test_the_table_and_the_plot_say_ms_as_the_json_does(tmp_path, run_cli, monkeypatch):
    from sgcli.grammar_dev import bench

    result = run_cli("bench", LIB_JSON, "--backend", "llguidance", "--no-cache")
    assert result.exit_code == 0, result.output
    assert "mask ms p50/p99/max" in result.stdout and "µs" not in result.stdout
    (summary,) = [
        r
        for r in json.loads(run_cli("bench", LIB_JSON, "-b", "llguidance", "--output-format", "json").stdout)
        if r["type"] == "backend"
    ]
    assert set(summary["mask_ms"]) >= {"p50", "p99", "max"}  # the JSON's unit, the table's unit
    titles = []
    monkeypatch.setattr("matplotlib.axes.Axes.set_title", lambda ax, title, *a, **k: titles.append(title))
    bench.plot([bench.BackendResult("llguidance", mask_ms=[0.01, 0.02])], str(tmp_path / "p.svg"))
    assert "mask ms" in titles and not any("µs" in t for t in titles)


def test_a_limit_in_the_cache_measurement_keeps_the_item_and_the_rest(tmp_path, run_cli, monkeypatch):
    """Found on Kubernetes' schemas: bench compiles each item twice (cold, then its cache entry); the
    second compile of one item ran past --compile-timeout and ended the whole run with nothing shown.
    The item keeps its cold figures and says its cache was not measured; the others are measured."""
    from sgcli.backends.bounded import CompileLimitError
    from sgcli.grammar_dev import bench

    real = bench.compile_cached

    def second_compile_too_slow(backend, spec, vocab, **kw):
        if "use_cache" not in kw and "7" in spec.text:
            raise CompileLimitError("compiling it took longer than the 10 s time limit", "--compile-timeout")
        return real(backend, spec, vocab, **kw)

    monkeypatch.setattr(bench, "compile_cached", second_compile_too_slow)
    slow = {"name": "slow", "schema": {"type": "string", "maxLength": 7}, "instances": ["abc"]}
    fine = {"name": "fine", "schema": {"type": "string", "maxLength": 4}, "instances": ["ab"]}
    result = run_cli("bench", _jsonl(tmp_path, [slow, fine]), "-b", "xgrammar", "--json")
    items = {r["item"]: r for r in _records(result.stdout) if r["type"] == "item"}
    assert result.exit_code == 0, result.output
    assert items["slow"]["status"] == "compiled" and "compile_cold_ms" in items["slow"]
    assert items["slow"]["cache"] == "not measured: compile limit (--compile-timeout)"
    assert items["fine"]["status"] == "compiled" and not items["fine"]["cache"].startswith("not measured")


def test_item_records_stream_as_they_finish_and_a_long_run_reports_progress(tmp_path, monkeypatch):
    """A folder of large schemas ran for many minutes with nothing on stdout or stderr when piped: each
    item's record is now written as soon as it is measured (a run cut short keeps what finished), and off
    a terminal a progress line names the item being worked on."""
    from typer.testing import CliRunner

    from sgcli.cli import progress
    from sgcli.cli.app import app
    from sgcli.grammar_dev import bench

    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.0)
    real, seen = bench._bench_item, []

    def third_item_breaks(result, item, vocab):
        seen.append(item.name)
        if len(seen) == 3:
            raise RuntimeError("cut short")
        return real(result, item, vocab)

    monkeypatch.setattr(bench, "_bench_item", third_item_breaks)
    args = ["bench", str(_jsonl(tmp_path, ITEMS)), "-b", "llguidance", "--output-format", "jsonl"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 3 and "cut short" in result.stderr  # the stand-in for a crash or a kill
    assert [r["item"] for r in _records(result.stdout)] == ["person", "generated"]
    assert "bench: 2/4 done" in result.stderr and "now llguidance · digits" in result.stderr


def test_an_input_error_says_its_location_once(tmp_path, run_cli):
    """It printed `items.jsonl:1: llguidance: input error: items.jsonl:1:1: instance 0 ...`."""
    path = _jsonl(tmp_path, [{"schema": {"type": "integer"}, "instances": ["str"]}])
    result = run_cli("bench", path, "--backend", "llguidance")
    assert result.exit_code == 2, result.output
    assert "items.jsonl:1:1: llguidance: input error: instance 0 is not valid" in " ".join(result.output.split())
    assert result.output.count("items.jsonl:1") == 1


def test_nothing_a_chosen_backend_can_run_exits_2_before_loading(tmp_path, run_cli, monkeypatch):
    """`bench g.lark -b outlines_core` reported '1 unsupported' and exited 0: nothing was measured."""
    grammar = tmp_path / "g.lark"
    grammar.write_text('start: "a"\n')
    monkeypatch.setattr("sgcli.grammar_dev.bench.run", lambda *a, **k: pytest.fail("measured anyway"))
    result = run_cli("bench", grammar, "--backend", "outlines_core")
    assert result.exit_code == 2, result.output
    assert "nothing to measure: outlines_core does not support Lark" in result.output
    assert "backends that can: llguidance, xgrammar" in result.output


def test_generate_has_no_jump_forward_figure_for_a_backend_without_one(tiny_lm, smol_tokenizer):
    """outlines_core has no jump-forward, yet bench reported tokens_per_s_jump_forward: the plain loop twice."""
    g = _generation_of("outlines_core", tiny_lm, smol_tokenizer)
    assert g["tokens_per_s"] > 0 and g["tokens_per_s_jump_forward"] is None
    assert "outlines_core reports no forced text" in g["note"]


def test_a_cold_compile_is_not_a_hit_in_the_librarys_memory(smol_tokenizer, monkeypatch):
    """xgrammar's GrammarCompiler kept every grammar it compiled: a repeated schema's "cold" compile took
    0.3 ms against 7 ms, even with --no-cache. Each cold compile now starts from an emptied library cache."""
    from sgcli.backends import get_backend
    from sgcli.grammar_dev import bench

    xgr = get_backend("xgrammar")
    if xgr.unavailable_reason():
        pytest.skip("xgrammar is not installed")
    vocab = smol_tokenizer.vocab
    spec = bench.ConstraintSpec(bench.Kind.JSON_SCHEMA, json.dumps(PERSON), "<test>")
    compiler = xgr._compiler(vocab)
    xgr.compile(spec, vocab)
    held = compiler.get_cache_size_bytes()
    xgr.compile(spec, vocab)
    assert compiler.get_cache_size_bytes() == held  # a hit: nothing compiled, nothing added
    xgr.forget_compiles()
    emptied = compiler.get_cache_size_bytes()
    assert emptied < held
    xgr.compile(spec, vocab)
    assert compiler.get_cache_size_bytes() > emptied  # compiled again, and kept again
    calls = []
    forget = xgr.forget_compiles
    monkeypatch.setattr(xgr, "forget_compiles", lambda: calls.append(forget()))
    items = [bench.Item(n, spec, [], "given") for n in ("a", "b")]
    bench.run(items, ["xgrammar"], vocab)
    assert len(calls) == 2  # before each item's cold compile


def _rejecting(monkeypatch, text: str) -> None:
    """Backends that reject `text` at its token 1 (a disagreement with sgcli's own check, as for `1.0`)."""
    from sgcli.grammar_dev import bench

    walk = bench.walk_masks

    def rejecting(compiled, given):
        out = walk(compiled, given)
        return out | ({"accepted": False, "rejected_at_token": 1} if given == text else {})

    monkeypatch.setattr(bench, "walk_masks", rejecting)


def test_a_rejected_case_is_named_by_its_test_file_line_and_case(tmp_path, run_cli, monkeypatch):
    """It said "valid instance 1 rejected at token 1": 0-based, counting accepted cases only."""
    (tmp_path / "n.regex").write_text("[0-9]+(\\.[0-9]+)?")
    cases = "grammar: n.regex\ncases:\n  - {input: 'x', accept: false}\n  - {input: '5', accept: true}\n"
    (tmp_path / "n.test.yaml").write_text(cases + "  - {input: '1.0', accept: true}\n")
    _rejecting(monkeypatch, "1.0")
    result = run_cli("bench", tmp_path / "n.regex", "-b", "llguidance")
    assert result.exit_code == 1, result.output
    assert f"{tmp_path / 'n.test.yaml'}:5: case 3 '1.0' rejected at token 1 by llguidance" in " ".join(
        result.stdout.split()
    )


def test_jsonl_items_of_one_name_carry_their_lines(tmp_path, run_cli, monkeypatch):
    item = {"name": "same", "grammar": "[0-9]+", "kind": "regex", "instances": ["1", "22"]}
    path = _jsonl(tmp_path, [item, item])
    _rejecting(monkeypatch, "22")
    records = _records(run_cli("bench", path, "-b", "llguidance", "--json").stdout)
    items = [r for r in records if r["type"] == "item"]
    assert [r["item"] for r in items] == ["same (items.jsonl:1)", "same (items.jsonl:2)"]
    assert [r["rejected"][0]["where"] for r in items] == [f"{path}:{n}: instance 2" for n in (1, 2)]


def test_the_table_says_how_many_values_each_percentile_stands_on(tmp_path, run_cli):
    """`cold ms p50/p99` of three compiles read as a distribution's tail; each cell now gives its n."""
    path = _jsonl(tmp_path, [ITEMS[2]] * 3)
    table = " ".join(run_cli("bench", path, "-b", "llguidance", "--no-cache").stdout.split())
    assert "(n=3)" in table  # three cold compiles
    masks = _backend_rows(run_cli("bench", path, "-b", "llguidance", "--no-cache", "--json"))["llguidance"]["mask_ms"]
    assert masks["n"] > 3 and f"(n={masks['n']})" in table


def test_a_count_of_one_is_singular(tmp_path, run_cli):
    """The table read "sgcli bench · 1 items", and a generation's line "1 tokens"."""
    from sgcli.errors import plural

    result = run_cli("bench", _jsonl(tmp_path, ITEMS[2:3]), "--backend", "llguidance", "--no-cache")
    assert result.stdout.splitlines()[0].rstrip() == "sgcli bench · 1 item", result.stdout
    assert (plural(1, "token"), plural(0, "token"), plural("-", "token")) == ("1 token", "0 tokens", "- tokens")
    assert plural(2, "entry", "entries") == "2 entries"
