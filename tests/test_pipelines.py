"""sgcli in a shell pipeline: a reader that leaves (`| head`, `| true`) or a stream closed before the
start (`>&-`, `2>&-`) keeps the exit code the run earned, and never stops work it does not need
(sgcli.cli.streams)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.serving_stub import Stub

BAD_GBNF = 'root ::= "a" undefined\n'  # a finding (lint exit 1) and a compile error (exit 1)


def _sgcli(args, *, stdout_gone=False, stderr_gone=False, close=(), cwd=None) -> subprocess.CompletedProcess:
    """sgcli with stdout/stderr pipes whose reader has already left, or with fds `close`d at start."""

    def prepare():
        for fd in close:
            os.close(fd)

    r_out, w_out = os.pipe()
    r_err, w_err = os.pipe()
    if stdout_gone:
        os.close(r_out)
    if stderr_gone:
        os.close(r_err)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "sgcli", *args], stdin=subprocess.DEVNULL, stdout=w_out, stderr=w_err,
            preexec_fn=prepare, cwd=cwd,
        )  # fmt: skip
        os.close(w_out)
        os.close(w_err)
        out = b"" if stdout_gone else _read_all(r_out)
        err = b"" if stderr_gone else _read_all(r_err)
        code = proc.wait(timeout=120)
    finally:
        for fd in (r_out, r_err):
            try:
                os.close(fd)
            except OSError:
                pass
    return subprocess.CompletedProcess(args, code, out.decode(), err.decode())


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


@pytest.fixture()
def bad(tmp_path) -> Path:
    path = tmp_path / "bad.gbnf"
    path.write_text(BAD_GBNF)
    return path


@pytest.mark.parametrize("args", [["backends"], ["--version"], ["--help"], ["schema", "record"]])
def test_a_reader_that_left_after_a_good_run_is_exit_0(args):
    """rich's broken-pipe handler made these exit 1 (`sgcli backends | true`)."""
    done = _sgcli(args, stdout_gone=True)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow  # ~5-12 s: make test-slow, run by CI
def test_a_reader_that_left_keeps_the_findings_exit_code(bad, tmp_path):
    """`lint bad.gbnf | head -1` was exit 0: a closed pipe hid the finding (and a missing file's 2)."""
    assert _sgcli(["lint", str(bad)], stdout_gone=True).returncode == 1
    assert _sgcli(["lint", str(bad)], stdout_gone=True, stderr_gone=True).returncode == 1
    assert _sgcli(["lint", str(tmp_path / "missing.gbnf"), str(bad)], stdout_gone=True).returncode == 2
    assert _sgcli(["compile", str(bad), "--json"], stdout_gone=True).returncode == 1


@pytest.mark.parametrize(
    "args", [["backends", "--json"], ["schema", "record"], ["config", "--json"], ["--version"], ["lint", "BAD"]]
)
def test_a_closed_stdout_is_exit_2_saying_so(args, bad):
    """`>&-`: sys.stdout is None, and writing a result was AttributeError, exit 3."""
    done = _sgcli([str(bad) if a == "BAD" else a for a in args], close=(1,))
    assert done.returncode == 2, done.stderr
    assert "stdout is closed" in done.stderr and "Traceback" not in done.stderr


def test_a_closed_stderr_keeps_the_commands_exit_code(bad):
    assert _sgcli(["lint", str(bad)], close=(2,)).returncode == 1
    assert _sgcli(["schema", "record"], close=(2,)).returncode == 0


def test_generate_with_stdout_closed_asks_for_output_before_anything_runs():
    done = _sgcli(["generate", "--engine", "vllm", "--base-url", "http://127.0.0.1:9", "--regex", "a", "x"], close=(1,))
    assert done.returncode == 2 and "stdout is closed" in done.stderr and "-o FILE" in done.stderr


def test_the_closed_stdout_check_is_the_generate_commands_not_the_record_writers(monkeypatch):
    """batch/ does not know the terminal: cli.streams' marker and the flag to pass are cli/'s."""
    from sgcli.batch.records import RecordWriter
    from sgcli.cli import generate, streams
    from sgcli.errors import UserError

    monkeypatch.setattr(sys, "stdout", streams._ClosedStdout())
    RecordWriter(None)  # would raise with the CLI's wording
    with pytest.raises(UserError, match="stdout is closed") as refused:
        generate._stdout_is_open()
    assert refused.value.hint == "pass -o FILE"


def test_a_warning_nobody_can_read_does_not_stop_the_batch(tmp_path):
    """stderr a pipe whose reader left: the duplicate-id warning ended the batch (no record, exit 1)."""
    lines = [{"id": "x", "prompt": "A"}, {"id": "x", "prompt": "B"}, {"id": "y", "prompt": "C"}]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out.jsonl"
    with Stub(answer=lambda body: "42") as stub:
        args = ["generate", "--engine", "vllm", "--base-url", stub.url, "--regex", "[0-9]+", "--input", "in.jsonl"]
        done = _sgcli([*args, "-o", str(out)], stderr_gone=True, cwd=tmp_path)
        assert done.returncode == 0
        assert [json.loads(line)["prompt"] for line in out.read_text().splitlines()] == ["A", "B", "C"]
        assert _sgcli([*args, "-o", str(tmp_path / "o2.jsonl")], close=(2,), cwd=tmp_path).returncode == 0


def test_a_batch_stops_when_its_reader_leaves_with_the_code_of_what_it_wrote(tmp_path):
    lines = [{"id": f"p{i}", "prompt": f"Q{i}"} for i in range(40)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    with Stub(answer=lambda body: "x") as stub:  # every answer invalid: exit 1 from the first record read
        args = ["generate", "--engine", "vllm", "--base-url", stub.url, "--regex", "[0-9]+", "--input", "in.jsonl"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "sgcli", *args, "--concurrency", "1"], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
        )  # fmt: skip
        assert json.loads(proc.stdout.readline())["id"] == "p0"
        proc.stdout.close()  # `| head -1`
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == 1, err
        assert "the batch stopped" in err
        assert len(stub.requests) < 40


@pytest.mark.parametrize("concurrency", ["1", "4"])
def test_records_nobody_received_are_not_counted_nor_decide_the_exit_code(tmp_path, concurrency):
    """The reader left before the first record: the records held for ordering and the one whose write
    failed were counted (\"reader left after 4 of 40\", exit 1 for failures nobody received)."""
    lines = [{"id": f"p{i}", "prompt": f"Q{i}"} for i in range(40)]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    with Stub(answer=lambda body: "x") as stub:  # every answer invalid
        args = ["generate", "--engine", "vllm", "--base-url", stub.url, "--regex", "[0-9]+", "--input", "in.jsonl"]
        done = _sgcli([*args, "--concurrency", concurrency], stdout_gone=True, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "stdout's reader left after 0 of 40 records" in done.stderr
