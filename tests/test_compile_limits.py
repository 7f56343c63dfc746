"""Compile limits (`sgcli.backends.bounded`): a compile past --compile-timeout / --compile-memory or a
constraint past --max-constraint-bytes is exit 2 naming the flag, and the process goes on."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from sgcli.backends import get_backend
from sgcli.backends.base import Capabilities
from sgcli.backends.bounded import CompileLimitError, compile_bounded
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.errors import UserError
from sgcli.limits import LimitHit, Limits, run_bounded, set_limits


@pytest.fixture(autouse=True)
def _private_cache_and_default_limits(tmp_path, monkeypatch):
    monkeypatch.setenv("SGCLI_CACHE_DIR", str(tmp_path / "cache"))
    yield
    set_limits(Limits())


class _Fake:
    """A backend whose compile does something hostile (it only ever runs in the bounded child: its
    capabilities do not say `compiles_in_process`)."""

    name = "fake"
    capabilities = Capabilities(frozenset({Kind.REGEX}))

    def __init__(self, action):
        self.action = action

    def prepare(self, vocab):
        pass

    def compile(self, spec, vocab):
        return self.action()


def test_run_bounded_returns_the_childs_value_and_stops_a_slow_child():
    assert run_bounded(lambda: {"answer": 6 * 7}, timeout_s=10, memory_mb=0) == {"answer": 42}
    t = time.perf_counter()
    with pytest.raises(LimitHit) as hit:
        run_bounded(lambda: time.sleep(60), timeout_s=0.5, memory_mb=0)
    assert hit.value.kind == "time" and time.perf_counter() - t < 5


def test_a_whole_reply_is_used_without_waiting_for_the_child_to_exit_and_a_cut_one_is_not():
    """The child closes its end of the pipe right after its length-framed reply, so the parent goes on
    while the child's exit tears down what the compile built (10-25 ms after a large one); such children
    are collected at the next fork. A reply cut short (the child died while writing) is never used."""
    import struct

    from sgcli import limits

    big = bytes(range(256)) * 8192  # 2 MB: many reads of the pipe
    assert run_bounded(lambda: big, timeout_s=20, memory_mb=0) == big
    for _ in range(4):
        assert run_bounded(lambda: [1, 2], timeout_s=20, memory_mb=0) == [1, 2]
    deadline = time.monotonic() + 10
    while limits._exiting and time.monotonic() < deadline:  # they exit on their own; the next fork reaps them
        time.sleep(0.05)
        limits._reap_exited()
    assert not limits._exiting  # none left behind as a zombie
    whole = struct.pack("<Q", 3) + b"J{}"
    assert limits._framed(whole) == b"J{}"
    assert limits._framed(whole[:-1]) is None and limits._framed(b"") is None and limits._framed(None) is None


def test_a_started_child_runs_beside_the_caller_and_can_be_cancelled():
    from sgcli.limits import start_bounded

    answer = start_bounded(lambda: os.getpid(), timeout_s=10, memory_mb=0)
    assert answer.result() != os.getpid()  # it ran in another process
    slow = start_bounded(lambda: time.sleep(60), timeout_s=120, memory_mb=0)
    pid = slow._pid
    slow.cancel()
    with pytest.raises(ProcessLookupError):  # killed and reaped: no such process any more
        os.kill(pid, 0)
    slow.cancel()  # a second cancel, or one after result(), does nothing
    answer.cancel()


def test_a_child_collected_after_its_deadline_gives_its_reply_or_has_ended_itself():
    from sgcli.limits import start_bounded

    done = start_bounded(lambda: 42, timeout_s=0.3, memory_mb=0)
    time.sleep(0.8)  # the caller comes for it late (a background cache store collected at exit)
    assert done.result() == 42  # a reply waiting in the pipe is read, not called a time-out
    stuck = start_bounded(lambda: time.sleep(60), timeout_s=0.2, memory_mb=0)
    pid = stuck._pid
    time.sleep(2.5)  # past the deadline and the child's own timer (deadline + 1 s)
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    assert state == "Z"  # it ended without the parent (a zombie until reaped): no orphan left running
    with pytest.raises(LimitHit) as hit:
        stuck.result()
    assert hit.value.kind == "time"


def test_memory_ceiling_stops_an_allocation_and_names_the_flag():
    set_limits(Limits(timeout_s=20, memory_mb=200))
    hog = _Fake(lambda: bytearray(2 << 30))  # 2 GB
    with pytest.raises(CompileLimitError) as exc:
        compile_bounded(hog, ConstraintSpec(Kind.REGEX, "a", "hog.regex"), None)
    assert exc.value.flag == "--compile-memory" and "200 MB" in exc.value.message
    assert "--compile-memory" in exc.value.render()


@pytest.mark.slow  # a fresh sgcli process that loads the tokenizer: 10 s
def test_outlines_core_under_a_low_memory_ceiling_names_the_flag_not_a_library_bug(tmp_path):
    """outlines-core aborts on a failed allocation (SIGABRT) after printing it inside the compile's fd 2
    capture: a capture of the child's own lost that line and the limit read as a crash of the library.
    Run as a user runs it, in a fresh process: in this one what the library already built changes what
    the child allocates (nothing at all once it has compiled the same schema)."""
    import subprocess
    import sys

    env = dict(os.environ, SGCLI_CACHE_DIR=str(tmp_path / "cache"))
    args = ["compile", "examples/capital.json", "--compile-memory", "20", "-b", "outlines_core", "--no-cache"]
    done = subprocess.run([sys.executable, "-m", "sgcli", *args], capture_output=True, text=True, env=env, timeout=120)
    said = done.stdout + done.stderr  # compile's table row carries the error
    assert done.returncode == 2, said
    assert "--compile-memory" in said and "20 MB" in said, said
    assert "crashed the grammar library" not in said


def test_a_native_crash_is_a_user_error_and_a_python_bug_stays_a_bug():
    set_limits(Limits(timeout_s=20, memory_mb=0))
    with pytest.raises(UserError, match="crashed the grammar library.*SIGABRT"):
        compile_bounded(_Fake(os.abort), ConstraintSpec(Kind.REGEX, "a"), None)

    def bug():
        raise KeyError("a bug in an adapter")

    with pytest.raises(KeyError):  # re-raised by the parent's own compile, traceback and all: exit 3
        compile_bounded(_Fake(bug), ConstraintSpec(Kind.REGEX, "a"), None)


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        (Kind.REGEX, "a{1,1000000}"),
        (Kind.JSON_SCHEMA, json.dumps({"type": "string", "minLength": 1000000})),
        (Kind.JSON_SCHEMA, json.dumps({"type": "array", "items": {"type": "integer"}, "minItems": 100000})),
    ],
)
def test_the_issues_runaway_outlines_core_compiles_end_within_the_timeout(smol_tokenizer, kind, text):
    set_limits(Limits(timeout_s=2, memory_mb=4096))
    backend = get_backend("outlines_core")  # installed by the test set-up ([all]); a missing one fails here
    assert backend.unavailable_reason() is None, backend.unavailable_reason()
    t = time.perf_counter()
    with pytest.raises(CompileLimitError) as exc:
        compile_bounded(backend, ConstraintSpec(kind, text, "hostile"), smol_tokenizer.vocab)
    assert exc.value.flag == "--compile-timeout"
    assert time.perf_counter() - t < 2 + 10  # the timeout, plus forking and a busy machine's slack
    compiled = compile_bounded(backend, ConstraintSpec(Kind.REGEX, "(yes|no)"), smol_tokenizer.vocab)
    assert compiled.backend == "outlines_core"  # the process, and the backend in it, still work


def test_compile_command_exits_2_naming_the_timeout_flag(run_cli, tmp_path):
    regex = tmp_path / "huge.regex"
    regex.write_text("a{1,1000000}\n")
    result = run_cli("compile", regex, "--backend", "outlines_core", "--compile-timeout", "1", "--json")
    assert result.exit_code == 2
    (row,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert row["status"] == "error" and row["limit"] == "--compile-timeout"
    assert "1 s time limit" in row["message"]


def test_size_limit_is_checked_before_anything_parses_the_schema(run_cli, tmp_path):
    big = tmp_path / "big.json"
    props = {f"p{i}": {"type": "string", "description": "x" * 100} for i in range(12000)}  # ~1.5 MB
    big.write_text(json.dumps({"type": "object", "properties": props}))
    t = time.perf_counter()
    result = run_cli("lint", big)
    assert result.exit_code == 2 and "--max-constraint-bytes" in result.output
    assert time.perf_counter() - t < 10
    compiled = run_cli("compile", big, "--backend", "xgrammar", "--max-constraint-bytes", "1000")
    assert compiled.exit_code == 2 and "over the limit of 1,000 bytes" in compiled.output


def test_every_compiling_command_takes_the_limit_and_cache_flags():
    from typer.main import get_command

    from sgcli.cli.app import app

    group = get_command(app)
    for name in ("generate", "compile", "masks", "test", "lint", "compare-backends", "convert"):
        flags = {opt for p in group.commands[name].params for opt in p.opts}
        assert {"--compile-timeout", "--compile-memory", "--max-constraint-bytes", "--no-cache"} <= flags, name


def test_negative_limits_are_usage_errors(run_cli):
    result = run_cli("compile", "@iso8601", "--compile-timeout", "-1")
    assert result.exit_code == 2 and "must not be negative" in result.output


def test_grammar_test_command_exits_2_on_a_limit(run_cli, tmp_path):
    (tmp_path / "huge.regex").write_text("a{1,1000000}\n")
    suite = tmp_path / "huge.test.yaml"
    suite.write_text("grammar: huge.regex\ncases:\n  - {input: 'aaa', accept: true}\n")
    result = run_cli("test", suite, "--backend", "outlines_core", "--compile-timeout", "1")
    assert result.exit_code == 2 and "--compile-timeout" in result.output


def _chain(n: int) -> str:
    defs = {f"a{i}": ({"$ref": f"#/$defs/a{i + 1}"} if i < n - 1 else {"type": "integer"}) for i in range(n)}
    return json.dumps({"$ref": "#/$defs/a0", "$defs": defs}, separators=(",", ":"))


def test_a_chain_that_overflows_an_8_mib_stack_compiles_on_the_compile_threads_stack(smol_tokenizer):
    """A chain of 4,000 `$ref`s (130 KB) segfaulted llguidance on the main thread's 8 MiB stack (measured
    2026-12-04; 2,000 compile). The compile thread's stack is sized for the constraint: it compiles."""
    from sgcli.backends import get_backend
    from sgcli.backends.matching import accepts_bytes

    set_limits(Limits(timeout_s=60, memory_mb=4096))
    compiled = compile_bounded(
        get_backend("llguidance"), ConstraintSpec(Kind.JSON_SCHEMA, _chain(4000), "chain.json"), smol_tokenizer.vocab
    )
    assert accepts_bytes(compiled, b"42").accepted and not accepts_bytes(compiled, b'"x"').accepted


