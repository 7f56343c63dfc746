"""The application layer without a model: one request type, one batch loop and one check for both runners.

The local and the server runner differ only in where records come from; what is written, in
which order, what is skipped on --resume, what is said and which exit code ends the run are
`sgcli.app.generate`'s, tested here with a runner that answers from a table.
"""

from __future__ import annotations

import json

import pytest

from sgcli.app.generate import run_batch, run_generate, run_single
from sgcli.app.request import GenerateRequest, LocalOptions, ServerOptions
from sgcli.batch.records import RecordWriter
from sgcli.batch.requests import BadLine
from sgcli.batch.sampling import SamplingParams
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.errors import EXIT_FINDINGS, EXIT_OK, UserError
from tests.helpers import RecordingReporter

CHOICE = ConstraintSpec(Kind.CHOICE, "yes\nno", "--choice", choices=("yes", "no"))


class TableRunner:
    """Answers each request from `valid` (prompt -> verdict), finishing them in reverse order."""

    title = "generating from a table"

    def __init__(self, valid: dict[str, bool | None]):
        self.valid, self.asked = valid, []

    def record(self, rid, prompt, valid, finish="stop"):
        return {"id": rid, "prompt": prompt, "valid": valid, "finish_reason": finish, "usage": {"completion_tokens": 2}}

    def run_single(self, req, show):
        self.asked.append(req.prompt)
        if show is not None:
            show("yes")
        return self.record(req.id, req.prompt, self.valid[req.prompt])

    def run_batch(self, items, put):
        for index in reversed(range(len(items))):  # a server's requests complete in any order
            item = items[index]
            if isinstance(item, BadLine):
                put(index, item.record())  # the error record a runner writes for it
            else:
                self.asked.append(item.prompt)
                put(index, self.record(item.id, item.prompt, self.valid[item.prompt]))

    def how(self):
        return "a table lookup"


def _lines(*objects) -> tuple[bytes, str]:
    return ("\n".join(o if isinstance(o, str) else json.dumps(o) for o in objects).encode(), "in.jsonl")


