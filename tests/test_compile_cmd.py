"""`sgcli compile` and the on-disk cache of compiled grammars."""

from __future__ import annotations

import json

import pytest

from sgcli.backends import get_backend, unsupported_reason
from sgcli.grammar_dev.matching import enforcing_backends


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))


def _records(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def _cacheable_backend() -> str:
    from sgcli.cache.grammars import is_cacheable

    names = [n for n in enforcing_backends() if is_cacheable(get_backend(n))]
    assert names, "at least one backend (xgrammar) implements serialize/deserialize"
    return names[0]


def test_syntax_error_is_reported_at_file_line_col(run_cli, tmp_path):
    bad = tmp_path / "bad.gbnf"
    bad.write_text('root ::= "a" item\nitem ::= "x" | @ "y"\n')
    result = run_cli("compile", bad, "--backend", "xgrammar")
    assert result.exit_code == 1
    assert f"{bad}:2:16: error: xgrammar:" in result.stdout
    record = _records(run_cli("compile", bad, "--backend", "xgrammar", "--json"))[0]
    assert (record["status"], record["line"], record["col"]) == ("error", 2, 16)


def test_every_backend_gets_a_row_and_unsupported_ones_name_who_can(run_cli):
    result = run_cli("compile", "@json", "--json")
    rows = {r["backend"]: r for r in _records(result)}
    assert list(rows) == enforcing_backends()
    for name, row in rows.items():
        unsupported = unsupported_reason(get_backend(name), _spec("@json")) is not None
        assert (row["status"] == "unsupported") == unsupported, row
        if unsupported:
            assert row["backends_that_can"] and name not in row["backends_that_can"]
        else:
            assert row["status"] == "ok" and row["size"]["normalized_chars"] > 0
    assert result.exit_code == 0


def _spec(ref):
    from sgcli.constraints.sources import from_file

    return from_file(ref)


def test_second_compile_is_a_cache_hit(run_cli):
    backend = _cacheable_backend()
    first = _records(run_cli("compile", "@tool_call", "--backend", backend, "--json"))[0]
    second = _records(run_cli("compile", "@tool_call", "--backend", backend, "--json"))[0]
    fresh = _records(run_cli("compile", "@tool_call", "--backend", backend, "--json", "--no-cache"))[0]
    assert (first["cache"], second["cache"], fresh["cache"]) == ("miss", "hit", "off")
    assert second["size"] == first["size"]
    human = run_cli("compile", "@tool_call", "--backend", backend)
    assert " hit " in human.stdout and human.exit_code == 0


def test_a_cache_hit_gives_a_working_matcher_and_corrupt_entries_are_recompiled(smol_tokenizer):
    from sgcli.cache.grammars import cache_key, compile_cached, compiled_dir
    from sgcli.grammar_dev.matching import accepts_bytes

    backend = get_backend(_cacheable_backend())
    spec = _spec("@iso8601")
    vocab = smol_tokenizer.vocab
    assert compile_cached(backend, spec, vocab).status == "miss"
    hit = compile_cached(backend, spec, vocab)
    assert hit.status == "hit"
    assert accepts_bytes(hit.compiled, b"2024-02-29").accepted
    assert not accepts_bytes(hit.compiled, b"2024-13-01").accepted
    key = cache_key(backend, spec, vocab)
    (data_file,) = compiled_dir().rglob(f"{key}.bin")
    data_file.write_bytes(b"not a compiled grammar")
    assert compile_cached(backend, spec, vocab).status == "miss"
    assert compile_cached(backend, spec, vocab).status == "hit"


def test_cache_key_depends_on_tokenizer_and_grammar(smol_tokenizer):
    from sgcli.cache.grammars import cache_key, tokenizer_identity
    from sgcli.constraints.spec import JsonOptions

    vocab = smol_tokenizer.vocab
    wider = vocab.padded(len(vocab) + 64)
    assert tokenizer_identity(vocab) == tokenizer_identity(vocab)
    assert tokenizer_identity(vocab) != tokenizer_identity(wider)
    backend = get_backend("xgrammar")
    spec = _spec("@tool_call")
    compact = type(spec)(spec.kind, spec.text, spec.origin, json_options=JsonOptions(whitespace="compact"))
    keys = {
        cache_key(backend, spec, vocab),
        cache_key(backend, spec, wider),
        cache_key(backend, compact, vocab),
        cache_key(backend, _spec("@iso8601"), vocab),
    }
    assert len(keys) == 4


def test_print_shows_the_normalized_grammar(run_cli):
    result = run_cli("compile", "@iso8601", "--backend", "xgrammar", "--print")
    assert result.exit_code == 0
    assert "# " in result.stdout and "root ::=" in result.stdout


def test_bad_usage_exits_2(run_cli, tmp_path):
    assert run_cli("compile", tmp_path / "missing.gbnf").exit_code == 2
    assert run_cli("compile", "@json", "--backend", "no-such-backend").exit_code == 2
    assert run_cli("compile", "@json", "--kind", "yaml").exit_code == 2
    unsupported = [n for n in enforcing_backends() if unsupported_reason(get_backend(n), _spec("@json"))]
    for name in unsupported:  # the only backend asked for cannot compile the file at all
        result = run_cli("compile", "@json", "--backend", name)
        assert result.exit_code == 2 and "backends that can" in result.stdout


def test_kind_flag_overrides_the_extension(run_cli, tmp_path):
    grammar = tmp_path / "digits.txt"
    grammar.write_text("[0-9]+\n")
    records = _records(run_cli("compile", grammar, "--kind", "regex", "--backend", "xgrammar", "--json"))
    assert records[0]["status"] == "ok" and records[0]["kind"] == "regex"