def test_a_schema_that_crashes_llguidance_is_an_error_naming_it(smol_tokenizer):
    """Past what the compile thread's stack holds, the compile runs in a forked child: a chain of
    12,000 `$ref`s crashes llguidance there, and the crash is exit 2 naming the backend."""
    from sgcli.backends import get_backend
    from sgcli.backends.bounded import STACK_PER_BYTE, WORKER_STACK

    text = _chain(12000)
    assert len(text) * STACK_PER_BYTE > WORKER_STACK
    set_limits(Limits(timeout_s=60, memory_mb=4096))
    with pytest.raises(UserError, match="crashed the grammar library"):
        compile_bounded(
            get_backend("llguidance"), ConstraintSpec(Kind.JSON_SCHEMA, text, "chain.json"), smol_tokenizer.vocab
        )


# -- several inputs: a limit ends one, the rest go on --------------------------------------------
@pytest.fixture
def slow_llguidance(monkeypatch):
    """llguidance's compile of any file named slow.json sleeps past the limit; the main-thread
    watchdog's handler only records (the `sgcli` process's ends the run), and it answers at 0.1 s."""
    from sgcli.backends import bounded, llguidance_backend

    real = llguidance_backend.LLGuidanceBackend.compile

    def compile(self, spec, vocab):
        if (spec.origin or "").endswith("slow.json"):
            time.sleep(1.2)
        return real(self, spec, vocab)

    ended = []
    monkeypatch.setattr(llguidance_backend.LLGuidanceBackend, "compile", compile)
    monkeypatch.setattr(bounded, "MAIN_THREAD_MIN_S", 0.1)
    monkeypatch.setattr(bounded, "_overrun", ended.append)
    return ended


