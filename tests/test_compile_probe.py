"""One compile, bounded (`sgcli.backends.bounded`): constraints that fit (no big count, a stack their
nesting cannot overflow) on backends whose work grows with the constraint compile once in this process
under the time limit; the rest compile once in a forked child (outlines-core's Index comes back from
it), and a grammar that passed a child's compile quickly under limits no looser than today's (a
`.probe` record in the cache) compiles in process next time."""

from __future__ import annotations

import json
import time

import pytest
from helpers import patch_everywhere

from sgcli.backends import get_backend
from sgcli.backends.bounded import STACK_PER_BYTE, WORKER_STACK, CompileLimitError, compile_bounded, fits_in_process
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.errors import UserError
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
    """Each forked child a compile ran in."""
    import sgcli.backends.bounded as bounded

    calls = []
    real = bounded.run_bounded

    def counting(fn, **kw):
        calls.append(kw)
        return real(fn, **kw)

    patch_everywhere(monkeypatch, bounded, "run_bounded", counting)
    return calls


@pytest.fixture
def compiles(monkeypatch):
    """Every backend.compile in this process, by backend name."""
    from sgcli.backends import llguidance_backend, outlines_backend

    calls: list[str] = []
    for cls in (llguidance_backend.LLGuidanceBackend, outlines_backend.OutlinesCoreBackend):
        real = cls.compile

        def counting(self, spec, vocab, _real=real):
            calls.append(self.name)
            return _real(self, spec, vocab)

        monkeypatch.setattr(cls, "compile", counting)
    return calls


def _compile(vocab, text=SCHEMA, backend="llguidance", kind=Kind.JSON_SCHEMA):
    from sgcli.backends.compile_cache import compile_cached

    return compile_cached(get_backend(backend), ConstraintSpec(kind, text, "s.json"), vocab)


def _probe_file():
    from sgcli.backends.cache_entries import compiled_dir

    return list(compiled_dir().rglob("*.probe"))


def _schema_of(n: int) -> str:
    props = {f"p{i}": {"type": "string", "description": "x" * 40} for i in range(n)}
    return json.dumps({"type": "object", "properties": props})


def _big_schema() -> str:
    """Past what the compile thread's stack holds: compiled in a forked child."""
    text = _schema_of(5000)
    assert len(text) * STACK_PER_BYTE > WORKER_STACK
    return text


def test_a_small_constraint_compiles_once_in_this_process(smol_tokenizer, forks, compiles):
    """Was: a trial compile in a forked child, then the real one (p50 11 -> 98 ms through sgcli)."""
    from sgcli.backends.matching import accepts_bytes

    outcome = _compile(smol_tokenizer.vocab)
    assert forks == [] and compiles == ["llguidance"] and _probe_file() == []
    assert accepts_bytes(outcome.compiled, b'{"a": 1}').accepted
    assert not accepts_bytes(outcome.compiled, b'{"a": "x"}').accepted


def test_fits_in_process_means_no_big_count_and_room_on_the_compile_threads_stack():
    assert fits_in_process(ConstraintSpec(Kind.REGEX, "[a-z]{1,300}"))
    assert fits_in_process(ConstraintSpec(Kind.JSON_SCHEMA, _schema_of(600)))  # 36 KB: past the old 32 KB screen
    assert not fits_in_process(ConstraintSpec(Kind.REGEX, "a{1,1000000}"))
    # a JSON Schema's big numbers that are no count: bounds and descriptions (Kubernetes' are full of them)
    port = '{"type": "integer", "maximum": 65535, "description": "a port, 1-65535", "enum": [80, 65535]}'
    assert fits_in_process(ConstraintSpec(Kind.JSON_SCHEMA, port))
    assert not fits_in_process(ConstraintSpec(Kind.JSON_SCHEMA, '{"type": "string", "pattern": "^a{1,100000}$"}'))
    assert not fits_in_process(ConstraintSpec(Kind.JSON_SCHEMA, '{"type": "array", "maxItems": 20000}'))
    assert not fits_in_process(ConstraintSpec(Kind.JSON_SCHEMA, r'{"type": "string", "pattern": "a\u007b100000}"}'))
    assert not fits_in_process(ConstraintSpec(Kind.JSON_SCHEMA, '{"type": "string", "minLength": 100000}'))
    assert not fits_in_process(ConstraintSpec(Kind.JSON_SCHEMA, _big_schema()))


def test_without_a_big_stack_for_the_compile_thread_less_fits(monkeypatch):
    """Where no stack size can be asked for (or the address space is capped), the compile thread has
    the default stack, and only what fits it compiles in process."""
    import threading

    from sgcli.backends import bounded

    def refuse(size=0):  # as where the address space is capped: only the default (0) can be had
        if size:
            raise ValueError("size not valid")
        return 0

    monkeypatch.setattr(threading, "stack_size", refuse)
    monkeypatch.setattr(bounded._Worker, "_current", None)
    monkeypatch.setattr(bounded._Worker, "_stack", bounded.WORKER_STACK)
    bounded._Worker.current()
    assert bounded._Worker.stack_bytes() == bounded._main_stack_bytes()
    assert not fits_in_process(ConstraintSpec(Kind.JSON_SCHEMA, _schema_of(600)))
    assert fits_in_process(ConstraintSpec(Kind.JSON_SCHEMA, SCHEMA))