def _records(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_records_are_written_in_input_order_whatever_order_they_finish(tmp_path):
    out, reporter = tmp_path / "o.jsonl", RecordingReporter()
    runner = TableRunner({"a": True, "b": None, "c": True})
    batch = _lines({"id": 1, "prompt": "a"}, {"id": 2, "prompt": "b"}, "not json", {"id": 4, "prompt": "c"})
    writer = RecordWriter(out)
    code = run_batch(runner, batch, writer, reporter)
    writer.close()
    assert [r["id"] for r in _records(out)] == [1, 2, "line-3", 4]
    assert code == EXIT_FINDINGS  # the bad line's error record is a finding; unchecked (null) is not
    (tally,) = reporter.tallies
    assert (tally.n, tally.valid, tally.unchecked, tally.errors, tally.tokens) == (
        4,
        2,
        1,
        1,
        6,
    )  # none for the bad line
    assert reporter.counted == [(runner.title, 4, 4)]


def test_unchecked_records_alone_exit_0(tmp_path):
    writer, reporter = RecordWriter(tmp_path / "o.jsonl"), RecordingReporter()
    assert run_batch(TableRunner({"a": None}), _lines({"id": 1, "prompt": "a"}), writer, reporter) == EXIT_OK
    writer.close()


def test_resume_asks_only_for_the_ids_not_yet_answered_and_says_how_many(tmp_path):
    out = tmp_path / "o.jsonl"
    out.write_text(json.dumps({"id": 1, "valid": True, "finish_reason": "stop"}) + "\n")
    runner, reporter = TableRunner({"a": True, "b": True}), RecordingReporter()
    writer = RecordWriter(out, resume=True)
    run_batch(runner, _lines({"id": 1, "prompt": "a"}, {"id": 2, "prompt": "b"}), writer, reporter)
    writer.close()
    assert runner.asked == ["b"] and [r["id"] for r in _records(out)] == [1, 2]
    assert ("note", f"--resume: 1 of 2 lines were already answered in {out}") in reporter.notices


def test_a_resumed_batch_counts_the_records_it_kept(tmp_path):
    """A run killed after writing an invalid record, then resumed, exited 0 with "2 valid, 0 invalid"
    while the file held `valid: false`: the exit code and the summary count the kept records too."""
    out = tmp_path / "o.jsonl"
    out.write_text(json.dumps({"id": 1, "prompt": "a", "valid": False, "finish_reason": "stop"}) + "\n")
    runner, reporter = TableRunner({"a": True, "b": True}), RecordingReporter()
    writer = RecordWriter(out, resume=True)
    code = run_batch(runner, _lines({"id": 1, "prompt": "a"}, {"id": 2, "prompt": "b"}), writer, reporter)
    writer.close()
    assert runner.asked == ["b"] and code == EXIT_FINDINGS
    (tally,) = reporter.tallies
    assert (tally.n, tally.kept, tally.valid, tally.invalid) == (2, 1, 1, 1)
    assert tally.summary().startswith("2 records (1 kept from the output file): 1 valid, 1 invalid")


def test_duplicate_ids_are_named_once(tmp_path):
    writer, reporter = RecordWriter(tmp_path / "o.jsonl"), RecordingReporter()
    lines = _lines({"id": "x", "prompt": "a"}, {"id": "x", "prompt": "a"}, {"id": 2, "prompt": "a"})
    run_batch(TableRunner({"a": True}), lines, writer, reporter)
    writer.close()
    warnings = [m for label, m in reporter.notices if label == "warning"]
    assert warnings == ['1 id used on several input lines: "x" (each line still gets its own record, in input order)']


def test_resume_names_records_that_answer_no_input_line(tmp_path):
    """An edited prompt left its old record beside the new one, 4 records for 3 lines, and only "2 of 3
    lines were already answered" was said (a tour): the records no line claims are named."""
    out = tmp_path / "o.jsonl"
    old = [{"id": 1, "prompt": "one", "valid": True, "finish_reason": "stop"}]
    old.append({"id": 2, "prompt": "b", "valid": True, "finish_reason": "stop"})
    out.write_text("".join(json.dumps(r) + "\n" for r in old))
    runner, reporter = TableRunner({"edited": True, "b": True}), RecordingReporter()
    writer = RecordWriter(out, resume=True)
    run_batch(runner, _lines({"id": 1, "prompt": "edited"}, {"id": 2, "prompt": "b"}), writer, reporter)
    writer.close()
    assert runner.asked == ["edited"]
    (warning,) = [m for label, m in reporter.notices if label == "warning"]
    assert f"1 record in {out} answer no line of the input (first: {out}:1" in warning


def test_resume_keeps_a_bad_lines_error_record_in_place(tmp_path):
    """A resume with nothing to do rewrote a, line-2, c as a, c, line-2: a bad line's error record was
    dropped and written again at the end (a tour). Still bad in the same words, it stays, counted."""
    out, lines = tmp_path / "o.jsonl", _lines({"id": 1, "prompt": "a"}, "not json", {"id": 3, "prompt": "c"})
    first = RecordWriter(out)
    assert run_batch(TableRunner({"a": True, "c": True}), lines, first, RecordingReporter()) == EXIT_FINDINGS
    first.close()
    before = out.read_bytes()
    runner, reporter, writer = TableRunner({"a": True, "c": True}), RecordingReporter(), RecordWriter(out, resume=True)
    assert run_batch(runner, lines, writer, reporter) == EXIT_FINDINGS  # the bad line still fails the batch
    writer.close()
    assert runner.asked == [] and out.read_bytes() == before
    (tally,) = reporter.tallies
    assert (tally.n, tally.kept, tally.errors) == (3, 3, 1)


def test_a_long_duplicate_id_is_cut_in_the_warning(tmp_path):
    writer, reporter = RecordWriter(tmp_path / "o.jsonl"), RecordingReporter()
    long = "x" * 200_000
    run_batch(
        TableRunner({"a": True}), _lines({"id": long, "prompt": "a"}, {"id": long, "prompt": "a"}), writer, reporter
    )
    writer.close()
    (warning,) = [m for label, m in reporter.notices if label == "warning"]
    assert len(warning) < 300 and "(200,002 characters)" in warning


def test_an_empty_input_path_is_named_empty(run_cli):
    result = run_cli("generate", "--regex", "a", "--input", "")
    assert result.exit_code == 2 and "the path is empty" in result.output, result.output


def _request(tmp_path, **kw) -> GenerateRequest:
    kw.setdefault("local", LocalOptions(backend="llguidance"))
    return GenerateRequest(CHOICE, "Is water wet?", output=tmp_path / "o.jsonl", **kw)


def test_a_request_runs_on_exactly_one_of_the_local_model_and_a_server(tmp_path):
    from sgcli.serving.client import ClientOptions

    server = ServerOptions("vllm", ClientOptions("http://127.0.0.1:1", None, 1, 0, 1.0))
    with pytest.raises(ValueError, match="exactly one"):
        _request(tmp_path, server=server)
    with pytest.raises(ValueError, match="exactly one"):
        GenerateRequest(CHOICE, "hi", ("{}", "in.jsonl"), local=LocalOptions())


def test_the_one_check_refuses_what_the_runner_cannot_take_before_anything_loads(tmp_path, monkeypatch):
    """A backend (local) or an engine (server) that lacks the constraint's kind is exit 2 naming who can,
    and the output file an earlier run wrote is left as it was, even with --force."""
    import sgcli.app.generate
    from sgcli.serving.client import ClientOptions

    def no_runner(*args):
        raise AssertionError("a runner was built for a request the check should have refused")

    monkeypatch.setattr(sgcli.app.generate, "_runner", no_runner)
    out = tmp_path / "o.jsonl"
    out.write_text("earlier\n")
    lark = ConstraintSpec(Kind.LARK, 'start: "a"', "g.lark")
    local = GenerateRequest(lark, "hi", output=out, force=True, local=LocalOptions(backend="outlines_core"))
    with pytest.raises(UserError, match="backend 'outlines_core' does not support"):
        run_generate(local, RecordingReporter())
    client = ClientOptions("http://127.0.0.1:1", None, 1, 0, 1.0)
    server = GenerateRequest(lark, "hi", output=out, force=True, server=ServerOptions("openai", client))
    with pytest.raises(UserError, match="engine 'openai' does not support"):
        run_generate(server, RecordingReporter())
    assert out.read_text() == "earlier\n" and not (tmp_path / "o.jsonl.lock").exists()  # the lock went too


def test_single_prompt_streams_its_text_then_ends_the_line(tmp_path):
    out, reporter = tmp_path / "o.txt", RecordingReporter()
    writer = RecordWriter(out)
    code = run_single(TableRunner({"Is water wet?": False}), _request(tmp_path), writer, reporter)
    writer.close()
    assert out.read_text() == "yes\n" and code == EXIT_FINDINGS


def test_the_sampling_model_takes_flag_values_as_given():
    params = SamplingParams(temperature=0.5, stop=["a", "b"])
    assert params.stop == ("a", "b") and SamplingParams(stop=None).stop == ()
    assert params == SamplingParams(0.5, 1.0, 0, 0, 256, ("a", "b"))  # one model, whichever way it is built
    with pytest.raises(UserError, match="--top-p 0 is out of range"):
        SamplingParams(top_p=0).check()