def test_one_input_at_its_limit_ends_the_run_from_the_main_thread(slow_llguidance, smol_tokenizer, tmp_path):
    (tmp_path / "slow.json").write_text('{"type": "integer"}')
    spec = ConstraintSpec(Kind.JSON_SCHEMA, '{"type": "integer"}', str(tmp_path / "slow.json"))
    set_limits(Limits(timeout_s=0.4))
    compile_bounded(get_backend("llguidance"), spec, smol_tokenizer.vocab)
    assert [e.flag for e in slow_llguidance] == ["--compile-timeout"]  # the CLI's handler ends the process here


def test_with_several_inputs_a_limit_ends_that_input_only(slow_llguidance, smol_tokenizer, tmp_path):
    from sgcli.backends.bounded import each_on_its_own

    spec = ConstraintSpec(Kind.JSON_SCHEMA, '{"type": "integer"}', str(tmp_path / "slow.json"))
    other = ConstraintSpec(Kind.JSON_SCHEMA, '{"type": "string"}', str(tmp_path / "other.json"))
    set_limits(Limits(timeout_s=0.4))
    with each_on_its_own():
        with pytest.raises(CompileLimitError, match="0.4 s"):
            compile_bounded(get_backend("llguidance"), spec, smol_tokenizer.vocab)
        assert compile_bounded(get_backend("llguidance"), other, smol_tokenizer.vocab).backend == "llguidance"
    assert slow_llguidance == []


