"""`sgcli compile` and the on-disk cache of compiled grammars."""

from __future__ import annotations

import hashlib
import json
import os
import time

import pytest

from sgcli.backends import get_backend, unsupported_reason
from sgcli.backends.matching import enforcing_backends
from sgcli.constraints.spec import ConstraintSpec, Kind


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))


def _records(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def _cacheable_backend() -> str:
    from sgcli.backends.compile_cache import is_cacheable

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


class _Slow:
    """The cacheable backend with a compile made slow on purpose, so storing it is worth it."""

    def __init__(self, real, delay_s: float = 0.6):
        self._real, self._delay = real, delay_s

    def __getattr__(self, name):
        return getattr(self._real, name)

    def compile(self, spec, vocab):
        time.sleep(self._delay)
        compiled = self._real.compile(spec, vocab)
        compiled.compile_s += self._delay
        return compiled


class _SlowLoad(_Slow):
    """The cacheable backend with a load made slower than its compile, which counts as 60 ms at least
    (a quicker one is never stored nor tried: the test would not reach a load)."""

    def compile(self, spec, vocab):
        compiled = self._real.compile(spec, vocab)
        compiled.compile_s = max(compiled.compile_s, 0.06)
        return compiled

    def deserialize(self, data, spec, vocab):
        time.sleep(self._delay)
        return self._real.deserialize(data, spec, vocab)


def test_a_compile_faster_than_a_load_is_not_stored_and_says_why(smol_tokenizer, run_cli):
    from sgcli.backends.compile_cache import compile_cached

    backend = _SlowLoad(get_backend(_cacheable_backend()))
    spec, vocab = _spec("@iso8601"), smol_tokenizer.vocab
    first = compile_cached(backend, spec, vocab).settled()
    assert first.status == "not stored" and "compile" in first.reason  # "a load took..." or "serializing took..."
    second = compile_cached(backend, spec, vocab)  # the measurement is remembered, not repeated
    assert (second.status, second.reason) == ("not stored", f"decided by an earlier compile: {first.reason}")
    fresh = _records(run_cli("compile", "@iso8601", "--backend", backend.name, "--json", "--no-cache"))[0]
    assert fresh["cache"] == "off"


class _Quick(_Slow):
    """The cacheable backend with each compile's time set, as if measured."""

    def compile(self, spec, vocab):
        compiled = self._real.compile(spec, vocab)
        compiled.compile_s = self._delay
        return compiled


def test_a_quick_compile_not_stored_gives_its_own_time(smol_tokenizer):
    """`sgcli bench` showed compile_cold_ms 58.5 beside "not stored: compiled in under 50 ms": the reason,
    from another compile, did not say which; it names the time of the compile it judged."""
    from sgcli.backends.compile_cache import compile_cached

    outcome = compile_cached(_Quick(get_backend(_cacheable_backend()), 0.012), _spec("@iso8601"), smol_tokenizer.vocab)
    assert (outcome.status, outcome.reason) == ("not stored", "compiled in 12 ms (under 50 ms), quicker than any load")


def test_a_slow_compile_is_stored_and_a_hit_gives_a_working_matcher(smol_tokenizer):
    from sgcli.backends.compile_cache import compile_cached
    from sgcli.backends.matching import accepts_bytes

    backend = _Slow(get_backend(_cacheable_backend()))
    spec, vocab = _spec("@iso8601"), smol_tokenizer.vocab
    assert compile_cached(backend, spec, vocab).settled().status == "miss"
    hit = compile_cached(backend, spec, vocab)
    assert hit.status == "hit" and hit.compiled.compile_s < 0.6
    assert accepts_bytes(hit.compiled, b"2024-02-29").accepted
    assert not accepts_bytes(hit.compiled, b"2024-13-01").accepted


def test_the_store_runs_beside_the_caller_and_the_next_compile_waits_for_it(smol_tokenizer):
    from sgcli.backends.compile_cache import compile_cached

    backend = _Slow(get_backend(_cacheable_backend()))
    spec, vocab = _spec("@iso8601"), smol_tokenizer.vocab
    first = compile_cached(backend, spec, vocab)
    assert first.status == "miss" and first.store is not None  # returned with the store still to settle
    again = compile_cached(backend, spec, vocab)  # the same grammar: its store is settled first
    assert again.status == "hit"
    assert first.settled().status == "miss" and first.store is None


class _Reported:
    """The cacheable backend, its compiles reported as `compile_s` long (no sleep) and its loads made
    `load_s` slow: a store attempt worth making that runs for a while."""

    def __init__(self, real, compile_s: float, load_s: float = 0.0):
        self._real, self._compile_s, self._load_s = real, compile_s, load_s

    def __getattr__(self, name):
        return getattr(self._real, name)

    def compile(self, spec, vocab):
        compiled = self._real.compile(spec, vocab)
        compiled.compile_s += self._compile_s
        return compiled

    def deserialize(self, data, spec, vocab):
        time.sleep(self._load_s)
        return self._real.deserialize(data, spec, vocab)


def test_a_compile_never_waits_behind_another_grammars_store(smol_tokenizer):
    """One store at a time, and a compile of another grammar meanwhile is not stored rather than wait
    for it (a loop of compiles used to pay each previous store); its next compile stores it."""
    from sgcli.backends.compile_cache import compile_cached

    real, vocab = get_backend(_cacheable_backend()), smol_tokenizer.vocab
    first = compile_cached(_Reported(real, compile_s=5.0, load_s=1.5), _spec("@iso8601"), vocab)
    assert first.status == "miss" and first.store is not None
    digits = ConstraintSpec(Kind.REGEX, "[0-9]{1,6}", "digits")
    other = compile_cached(_Reported(real, compile_s=0.2), digits, vocab)
    assert not first.store.ready()  # it returned while the first store still ran
    assert other.status == "not stored" and "another grammar's store" in other.reason
    assert first.settled().status == "miss"
    again = compile_cached(_Reported(real, compile_s=0.2), digits, vocab)
    assert again.status == "miss"  # no skip entry was left: tried again, and stored
    assert again.settled().status == "miss"


def test_a_forked_child_compiles_and_stores_while_its_parent_has_a_store_running(smol_tokenizer):
    """A lint probe child compiles too: the parent's running store is not the child's to wait for."""
    from sgcli.backends.compile_cache import compile_cached
    from sgcli.limits import run_bounded

    backend = _Slow(get_backend(_cacheable_backend()))
    vocab = smol_tokenizer.vocab
    first = compile_cached(backend, _spec("@iso8601"), vocab)
    assert first.store is not None
    digits = ConstraintSpec(Kind.REGEX, "[0-9]{1,6}", "digits")
    in_child = run_bounded(lambda: compile_cached(backend, digits, vocab).settled().status, timeout_s=60, memory_mb=0)
    assert in_child == "miss"
    assert first.settled().status == "miss"
    assert compile_cached(backend, digits, vocab).status == "hit"  # the child's store, written for everyone


def _entry(backend, spec, vocab):
    from sgcli.backends.cache_entries import compiled_dir
    from sgcli.backends.compile_cache import cache_key

    (path,) = compiled_dir().rglob(f"{cache_key(backend, spec, vocab)}.entry")
    return path


@pytest.mark.parametrize(
    "damage",
    [
        "flip a byte",
        "truncate",
        "empty",
        "unloadable with a good checksum",
        "a named pipe",
        # the header is read as data, outside the checksum: a changed one was exit 3 (TypeError)
        "warnings of strings",
        "compile_s a string",
        "meta a list",
    ],
)
def test_a_damaged_entry_is_detected_rebuilt_and_reported(smol_tokenizer, damage):
    """A named pipe in an entry's place hung the compile forever, past --compile-timeout."""
    from helpers import bounded_hang

    from sgcli.backends.compile_cache import compile_cached

    backend = _Slow(get_backend(_cacheable_backend()))
    spec, vocab = _spec("@iso8601"), smol_tokenizer.vocab
    assert compile_cached(backend, spec, vocab).settled().status == "miss"
    path = _entry(backend, spec, vocab)
    if damage == "a named pipe":
        path.unlink()
        os.mkfifo(path)
        with bounded_hang(30):
            rebuilt = compile_cached(backend, spec, vocab).settled()
        assert rebuilt.status == "miss" and any("is not a regular file: removed" in n for n in rebuilt.notes)
        assert compile_cached(backend, spec, vocab).status == "hit"
        return
    raw = bytearray(path.read_bytes())
    if damage == "flip a byte":
        raw[-100] ^= 0x01
    if damage.startswith("unloadable"):  # a consistent entry whose payload the backend refuses
        header = json.loads(raw[: raw.index(b"\n")])
        payload = b"not a compiled grammar"
        header |= {"size": len(payload), "sha256": hashlib.sha256(payload).hexdigest()}
        raw = bytearray(json.dumps(header).encode() + b"\n" + payload)
    changed = {"warnings of strings": ("warnings", ["X"]), "compile_s a string": ("compile_s", "x")}
    if damage in changed or damage == "meta a list":
        newline = raw.index(b"\n")
        header = json.loads(raw[:newline])
        if damage == "meta a list":
            header["meta"] = []
        else:
            header["meta"][changed[damage][0]] = changed[damage][1]
        raw = bytearray(json.dumps(header).encode()) + raw[newline:]
    path.write_bytes(bytes(raw[: len(raw) // 2] if damage == "truncate" else b"" if damage == "empty" else raw))
    rebuilt = compile_cached(backend, spec, vocab).settled()
    assert rebuilt.status == "miss"
    assert any("removed, compiling afresh" in note for note in rebuilt.notes)  # also printed as a notice
    assert compile_cached(backend, spec, vocab).status == "hit"


def test_entries_swapped_between_keys_never_give_a_hit(smol_tokenizer):
    from sgcli.backends.compile_cache import compile_cached
    from sgcli.backends.matching import accepts_bytes

    backend = _Slow(get_backend(_cacheable_backend()))
    vocab = smol_tokenizer.vocab
    dates, digits = _spec("@iso8601"), ConstraintSpec(Kind.REGEX, "[0-9]+", "digits")
    for spec in (dates, digits):
        assert compile_cached(backend, spec, vocab).settled().status == "miss"
    a, b = _entry(backend, dates, vocab), _entry(backend, digits, vocab)
    a_bytes, b_bytes = a.read_bytes(), b.read_bytes()
    a.write_bytes(b_bytes)
    b.write_bytes(a_bytes)
    outcome = compile_cached(backend, digits, vocab)
    assert outcome.status != "hit" and any("belongs to another grammar" in note for note in outcome.notes)
    assert accepts_bytes(outcome.compiled, b"12345").accepted
    assert not accepts_bytes(outcome.compiled, b"2024-02-29").accepted


def test_an_unwritable_cache_folder_turns_the_cache_off_with_one_notice(run_cli, tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")  # nothing can be created below a file, whoever runs the test
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(blocker / "cache"))
    backend = _cacheable_backend()
    result = run_cli("compile", "@iso8601", "@tool_call", "--backend", backend, "--json")
    assert result.exit_code == 0
    assert [r["cache"] for r in _records(result)] == ["off", "off"]
    assert result.stderr.count("is not writable") == 1 and "--no-cache" in result.stderr


def test_concurrent_writers_never_leave_a_mixed_file(tmp_path):
    """Four writer processes of their own (not forks of this test process, whose large heap each
    fork's garbage collector would copy page by page) and a reader racing them."""
    import subprocess
    import sys

    target = tmp_path / "entry"
    payloads = [bytes([65 + i]) * 200_000 for i in range(4)]
    script = (
        "import sys; from pathlib import Path; from sgcli.cache.paths import atomic_write\n"
        "for _ in range(30): atomic_write(Path(sys.argv[1]), bytes([int(sys.argv[2])]) * 200_000)"
    )
    writers = [subprocess.Popen([sys.executable, "-c", script, str(target), str(65 + i)]) for i in range(4)]
    while any(w.poll() is None for w in writers):  # read while they write: always one writer's whole payload
        if target.exists():
            assert target.read_bytes() in payloads
    assert [w.returncode for w in writers] == [0, 0, 0, 0]
    assert target.read_bytes() in payloads
    assert [p.name for p in tmp_path.iterdir()] == ["entry"]  # no temporary file left behind


def test_cache_key_depends_on_tokenizer_and_grammar(smol_tokenizer):
    from sgcli.backends.compile_cache import cache_key, tokenizer_identity
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


def test_cache_key_reads_json_options_as_asdict_did():
    """Keys of entries stored before stay valid: the options enter the key as dataclasses.asdict gave them."""
    import dataclasses

    from sgcli.backends.compile_cache import _spec_fingerprint
    from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind

    for options in (
        JsonOptions(),
        JsonOptions(whitespace="compact", strict_properties=True),
        JsonOptions(indent=2, for_generation=True),
        JsonOptions(whitespace_pattern="[ ]?"),
        JsonOptions(max_whitespace=3),
    ):
        spec = ConstraintSpec(Kind.JSON_SCHEMA, "{}", json_options=options)
        assert _spec_fingerprint(spec)["json_options"] == dataclasses.asdict(options)


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


def test_a_choice_file_lists_one_choice_a_line(run_cli, tmp_path):
    """It became the empty-string grammar (`start: `): the spec was built without its choices."""
    grammar = tmp_path / "c.txt"
    grammar.write_text("a\nb\n")
    result = run_cli("compile", grammar, "--kind", "choice", "--print", "--backend", "llguidance")
    assert result.exit_code == 0, result.output
    assert 'start: "a" | "b"' in result.stdout
    grammar.write_text("a\n\nb\n")
    result = run_cli("compile", grammar, "--kind", "choice", "--backend", "llguidance")
    assert result.exit_code == 2 and "c.txt:2:1: choice 2 is an empty line" in result.output


@pytest.mark.slow  # a fresh process compiling 150 properties with xgrammar, its memory peak measured: 8-13 s
def test_a_150_property_schema_compiles_with_the_cache_on_in_bounded_memory(tmp_path):
    """The issue's case: storing this xgrammar compile reached 23 GB; now it finishes under 2 GB."""
    import subprocess
    import sys
    from pathlib import Path

    props = {f"p{i}": {"type": "string", "minLength": 3, "maxLength": 40} for i in range(150)}
    schema = tmp_path / "wide.json"
    schema.write_text(json.dumps({"type": "object", "properties": props, "required": list(props)}))
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root), OMP_NUM_THREADS="1")
    # A fresh wrapper process runs the command, so its RUSAGE_CHILDREN peak is this command's alone (the
    # command and every fork it waited for), not that of whatever earlier tests ran from this pytest process.
    wrapper = (
        "import resource, subprocess, sys; "
        "r = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=600); "
        "sys.stdout.write(r.stdout); sys.stderr.write(r.stderr); "
        "print('PEAK_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
        "sys.exit(r.returncode)"
    )
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            wrapper,
            sys.executable,
            "-m",
            "sgcli",
            "compile",
            str(schema),
            "-b",
            "xgrammar",
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=660,
    )
    assert result.returncode == 0, result.stderr
    (row,) = _records(result)
    assert row["status"] == "ok" and row["cache"] in ("miss", "not stored")
    peak_kb = int(result.stderr.rsplit("PEAK_KB", 1)[1].split()[0])
    assert peak_kb < 2 * 1024 * 1024, f"peak {peak_kb / 1024:.0f} MB"


@pytest.mark.slow  # ~5-12 s: make test-slow, run by CI
def test_a_compile_given_up_at_its_limit_does_not_abort_the_process_at_exit():
    """xgrammar's compile, left running on its thread past --compile-timeout, was torn down beneath it
    at Python's exit: exit 134 (SIGABRT) after the limit's message, three runs in three (2026-12-06)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    args = ["compile", "@json", "--compile-timeout", "0.001", "--no-cache", "--json", "-b", "xgrammar"]
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-m", "sgcli", *args],
            env=dict(os.environ, PYTHONPATH=str(root)),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2, (proc.returncode, proc.stderr[-500:])
        assert json.loads(proc.stdout.splitlines()[0])["limit"] == "--compile-timeout"


def test_the_cache_docs_name_every_status_and_the_cacheable_backends():
    """docs/grammar-development.md called xgrammar the cacheable backend and listed hit/miss/off/not
    cacheable; outlines-core is cached too, and a compile not worth storing is `not stored`."""
    import re
    from pathlib import Path

    from sgcli.backends import backend_names, get_backend
    from sgcli.backends.compile_cache import HIT, MISS, NOT_CACHEABLE, NOT_STORED, OFF

    doc = (Path(__file__).resolve().parent.parent / "docs" / "grammar-development.md").read_text()
    section = doc[doc.index("### The compiled-grammar cache") : doc.index("## `sgcli bench`")]
    assert set(re.findall(r"^\| `([a-z ]+)` \|", section, re.M)) == {HIT, MISS, NOT_STORED, NOT_CACHEABLE, OFF}
    cacheable = {"xgrammar": "xgrammar", "outlines_core": "outlines-core"}
    for name in backend_names():
        said = re.search(r"`cacheable`.*?: (.*?)\.", " ".join(section.split())).group(1)
        assert get_backend(name).capabilities.cacheable == (name in cacheable and cacheable[name] in said), name


def test_an_invalid_or_unreadable_file_gets_its_rows_and_every_other_file_still_compiles(run_cli, tmp_path):
    from sgcli.records import CompileRow

    good, bad, missing, unknown = (tmp_path / n for n in ("good.json", "bad_type.json", "missing.json", "g.xyz"))
    bad.write_text('{"type": ["string", "intrinsic"]}')
    good.write_text('{"type": "integer"}')
    unknown.write_text("x")
    result = run_cli("compile", bad, missing, unknown, good, "--backend", "llguidance", "--json")
    assert result.exit_code == 2, result.output  # bad input, as one bad file alone is
    rows = {r["path"]: r for r in _records(result)}
    assert list(rows) == [str(bad), str(missing), str(unknown), str(good)]  # in the order given, each its row
    assert rows[str(unknown)]["status"] == "error" and rows[str(unknown)]["kind"] is None
    assert rows[str(good)]["status"] == "ok"
    assert (rows[str(bad)]["status"], rows[str(bad)]["line"], rows[str(bad)]["col"]) == ("error", 1, 21)
    assert "invalid JSON Schema at /type" in rows[str(bad)]["message"]
    assert rows[str(missing)]["status"] == "error" and rows[str(missing)]["kind"] == "json_schema"
    for row in rows.values():
        CompileRow.model_validate(row)
    assert f"{bad}:1:21: invalid JSON Schema at /type/1" in result.stderr  # exit 2's reason, on stderr
    assert str(missing) in result.stderr
    text = run_cli("compile", good, bad, "--backend", "llguidance")
    assert text.exit_code == 2 and f"{bad}:1:21: invalid JSON Schema" in text.stderr
    assert str(good) in text.stdout and "ok" in text.stdout
