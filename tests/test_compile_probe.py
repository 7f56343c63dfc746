"""The bounded compile's forked trial is skipped only for a grammar that already passed one under
limits no looser than today's (a `.probe` record in the cache); anything else probes again."""

from __future__ import annotations

import pytest
from helpers import patch_everywhere

from sgcli.backends import get_backend
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.limits import Limits, current_limits, set_limits

SCHEMA = '{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}'


@pytest.fixture(autouse=True)
def _private_cache_and_limits(tmp_path, monkeypatch):
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))
    before = current_limits()
    set_limits(Limits(timeout_s=30.0, memory_mb=4096, max_bytes=1 << 20))
    yield
    set_limits(before)


@pytest.fixture
def forks(monkeypatch):
    """How many trial compiles ran in a forked child."""
    import sgcli.backends.bounded as bounded

    calls = []
    real = bounded.run_bounded

    def counting(fn, **kw):
        calls.append(kw)
        return real(fn, **kw)

    patch_everywhere(monkeypatch, bounded, "run_bounded", counting)
    return calls


def _compile(vocab, text=SCHEMA):
    from sgcli.backends.compile_cache import compile_cached

    spec = ConstraintSpec(Kind.JSON_SCHEMA, text, "s.json")
    return compile_cached(get_backend("llguidance"), spec, vocab)


def _probe_file():
    from sgcli.backends.compile_cache import compiled_dir

    return list(compiled_dir().rglob("*.probe"))


def test_a_grammar_that_passed_its_trial_compiles_without_one_next_time(smol_tokenizer, forks):
    from sgcli.backends.matching import accepts_bytes

    first = _compile(smol_tokenizer.vocab)
    assert len(forks) == 1 and len(_probe_file()) == 1
    second = _compile(smol_tokenizer.vocab)
    assert len(forks) == 1  # no second trial
    assert second.status == first.status == "not cacheable"
    assert accepts_bytes(second.compiled, b'{"a": 1}').accepted
    assert not accepts_bytes(second.compiled, b'{"a": "x"}').accepted
    _compile(smol_tokenizer.vocab, SCHEMA.replace('"a"', '"b"'))  # another grammar: its own trial
    assert len(forks) == 2


def test_stricter_limits_or_a_damaged_record_probe_again(smol_tokenizer, forks):
    _compile(smol_tokenizer.vocab)
    set_limits(Limits(timeout_s=30.0, memory_mb=2048, max_bytes=1 << 20))  # less memory than the pass had
    _compile(smol_tokenizer.vocab)
    assert len(forks) == 2
    (record,) = _probe_file()
    record.write_bytes(b"{not json")
    _compile(smol_tokenizer.vocab)
    assert len(forks) == 3
    set_limits(Limits(timeout_s=1e-9, memory_mb=2048, max_bytes=1 << 20))  # a pass in 1/10 of this is impossible
    from sgcli.backends.bounded import CompileLimitError

    with pytest.raises(CompileLimitError):
        _compile(smol_tokenizer.vocab)


def test_a_grammar_error_is_still_positioned_after_a_pass_was_recorded(smol_tokenizer, forks, tmp_path):
    from sgcli.errors import UserError

    _compile(smol_tokenizer.vocab)
    with pytest.raises(UserError):
        _compile(smol_tokenizer.vocab, '{"type": "object", "properties": {"a": {"type": "nonsense"}}}')
    set_limits(Limits(timeout_s=0, memory_mb=0, max_bytes=1 << 20))  # no limits: no trial, no record
    _compile(smol_tokenizer.vocab, SCHEMA.replace('"a"', '"c"'))
    assert len(_probe_file()) == 1