@pytest.mark.parametrize("command", ["lint", "compile", "test"])
def test_lint_compile_and_test_go_on_past_a_file_at_its_limit(slow_llguidance, run_cli, tmp_path, command):
    for name in ("slow", "fine"):
        # a string without a length bound: lint has a finding (J006) to report for the file that ran
        (tmp_path / f"{name}.json").write_text('{"type": "object", "properties": {"a": {"type": "string"}}}')
        case = {"grammar": str(tmp_path / f"{name}.json"), "cases": [{"input": '{"a": "x"}', "accept": True}]}
        (tmp_path / f"{name}.test.json").write_text(json.dumps(case))
    files = [tmp_path / f"{n}.{'test.json' if command == 'test' else 'json'}" for n in ("slow", "fine")]
    backend = [] if command == "lint" else ["--backend", "llguidance"]
    result = run_cli(command, *files, *backend, "--compile-timeout", "0.4", "--output-format", "json")
    assert slow_llguidance == [] and result.exit_code == 2, result.output
    assert "--compile-timeout" in result.output and f"{tmp_path / 'fine'}." in result.stdout, result.output


@pytest.mark.slow  # ~5-12 s: make test-slow, run by CI
def test_the_limits_message_reaches_the_terminal_while_a_compile_captures_its_stderr(tmp_path):
    """The backends capture fd 2 while their library compiles (its C++/Rust warnings): the watchdog that
    ends a compile past --compile-timeout printed its message into that capture, and the run ended
    with exit 2 and not a word."""
    import subprocess
    import sys

    script = tmp_path / "slow.py"
    script.write_text(
        "import sys, time\n"
        "import sgcli.backends.bounded as bounded\n"
        "import sgcli.backends.xgrammar_backend as xb\n"
        "bounded.MAIN_THREAD_MIN_S = 0.5\n"  # the main-thread watchdog at a short limit
        "xb.XGrammarBackend._compile = lambda self, *a, **k: time.sleep(60)\n"
        "from sgcli.cli.app import main\n"
        "sys.argv = ['sgcli', 'compile', '--regex', 'a', '-b', 'xgrammar', '--compile-timeout', '1', '--no-cache']\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180)
    assert done.returncode == 2
    assert "took longer than the 1 s time limit" in done.stderr, done.stderr


def test_a_compile_given_up_on_the_compile_thread_gives_fd_2_back(monkeypatch, smol_tokenizer):
    """xgrammar's compile captures fd 2 (its C++ warnings); given up at its limit on the compile thread, it
    still held the capture, so `generate`'s message about the limit went into it: exit 2 and not a word."""
    import os

    from sgcli.backends import xgrammar_backend as xb
    from sgcli.backends.bounded import each_on_its_own

    monkeypatch.setattr(xb.XGrammarBackend, "_compile", lambda self, *a, **k: time.sleep(3))
    before = os.fstat(2).st_ino
    set_limits(Limits(timeout_s=0.3))
    with each_on_its_own(), pytest.raises(CompileLimitError, match="0.3 s"):
        compile_bounded(get_backend("xgrammar"), ConstraintSpec(Kind.REGEX, "a", "--regex"), smol_tokenizer.vocab)
    assert os.fstat(2).st_ino == before


# -- the first mask: part of the bounded compile --------------------------------------------------
STUCK_S = 30  # far past the limits below: a command that waits for it has hung


@pytest.fixture
def stuck_first_mask(monkeypatch):
    """llguidance's first mask of a grammar in a file named stuck.lark sleeps, as its mask of
    `start: /a+/ "a"` never ended (memory growing to GBs); its masks of other grammars are counted.
    Returns {"seconds": how long the stuck mask sleeps, "filled": masks of the others}."""
    from sgcli.backends import llguidance_backend

    real = llguidance_backend.LLGuidanceCompiled.matcher
    state = {"seconds": STUCK_S, "filled": 0}

    def matcher(self):
        m, stuck = real(self), (self.spec.origin or "").endswith("stuck.lark")

        def counted(fn):
            def call(*args):
                if stuck:
                    time.sleep(state["seconds"])
                state["filled"] += not stuck
                return fn(*args)

            return call

        for name in ("fill_mask", "mask_bytes"):
            if hasattr(m, name):
                setattr(m, name, counted(getattr(m, name)))
        return m

    monkeypatch.setattr(llguidance_backend.LLGuidanceCompiled, "matcher", matcher)
    return state


@pytest.mark.parametrize("command", ["masks", "test", "lint"])
def test_a_first_mask_that_never_ends_is_a_compile_past_its_limit(
    stuck_first_mask, run_cli, tmp_path, command, smol_tokenizer
):
    """`masks`, `test` and `convert` hung at llguidance's first mask of `start: /a+/ "a"` (SIGTERM could not
    end them) and lint said "All checks passed": the mask is filled inside the bounded compile now.
    (`smol_tokenizer`: loaded before the clock starts, as the commands load it.)"""
    grammar = tmp_path / "stuck.lark"
    grammar.write_text('start: "a"\n')
    (tmp_path / "stuck.test.yaml").write_text("grammar: stuck.lark\ncases:\n  - {input: a, accept: true}\n")
    args = {
        "masks": ["masks", grammar, "-b", "llguidance", "--text", "a"],
        "test": ["test", tmp_path / "stuck.test.yaml", "-b", "llguidance"],
        "lint": ["lint", grammar],
    }[command]
    started = time.perf_counter()
    result = run_cli(*args, "--compile-timeout", "2")
    assert time.perf_counter() - started < STUCK_S, "it waited for the first mask"
    assert result.exit_code == 2, result.output
    assert "stuck.lark with llguidance (its first token mask" in result.output
    assert "took longer than the 2 s time limit" in result.output and "--compile-timeout" in result.output


def test_on_the_main_thread_the_watchdog_ends_a_first_mask_past_the_limit(stuck_first_mask, smol_tokenizer):
    """The `sgcli` process compiles one input on its main thread, under the watchdog that ends the run."""
    from sgcli.backends import bounded

    ended = []
    stuck_first_mask["seconds"] = 1.2
    spec = ConstraintSpec(Kind.LARK, 'start: "a"\n', "stuck.lark")
    set_limits(Limits(timeout_s=0.4))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bounded, "MAIN_THREAD_MIN_S", 0.1)
        mp.setattr(bounded, "_overrun", ended.append)
        compile_bounded(get_backend("llguidance"), spec, smol_tokenizer.vocab)
    assert [e.flag for e in ended] == ["--compile-timeout"]  # the CLI's handler ends the process here
    assert "its first token mask" in ended[0].message