def test_a_constraint_too_big_for_the_main_threads_stack_compiles_once_on_the_compile_thread(
    smol_tokenizer, forks, compiles, monkeypatch
):
    """Was: a forked trial compile, then the real one, for anything past 32 KB (Kubernetes' Pod schema:
    75-80 ms against the library's 24-27)."""
    import threading

    from sgcli.backends import bounded, llguidance_backend

    threads = []
    real = llguidance_backend.LLGuidanceBackend.compile
    monkeypatch.setattr(
        llguidance_backend.LLGuidanceBackend,
        "compile",
        lambda self, spec, vocab: threads.append(threading.current_thread().name) or real(self, spec, vocab),
    )
    monkeypatch.setattr(bounded, "_overrun", lambda error: None)  # as in the sgcli process
    text = _schema_of(600)
    assert len(text) * STACK_PER_BYTE > bounded._main_stack_bytes()
    _compile(smol_tokenizer.vocab, text)
    assert forks == [] and threads == ["sgcli-compile"] and _probe_file() == []


@pytest.mark.slow  # ~5-12 s: make test-slow, run by CI
def test_a_big_constraint_compiles_in_a_child_then_in_process_once_it_passed(smol_tokenizer, forks, compiles):
    # a pass is remembered only under a tenth of the time limit (PROBE_MARGIN): this compile took 3-4 s
    # on a loaded 2-core Xeon, past 30 s's tenth, so the limit here leaves that margin whatever the machine
    set_limits(Limits(timeout_s=120.0, memory_mb=4096, max_bytes=1 << 20))
    first = _compile(smol_tokenizer.vocab, _big_schema())
    assert len(forks) == 1 and len(_probe_file()) == 1
    assert compiles == ["llguidance"]  # in this process: the child's compile is not counted here
    second = _compile(smol_tokenizer.vocab, _big_schema())
    assert len(forks) == 1 and compiles == ["llguidance", "llguidance"]  # no second child
    assert second.status == first.status == "not cacheable"
    assert second.reason == "llguidance has no serialized form of a compiled grammar: it compiles each run"


def test_a_big_constraint_refused_in_the_child_is_not_compiled_again(smol_tokenizer, forks, compiles):
    """The child's positioned refusal comes back as it is: one compile, where the parent used to
    compile again only to find the same error."""
    import sgcli.backends.bounded as bounded

    props = json.loads(_big_schema())
    props["properties"]["bad"] = {"type": "string", "pattern": "\\cJ"}  # ECMA's control escape: llguidance refuses
    text = json.dumps(props)
    spec = ConstraintSpec(Kind.JSON_SCHEMA, text, "big.json")
    with pytest.raises(UserError) as in_process:
        get_backend("llguidance").compile(spec, smol_tokenizer.vocab)
    compiles.clear()
    with pytest.raises(UserError) as bounded_error:
        bounded.compile_bounded(get_backend("llguidance"), spec, smol_tokenizer.vocab)
    assert len(forks) == 1 and compiles == []  # refused in the child only
    assert bounded_error.value.render() == in_process.value.render()
    assert "unrecognized escape" in bounded_error.value.message and bounded_error.value.location.line == 1


def test_outlines_core_compiles_once_in_the_child_and_its_index_comes_back(smol_tokenizer, forks, compiles):
    from sgcli.backends.matching import accepts_bytes

    backend = get_backend("outlines_core")
    compiled = compile_bounded(backend, ConstraintSpec(Kind.REGEX, "(yes|no)[0-9]{2}", "r.regex"), smol_tokenizer.vocab)
    assert len(forks) == 1 and compiles == []  # the parent never compiled
    assert compiled.backend == "outlines_core" and compiled.normalized == "(yes|no)[0-9]{2}"
    assert accepts_bytes(compiled, b"yes42").accepted and not accepts_bytes(compiled, b"maybe").accepted


@pytest.mark.slow  # three forked compiles of a 5,000-property schema: 8-15 s
def test_stricter_limits_or_a_damaged_record_fork_again(smol_tokenizer, forks):
    big = _big_schema()
    _compile(smol_tokenizer.vocab, big)
    set_limits(Limits(timeout_s=30.0, memory_mb=2048, max_bytes=1 << 20))  # less memory than the pass had
    _compile(smol_tokenizer.vocab, big)
    assert len(forks) == 2
    (record,) = _probe_file()
    record.write_bytes(b"{not json")
    _compile(smol_tokenizer.vocab, big)
    assert len(forks) == 3


@pytest.fixture
def slow_llguidance(monkeypatch):
    """llguidance's compile made to take 3 s (the thread sleeps: the GIL is free, as in a real compile)."""
    from sgcli.backends import llguidance_backend

    real = llguidance_backend.LLGuidanceBackend.compile

    def slow(self, spec, vocab):
        time.sleep(3)
        return real(self, spec, vocab)

    monkeypatch.setattr(llguidance_backend.LLGuidanceBackend, "compile", slow)


