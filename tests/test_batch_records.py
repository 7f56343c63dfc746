"""Batch records: one key set for every record, failures as error records, --resume answers every id once."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import output_locked_by_another_process, patch_everywhere

from sgcli.batch.records import RecordWriter
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.errors import UserError

ROOT = Path(__file__).resolve().parent.parent


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_resume_cuts_a_partial_last_line(tmp_path):
    out = tmp_path / "o.jsonl"
    before = '{"id": 1, "valid": true}\n{"id": 2, "valid": true}\n{"id": 3, "out'
    out.write_text(before)
    writer = RecordWriter(out, resume=True)
    assert out.read_text() == before  # read, not touched: the run may not start
    assert [writer.skip(i) for i in (1, 2, 3, 3)] == [True, True, False, False]  # each line of id 3 runs
    writer.open()  # the run starts: the partial line goes
    writer.close()
    assert out.read_text() == '{"id": 1, "valid": true}\n{"id": 2, "valid": true}\n'


def test_resume_keeps_a_complete_last_line_that_lacks_its_newline(tmp_path):
    out = tmp_path / "o.jsonl"
    out.write_text('{"id": "a"}\n{"id": "b"}')
    writer = RecordWriter(out, resume=True)
    writer.write({"id": "c"})
    writer.close()
    assert [r["id"] for r in _lines(out)] == ["a", "b", "c"]


def test_resume_answers_error_records_again(tmp_path):
    out = tmp_path / "o.jsonl"
    out.write_text('{"id": 1, "finish_reason": "stop"}\n{"id": 2, "finish_reason": "error"}\n{"id": 3}\n{"id": 4, "x')
    writer = RecordWriter(out, resume=True)
    assert [writer.skip(i) for i in (1, 2, 3, 4)] == [True, False, True, False]
    writer.write({"id": 2, "finish_reason": "stop"})
    writer.close()
    # the failed line and the partial one are dropped, the rest kept in order, the new record appended
    assert _lines(out) == [{"id": 1, "finish_reason": "stop"}, {"id": 3}, {"id": 2, "finish_reason": "stop"}]


def test_resume_drops_a_last_error_record_that_lacks_its_newline(tmp_path):
    out = tmp_path / "o.jsonl"
    out.write_text('{"id": 1}\n{"id": 2, "finish_reason": "error"}')
    writer = RecordWriter(out, resume=True)
    writer.open()
    writer.close()
    assert out.read_text() == '{"id": 1}\n'


def test_resume_refuses_a_corrupt_middle_line(tmp_path):
    out = tmp_path / "o.jsonl"
    out.write_text('{"id": 1}\nnot json\n{"id": 3}\n')
    with pytest.raises(UserError) as exc:
        RecordWriter(out, resume=True)
    assert str(exc.value.location) == f"{out}:2:1" and "--force" in exc.value.hint


@pytest.mark.parametrize("last", [b"\x00\xff" * 100, b"some notes without a newline", b'{"id": 2}\n\x89PNG'])
def test_resume_cuts_only_what_a_killed_sgcli_could_have_left(tmp_path, last):
    """A last line without a newline was cut whatever it held: `--resume` onto a binary file emptied it
    (hostile_inputs.py: "--resume over a binary file", exit 0). sgcli writes JSON objects, so only an
    unfinished `{"...` is its own partial line; anything else is exit 2 at that line, the file kept."""
    out = tmp_path / "o.jsonl"
    out.write_bytes(last)
    with pytest.raises(UserError) as exc:
        RecordWriter(out, resume=True)
    assert "is not a JSON record" in exc.value.message and exc.value.location.path == str(out)
    assert out.read_bytes() == last


def test_a_full_disk_under_the_lock_file_is_exit_2(tmp_path, monkeypatch):
    """The lock file is created (an inode) but its pid cannot be written: ENOSPC was exit 3."""
    import sgcli.batch.records as records

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(records.os, "write", full)
    out = tmp_path / "o.jsonl"
    with pytest.raises(UserError, match="cannot write its lock file .*No space left on device"):
        RecordWriter(out)
    monkeypatch.undo()
    assert not out.exists() and not Path(str(out) + ".lock").exists()
    RecordWriter(out).close()  # nothing left held


def test_resume_refuses_records_of_another_format(tmp_path):
    from sgcli import RECORD_SCHEMA_VERSION

    out = tmp_path / "o.jsonl"
    out.write_text(
        json.dumps({"schema_version": RECORD_SCHEMA_VERSION, "id": 1}) + '\n{"schema_version": "1", "id": 2}\n'
    )
    with pytest.raises(UserError) as exc:
        RecordWriter(out, resume=True)
    assert str(exc.value.location) == f"{out}:2:1"
    assert exc.value.message.startswith("--resume: this record is format '1'")
    assert len(_lines(out)) == 2  # nothing dropped or appended


def test_an_existing_output_needs_resume_or_force(tmp_path):
    out = tmp_path / "o.jsonl"
    out.write_text('{"id": 1}\n')
    with pytest.raises(UserError) as exc:
        RecordWriter(out)
    assert "already holds 10 bytes" in exc.value.message
    assert "--resume" in exc.value.hint and "--force" in exc.value.hint
    assert out.read_text() == '{"id": 1}\n'
    (tmp_path / "empty.jsonl").write_text("")
    RecordWriter(tmp_path / "empty.jsonl").close()  # an empty file holds nothing to lose


def test_force_replaces_the_file_only_when_the_run_starts(tmp_path):
    out = tmp_path / "o.jsonl"
    out.write_text('{"id": 1}\n')
    writer = RecordWriter(out, force=True)
    assert out.read_text() == '{"id": 1}\n'  # untouched until the run starts: a failed load loses nothing
    assert not writer.skip(1) and not writer.skip(1)
    writer.write({"id": 2})
    writer.close()
    assert _lines(out) == [{"id": 2}]


def test_a_writer_never_opened_leaves_the_file_as_it_was(tmp_path):
    out, new = tmp_path / "o.jsonl", tmp_path / "new.jsonl"
    out.write_text('{"id": 1}\n{"id": 2, "finish_reason": "error"}\n{"id": 3, "par')
    before = out.read_bytes()
    for path, flags in ((out, {"resume": True}), (out, {"force": True}), (new, {})):
        RecordWriter(path, **flags).close()
    assert out.read_bytes() == before and not new.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.jsonl"]  # no lock file left behind


def test_resume_with_force_is_refused(tmp_path):
    with pytest.raises(UserError, match="contradict"):
        RecordWriter(tmp_path / "o.jsonl", resume=True, force=True)
    with pytest.raises(UserError, match="--force needs --output"):
        RecordWriter(None, force=True)


def test_a_second_writer_on_the_same_output_is_refused_naming_the_first(tmp_path):
    out = tmp_path / "o.jsonl"
    first = RecordWriter(out)
    with pytest.raises(UserError) as exc:
        RecordWriter(out, force=True)
    assert f"pid {os.getpid()}" in exc.value.message and "another sgcli process" in exc.value.message
    link = tmp_path / "link.jsonl"
    link.symlink_to(out)
    with pytest.raises(UserError, match=f"pid {os.getpid()}"):  # another name for the same file
        RecordWriter(link, resume=True)
    first.write({"id": 1})
    first.close()
    second = RecordWriter(out, resume=True)  # released: the next run may go on
    assert second.skip(1)
    second.close()


def test_the_lock_holds_against_another_process(tmp_path):
    """Two processes: the second exits 2 naming the first's pid; after the first ends (even killed),
    the output is free again."""
    out = tmp_path / "o.jsonl"
    with output_locked_by_another_process(out) as holder:
        with pytest.raises(UserError) as exc:
            RecordWriter(out)
        assert f"pid {holder.pid}" in exc.value.message
    RecordWriter(out).close()  # the kernel dropped the dead process's lock


def test_a_second_writer_through_a_hard_link_is_refused(tmp_path):
    """The lock file is named after the output's path; a hard link is another path to the same file,
    and two writers mixed and tore records in it (a tour). The output itself is locked too."""
    out, alias = tmp_path / "o.jsonl", tmp_path / "alias.jsonl"
    out.write_text("")
    os.link(out, alias)
    with output_locked_by_another_process(out):
        with pytest.raises(UserError, match="through another name: a hard link or a mount"):
            RecordWriter(alias, force=True)
        assert not Path(str(alias) + ".lock").exists()  # its own lock file is not left behind
    RecordWriter(alias, force=True).close()


def test_what_stands_at_the_lock_path_is_never_overwritten_or_removed(tmp_path):
    """A symbolic link at `<output>.lock` was followed (its target overwritten with a pid) and a user's
    own file of that name deleted: both are left alone, exit 2 naming the path."""
    out = tmp_path / "o.jsonl"
    lock = Path(str(out) + ".lock")
    target = tmp_path / "important.txt"
    target.write_text("important user text\n")
    lock.symlink_to(target)
    with pytest.raises(UserError, match="is a symbolic link, which sgcli does not follow"):
        RecordWriter(out)
    assert lock.is_symlink() and target.read_text() == "important user text\n"
    lock.unlink()
    lock.write_text("my notes\n")
    with pytest.raises(UserError, match="is not sgcli's lock file"):
        RecordWriter(out)
    assert lock.read_text() == "my notes\n" and not out.exists()
    lock.write_text("12345\n")  # a lock a killed run left: taken over, and removed at the end
    RecordWriter(out).close()
    assert not lock.exists()


def test_a_write_failure_later_is_a_user_error(tmp_path, monkeypatch):
    writer = RecordWriter(tmp_path / "o.jsonl")
    writer.write({"id": 1})

    def full(text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(writer.stream, "write", full)
    with pytest.raises(UserError, match="No space left on device"):
        writer.write({"id": 2})


@pytest.fixture
def session(tiny_lm, smol_tokenizer):
    from sgcli.backends import check_supports
    from sgcli.engine.sampling import SamplingParams
    from sgcli.engine.session import PromptOptions, Session

    spec = ConstraintSpec(Kind.CHOICE, "yes\nno", "--choice", choices=("yes", "no"))
    compiled = check_supports("llguidance", spec).compile(spec, smol_tokenizer.vocab.padded(tiny_lm.logits_width))
    return Session(tiny_lm, smol_tokenizer, compiled, SamplingParams(1.0, seed=3), 8, (), PromptOptions(raw=True))


def _batch(session, lines: list[str], out: Path, *, resume: bool) -> bool:
    """The batch through the application layer's loop on the local runner, said on the terminal's stderr;
    whether no record is invalid or failed."""
    from sgcli.app.generate import run_batch
    from sgcli.app.local import LocalRunner
    from sgcli.cli.report import Terminal
    from sgcli.errors import EXIT_OK

    writer, reporter = RecordWriter(out, resume=resume), Terminal()
    try:
        return (
            run_batch(LocalRunner(session, reporter), ("\n".join(lines).encode(), "p.jsonl"), writer, reporter)
            == EXIT_OK
        )
    finally:
        writer.close()


def _layout(record: dict) -> tuple:
    return list(record), list(record["usage"]), list(record["timings"])


def test_error_records_have_the_normal_key_set(session, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(session.lm.model.config, "max_position_embeddings", 40)
    lines = [
        '{"id": "ok", "prompt": "Answer:"}',
        "not json",
        '{"id": "long", "prompt": "' + "word " * 200 + '"}',
        '{"id": "after", "prompt": "Answer:"}',
    ]
    out = tmp_path / "o.jsonl"
    assert _batch(session, lines, out, resume=False) is False
    records = {r["id"]: r for r in _lines(out)}
    assert list(records) == ["ok", "line-2", "long", "after"]
    for record in records.values():  # the same keys, in the same order, down to the timings
        assert _layout(record) == _layout(records["ok"]), record
        # where and how the model ran, and the template (--raw: none; null for a line that was no request)
        template = None if record["id"] == "line-2" else "none"
        assert (record["device"], record["dtype"], record["chat_template"]) == ("cpu", "float32", template), record
    assert records["ok"]["valid"] and records["after"]["valid"]  # the batch went on past both failures
    assert records["line-2"]["finish_reason"] == "error" and "p.jsonl:2:1" in records["line-2"]["errors"][0]
    long = records["long"]
    for failed in (records["line-2"], long):  # nothing ran: no verdict, and the record says why
        assert failed["valid"] is None and failed["unchecked"] and failed["errors"], failed
    assert long["output"] is None and "longer than the model's context of 40" in (long["errors"][0])
    # one line, at its --input line, as a bad line's (it held a literal "\n  hint: ..." and no place)
    assert long["errors"][0].startswith("p.jsonl:3: ") and "\n" not in long["errors"][0], long["errors"]
    assert long["backend"] == "llguidance" and set(long["usage"]) == set(records["ok"]["usage"])
    assert all(v is None for v in long["usage"].values()) and all(v is None for v in long["timings"].values())
    from sgcli.records import GenerationRecord

    for record in records.values():
        GenerationRecord.model_validate(record)  # the documented model, extra keys forbidden
    stderr = capsys.readouterr().err  # the summary lists each failure at its input line
    assert "4 records: 2 valid, 0 invalid, 2 errors" in stderr, stderr
    assert "✗ p.jsonl:2:1: invalid JSON" in stderr and "✗ p.jsonl:3: " in stderr, stderr


def test_a_model_that_fails_to_load_leaves_the_output_as_it_was(run_cli, tmp_path, monkeypatch):
    """The output is opened only once the model loaded: --force loses nothing when the load fails."""
    import sgcli.engine.loader

    def fail(*args, **kwargs):
        raise UserError("the weights are missing")

    monkeypatch.setattr(sgcli.engine.loader, "load_model", fail)
    out = tmp_path / "o.jsonl"
    out.write_text('{"id": 1, "finish_reason": "stop"}\n')
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": 1, "prompt": "x"}\n{"id": 2, "prompt": "y"}\n')
    for flag in ("--force", "--resume"):
        result = run_cli("generate", "-b", "llguidance", "--regex", "a", "--input", prompts, "-o", out, flag)
        assert result.exit_code == 2 and "the weights are missing" in result.stderr, result.stderr
        assert out.read_text() == '{"id": 1, "finish_reason": "stop"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.jsonl", "p.jsonl"]  # the lock went with the run


def test_a_long_prompt_gets_fewer_tokens_with_a_warning(session, monkeypatch):
    from sgcli.engine.session import Done, Request

    n_prompt = len(session.render(Request(1, "Answer:"))[1])
    monkeypatch.setattr(session.lm.model.config, "max_position_embeddings", n_prompt + 3)
    monkeypatch.setattr(session, "max_tokens", 50)
    record = next(e.record for e in session.stream(Request(1, "Answer:")) if isinstance(e, Done))
    assert record["usage"]["completion_tokens"] <= 3
    assert any("--max-tokens 50 cut to 3" in w for w in record["warnings"]), record["warnings"]


def test_a_validation_that_raises_is_an_invalid_record_not_a_crash(session, monkeypatch):
    import sgcli.engine.session as session_module
    from sgcli.engine.session import Done, Request

    def broken(*args, **kwargs):
        raise RuntimeError("remote reference")

    patch_everywhere(monkeypatch, session_module, "validate", broken)
    record = next(e.record for e in session.stream(Request(1, "Answer:")) if isinstance(e, Done))
    assert record["valid"] is False and record["output"] in ("yes", "no")
    assert "could not be validated: RuntimeError: remote reference" in record["errors"][0]


def test_resume_answers_every_line_exactly_once(session, tmp_path):
    """As an uninterrupted run does: the second line of id 2 gets its own record (it was dropped, exit 0)."""
    lines = [json.dumps({"id": i, "prompt": "Answer:"}) for i in range(6)] + ['{"id": 2, "prompt": "again"}']
    out = tmp_path / "o.jsonl"
    _batch(session, lines[:3], out, resume=False)
    with out.open("a") as f:
        f.write('{"id": 3, "prompt": "Ans')  # a process killed mid-line
    _batch(session, lines, out, resume=True)
    ids = [r["id"] for r in _lines(out)]
    assert sorted(ids) == [0, 1, 2, 2, 3, 4, 5], ids
    assert out.read_text().endswith("\n")


@pytest.mark.model
def test_sigterm_then_resume_with_the_real_model(tmp_path):
    """SIGTERM leaves complete lines only (exit 143, as shells report SIGTERM); a rerun with --resume answers
    the rest exactly once."""
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"id": i, "prompt": f"Say a number {i}"}) + "\n" for i in range(40)))
    out = tmp_path / "o.jsonl"
    cmd = [sys.executable, "-m", "sgcli", "generate", "--regex", "[0-9]{1,3}", "--input", prompts, "-o", out]
    cmd += ["--threads", "1", "--batch-size", "1"]  # one request at a time: slow enough to be interrupted
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([str(c) for c in cmd], env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None and len(_safe_lines(out)) < 2:
        time.sleep(0.2)
    assert proc.poll() is None, proc.stderr.read()
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143 and "Traceback" not in stderr, stderr
    text = out.read_text()
    assert text.endswith("\n") and 2 <= len(_lines(out)) < 40
    rerun = subprocess.run([str(c) for c in cmd + ["--resume"]], env=env, capture_output=True, text=True)
    assert rerun.returncode in (0, 1), rerun.stderr
    assert sorted(r["id"] for r in _lines(out)) == list(range(40))
    assert "already answered" in rerun.stderr


def _safe_lines(path: Path) -> list[str]:
    try:
        return [line for line in path.read_text().split("\n")[:-1] if line]
    except FileNotFoundError:
        return []


@pytest.mark.model
def test_a_prompt_longer_than_the_context_is_exit_2_with_the_real_model(run_cli):
    """SmolLM2's context is 8192 tokens: a 9000-word prompt is refused before decoding, not run for minutes."""
    result = run_cli("generate", "-b", "none", "--raw", "-n", "4", "hello " * 9000)
    assert result.exit_code == 2, result.output
    assert "longer than the model's context of 8192 tokens" in result.output and "shorten the prompt" in result.output


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_the_command_line_imports_is_128_plus_it_without_a_traceback(sig):
    """Ctrl-C in the first half second (typer, rich and the backends still importing) printed a
    KeyboardInterrupt traceback, and SIGTERM there ended the process with 143 and no word (2026-12-06).
    The launcher's handler is in place before the import it guards: the signal is sent once Python runs it."""
    code = (
        "import os, signal, sys; sys.argv = ['sgcli', 'lint', '--help']; "
        "signal.signal(signal.SIGINT, signal.default_int_handler); "
        "import sgcli.cli.launch as launch; "
        "real = launch.signal.signal; "
        "launch.signal.signal = lambda s, h: (real(s, h), os.kill(os.getpid(), " + str(int(sig)) + "))[0]; "
        "launch.main()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 128 + sig and "Traceback" not in proc.stderr and "interrupted" in proc.stderr, proc.stderr


def test_resume_answers_every_line_of_a_repeated_id_once(tmp_path):
    """Lines that share an id: the output's k records of it are its first k lines, so a resumed run answers
    the rest. Only the first line of each id was answered, and the others dropped with exit 0 (2026-12-06)."""
    out = tmp_path / "o.jsonl"
    out.write_text('{"id": "a", "output": "x"}\n{"id": "b", "output": "y"}\n')
    writer = RecordWriter(out, resume=True)
    assert [writer.skip(i) for i in ("a", "b", "a", "a")] == [True, True, False, False]
    writer.close()


def test_resume_writes_a_bad_lines_error_record_again_beside_a_users_line_id(session, tmp_path):
    """A malformed line's error record (id `line-1`) is dropped on resume, and a user's line whose id is
    "line-1" used up its place: the error record was lost (2026-12-06)."""
    lines = ['{"id": "x", "prompt": "p"', '{"id": "line-1", "prompt": "user id"}']
    out = tmp_path / "o.jsonl"
    _batch(session, lines, out, resume=False)
    first = [(r["id"], r["finish_reason"]) for r in _lines(out)]
    assert sorted(first) == [("line-1", "error"), ("line-1", "stop")]
    _batch(session, lines, out, resume=True)
    assert sorted((r["id"], r["finish_reason"]) for r in _lines(out)) == sorted(first)


def test_an_input_line_over_the_limit_gets_an_error_record_and_the_batch_goes_on(session, tmp_path):
    """One line past --max-prompt-bytes was exit 2 for the whole batch: the other lines went unanswered."""
    from sgcli.batch.requests import read_input

    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": 1, "prompt": "a"}\n{"id": 2, "prompt": "' + "x" * 100 + '"}\n{"id": 3, "prompt": "c"}\n')
    lines, origin = read_input(str(prompts), 64)
    from sgcli.app.generate import run_batch
    from sgcli.app.local import LocalRunner
    from sgcli.cli.report import Terminal

    out = tmp_path / "o.jsonl"
    writer, reporter = RecordWriter(out), Terminal()
    try:
        run_batch(LocalRunner(session, reporter), (lines, origin), writer, reporter)
    finally:
        writer.close()
    records = _lines(out)
    assert [r["id"] for r in records] == [1, "line-2", 3]
    assert records[1]["valid"] is None and "over the limit of 64 bytes" in records[1]["errors"][0]
    assert all(r["finish_reason"] != "error" for r in (records[0], records[2]))


def test_resume_tells_lines_of_one_id_apart_by_their_prompt(tmp_path):
    """Keyed by id alone, the error record dropped for the first of three lines with id "a" gave its place
    to the third line's record: the first line went unanswered and the third was answered twice; a line
    without an id (made-up `line-3`) likewise took the record of a user's line whose id was "line-3"."""
    out = tmp_path / "o.jsonl"
    records = [
        {"id": "a", "prompt": "long", "output": "", "finish_reason": "error"},
        {"id": "a", "prompt": "Hi", "output": "x", "finish_reason": "stop"},
        {"id": "a", "prompt": "x", "output": "y", "finish_reason": "stop"},
        {"id": "line-3", "prompt": "user's", "output": "z", "finish_reason": "stop"},
    ]
    out.write_text("".join(json.dumps(r) + "\n" for r in records))
    writer = RecordWriter(out, resume=True)
    asked = [("a", "long"), ("a", "Hi"), ("a", "x"), ("line-3", "made-up id"), ("line-3", "user's")]
    assert [writer.skip(rid, prompt) for rid, prompt in asked] == [False, True, True, False, True]
    writer.close()