def test_the_first_mask_is_filled_once_in_the_compile_and_read_by_the_checks(stuck_first_mask, smol_tokenizer):
    """The checks on the first step (lint, generate's preflight, convert) read the mask the bounded compile
    filled: it is not filled again."""
    from sgcli.backends.matching import accepts_nothing, first_mask_error

    spec = ConstraintSpec(Kind.LARK, 'start: "yes" | "no"\n', "fine.lark")
    compiled = compile_bounded(get_backend("llguidance"), spec, smol_tokenizer.vocab)
    assert stuck_first_mask["filled"] == 1
    assert first_mask_error(compiled) is None and not accepts_nothing(compiled)
    assert stuck_first_mask["filled"] == 1


@pytest.mark.slow  # a fresh sgcli process, the real mask: 10-20 s
def test_llguidances_first_mask_that_never_ends_is_exit_2_naming_the_limit(tmp_path):
    """The real grammar: llguidance 1.9's first mask of `start: /a+/ "a"` never returns, its memory growing."""
    import resource
    import subprocess
    import sys

    (tmp_path / "hang.lark").write_text('start: /a+/ "a"\n')

    def ceiling():  # the hang grows to GBs: this run cannot take the machine down with it
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    done = subprocess.run(
        [sys.executable, "-m", "sgcli", "convert", "hang.lark", "--to", "gbnf", "--compile-timeout", "3"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, preexec_fn=ceiling,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "its first token mask" in done.stderr and "--compile-timeout" in done.stderr