def test_a_timeout_in_process_is_the_limit_and_the_process_goes_on(smol_tokenizer, forks, slow_llguidance):
    set_limits(Limits(timeout_s=0.5, memory_mb=2048, max_bytes=1 << 20))
    t = time.perf_counter()
    with pytest.raises(CompileLimitError) as exc:
        _compile(smol_tokenizer.vocab, SCHEMA.replace('"a"', '"t"'))
    assert exc.value.flag == "--compile-timeout" and forks == [] and time.perf_counter() - t < 2.5
    set_limits(Limits(timeout_s=30.0, memory_mb=2048, max_bytes=1 << 20))
    assert _compile(smol_tokenizer.vocab).compiled.backend == "llguidance"


def test_a_grammar_error_is_positioned_on_either_path(smol_tokenizer):
    bad = '{"type": "object", "properties": {"a": {"type": "nonsense"}}}'
    with pytest.raises(UserError):
        _compile(smol_tokenizer.vocab, bad)
    with pytest.raises(UserError, match="outlines_core"):
        _compile(smol_tokenizer.vocab, "(a", backend="outlines_core", kind=Kind.REGEX)


def test_auto_stops_at_a_timeout_instead_of_moving_to_the_next_backend(smol_tokenizer, slow_llguidance):
    """A busy machine must not quietly pick xgrammar because llguidance ran past --compile-timeout."""
    from sgcli.backends.auto import compile_auto

    set_limits(Limits(timeout_s=0.5, memory_mb=2048, max_bytes=1 << 20))
    with pytest.raises(CompileLimitError) as exc:
        compile_auto(ConstraintSpec(Kind.JSON_SCHEMA, SCHEMA.replace('"a"', '"u"'), "s.json"), smol_tokenizer.vocab)
    assert "with llguidance" in exc.value.message and exc.value.flag == "--compile-timeout"


@pytest.mark.slow  # a fresh sgcli process that imports everything, then a compile held past a 5 s timeout
def test_the_sgcli_process_compiles_on_its_main_thread_and_ends_at_the_timeout(tmp_path):
    """No hand-off to a compile thread in the real process (it cost more than a small compile on a
    loaded machine); a compile that passes --compile-timeout there ends the run with exit 2."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    schema = tmp_path / "s.json"
    schema.write_text(SCHEMA)
    code = (
        "import sys, threading, time\n"
        "from sgcli.backends import llguidance_backend as m\n"
        "real = m.LLGuidanceBackend.compile\n"
        "def slow(self, spec, vocab):\n"
        "    assert threading.current_thread() is threading.main_thread()\n"
        "    time.sleep(60)\n"
        "    return real(self, spec, vocab)\n"
        "m.LLGuidanceBackend.compile = slow\n"
        "from sgcli.cli.app import main\n"
        f"sys.argv = ['sgcli', 'compile', {str(schema)!r}, '-b', 'llguidance', '--compile-timeout', '5']\n"
        "main()\n"
    )
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root), SGCLI_CACHE_DIR=str(tmp_path / "cache"))
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "took longer than the 5 s time limit" in done.stderr and "--compile-timeout" in done.stderr
    assert time.perf_counter() - t < 50  # not the 60 s compile


def _counts_by_regex(spec: ConstraintSpec) -> list[int]:
    """The counts as a plain regex scan reads them (every run of 5+ digits, then the same context
    rule): what `bounded._counts` finds with str.find on a translated text instead."""
    import re

    from sgcli.backends.bounded import _CLOSES_AFTER, _COUNT_BEFORE

    text = spec.text
    json_schema = spec.kind is Kind.JSON_SCHEMA and "\\u00" not in text
    found = []
    for m in re.finditer(r"\d{5,}", text):
        before = _COUNT_BEFORE.search(text, max(0, m.start() - 40), m.start()) if json_schema else True
        if before and (not json_schema or before.group().lstrip()[:1] != "," or _CLOSES_AFTER.match(text, m.end())):
            found.append(int(m.group()) if len(m.group()) < 19 else 10**19)
    return found


def test_counts_are_the_digit_runs_a_regex_scan_finds():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from sgcli.backends.bounded import _counts

    pieces = st.sampled_from(["1", "12345", "999999", "0", " ", ",", "{", "}", '"maxLength": ', '"a"', "\\u007b", "x"])

    @settings(max_examples=300, deadline=None)
    @given(st.lists(pieces, max_size=30), st.sampled_from([Kind.JSON_SCHEMA, Kind.REGEX]))
    def check(parts, kind):
        spec = ConstraintSpec(kind, "".join(parts))
        assert list(_counts(spec)) == _counts_by_regex(spec)

    check()
    long_run = ConstraintSpec(Kind.REGEX, "a{1," + "7" * 5000 + "}")  # no int() of 5,000 digits
    assert list(_counts(long_run)) == [10**19] and not fits_in_process(long_run)
