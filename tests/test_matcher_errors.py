"""A matcher that fails while computing a mask (llguidance's "Too many items" on a grammar of short,
overlapping lexemes) says so everywhere: its mask says nothing about the text, so `masks`, `test`,
`bench` and `compare-backends` must not report the text as rejected (they showed one end token and
"cannot stop"), and `lint`/`generate` name the failure before any model runs."""

from __future__ import annotations

import json

import pytest

from sgcli.backends.llguidance_backend import LLGuidanceMatcher

FAILURE = "parser error: Too many items (limit 50000; mask)"


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def failing(monkeypatch):
    """llguidance's matcher, failed from its first mask on (filled, or given as bytes to the compile)."""
    original, original_bytes = LLGuidanceMatcher.fill_mask, LLGuidanceMatcher.mask_bytes

    def fill_mask(self, bitmask):
        original(self, bitmask)
        self.failed = True

    def mask_bytes(self):
        self.failed = True
        return original_bytes(self)

    monkeypatch.setattr(LLGuidanceMatcher, "fill_mask", fill_mask)
    monkeypatch.setattr(LLGuidanceMatcher, "mask_bytes", mask_bytes)
    monkeypatch.setattr(
        LLGuidanceMatcher, "error", property(lambda self: FAILURE if getattr(self, "failed", 0) else None)
    )


@pytest.fixture
def grammar(tmp_path):
    path = tmp_path / "g.lark"
    path.write_text('start: "a" /[b-z]/*\n')
    return path


def test_masks_reports_the_failure_not_a_rejection(run_cli, grammar, failing, smol_tokenizer):
    result = run_cli("masks", grammar, "-b", "llguidance", "--text", "abc", "--json")
    summary = [json.loads(line) for line in result.stdout.splitlines()][-1]
    assert result.exit_code == 1
    assert summary["verdict"] == "error" and summary["error"]["message"] == FAILURE
    assert "rejected" not in summary and summary["error"]["token_index"] == 0
    shown = run_cli("masks", grammar, "-b", "llguidance", "--text", "abc")
    assert "matcher failed before token 0" in shown.stdout and "rejected" not in shown.stdout


def test_masks_validates_against_its_record_schema(run_cli, grammar, failing, smol_tokenizer):
    import jsonschema

    schema = json.loads(run_cli("schema", "mask-summary").stdout)
    result = run_cli("masks", grammar, "-b", "llguidance", "--text", "ab", "--json")
    jsonschema.validate(json.loads(result.stdout.splitlines()[-1]), schema)


def test_a_grammar_test_case_fails_on_the_failure_whatever_it_expected(run_cli, tmp_path, grammar, failing):
    cases = tmp_path / "g.test.yaml"
    cases.write_text(
        f"grammar: {grammar.name}\ncases:\n  - input: abc\n    accept: true\n  - input: x\n    accept: false\n"
    )
    result = run_cli("test", cases, "-b", "llguidance")
    assert result.exit_code == 1
    assert result.stdout.count("the llguidance matcher failed at token 0") == 2, result.stdout


def test_lint_with_a_tokenizer_and_generate_refuse_before_the_model(run_cli, grammar, failing, smol_tokenizer):
    linted = run_cli("lint", grammar, "--backend", "llguidance", "--tokenizer", "default", "--output-format", "json")
    found = json.loads(linted.stdout)
    assert linted.exit_code == 1
    assert any(d["code"] == "S001" and FAILURE in d["message"] for d in found), found
    generated = run_cli("generate", "--lark", grammar, "-b", "llguidance", "hi")  # the embedded model's tokenizer
    assert generated.exit_code == 2
    assert "matcher fails at the first step" in generated.stderr and FAILURE in generated.stderr


def test_compare_backends_marks_the_row_failed(run_cli, grammar, failing, smol_tokenizer):
    result = run_cli("compare-backends", "--lark", grammar, "--no-generate", "--text", "abc", "--json")
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    llg = [r for r in rows if r.get("backend") == "llguidance"]
    assert llg and FAILURE in (llg[0]["error"] or ""), rows
