"""Serving engines without a real server: request bodies against the documented shapes, capability
errors, and the HTTP client's retry paths against a fault-injecting loopback stub.

The real-server checks (schema, regex, choice, grammar, batches, a killed server) are in
tests/test_serving_engine.py, marked `engine`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from sgcli.batch.sampling import SamplingParams
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.records import EngineRow, GenerationRecord
from sgcli.serving import get_dialect
from tests.serving_stub import Stub

ROOT = Path(__file__).resolve().parent.parent

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
MESSAGES = [{"role": "user", "content": "hi"}]
OLD_TAG = {"structures": [{"begin": "<f>", "schema": {"type": "object"}, "end": "</f>"}], "triggers": ["<f>"]}
NEW_TAG = {
    "type": "structural_tag",
    "format": {"type": "triggered_tags", "triggers": ["<f>"], "tags": [{"begin": "<f>", "content": {}, "end": "</f>"}]},
}


def spec_of(kind: Kind, value) -> ConstraintSpec:
    if kind is Kind.CHOICE:
        return ConstraintSpec(kind, "\n".join(value), "--choice", choices=tuple(value))
    return ConstraintSpec(kind, value if isinstance(value, str) else json.dumps(value), "s.json")


def body(engine, kind, value, *, raw=False, **sampling):
    call = get_dialect(engine).request(
        spec_of(kind, value),
        None if raw else MESSAGES,
        "hi" if raw else None,
        SamplingParams(**sampling),
        model="m",
    )
    return call.path, call.body


# --- request bodies, against each engine's documented shape --------------------------------


def test_openai_schema_goes_in_response_format_as_an_object():
    path, b = body("openai", Kind.JSON_SCHEMA, SCHEMA, top_k=5)
    assert path == "/v1/chat/completions"
    assert b["messages"] == MESSAGES and b["model"] == "m"
    rf = b["response_format"]
    assert rf["type"] == "json_schema"
    assert rf["json_schema"]["schema"] == SCHEMA and rf["json_schema"]["strict"] is True
    assert rf["json_schema"]["name"] == "s"
    assert "top_k" not in b  # not an OpenAI parameter


@pytest.mark.parametrize(
    "kind, value, expected",
    [
        (Kind.JSON_SCHEMA, SCHEMA, {"json": SCHEMA}),
        (Kind.REGEX, "[0-9]+", {"regex": "[0-9]+"}),
        (Kind.CHOICE, ["yes", "no"], {"choice": ["yes", "no"]}),
        (Kind.EBNF, 'root ::= "a"', {"grammar": 'root ::= "a"'}),
        (Kind.LARK, 'start: "a"', {"grammar": 'start: "a"'}),
    ],
)
@pytest.mark.parametrize("raw", [False, True])
def test_vllm_structured_outputs_on_both_routes(kind, value, expected, raw):
    path, b = body("vllm", kind, value, raw=raw)
    assert path == ("/v1/completions" if raw else "/v1/chat/completions")
    assert ("prompt" in b) == raw and ("messages" in b) != raw
    assert b["structured_outputs"] == expected
    assert "response_format" not in b


@pytest.mark.parametrize("tag", [OLD_TAG, NEW_TAG])
def test_vllm_structural_tag_is_a_json_string(tag):
    _, b = body("vllm", Kind.STRUCTURAL_TAG, tag)
    sent = json.loads(b["structured_outputs"]["structural_tag"])
    assert sent["type"] == "structural_tag"
    assert {k: v for k, v in sent.items() if k != "type"} == {k: v for k, v in tag.items() if k != "type"}


def test_vllm_top_k_only_when_set():
    assert body("vllm", Kind.REGEX, "a", top_k=7)[1]["top_k"] == 7
    assert "top_k" not in body("vllm", Kind.REGEX, "a")[1]


@pytest.mark.parametrize(
    "kind, value, field, expected",
    [
        (Kind.REGEX, "[0-9]+", "regex", "[0-9]+"),
        (Kind.CHOICE, ["a.b", "c"], "regex", r"a\.b|c"),
        (Kind.EBNF, 'root ::= "a"', "ebnf", 'root ::= "a"'),
    ],
)
def test_sglang_openai_routes_take_regex_and_ebnf_in_the_body(kind, value, field, expected):
    path, b = body("sglang", kind, value)
    assert path == "/v1/chat/completions"
    assert b[field] == expected


def test_sglang_openai_route_schema_in_response_format():
    _, b = body("sglang", Kind.JSON_SCHEMA, SCHEMA)
    assert b["response_format"]["type"] == "json_schema"
    assert b["response_format"]["json_schema"]["schema"] == SCHEMA


@pytest.mark.parametrize("tag", [OLD_TAG, NEW_TAG])
def test_sglang_structural_tag_both_shapes(tag):
    _, chat = body("sglang", Kind.STRUCTURAL_TAG, tag)
    assert chat["response_format"]["type"] == "structural_tag"
    assert chat["response_format"].get("structures", chat["response_format"].get("format")) == tag.get(
        "structures", tag.get("format")
    )
    path, native = body("sglang", Kind.STRUCTURAL_TAG, tag, raw=True)
    assert path == "/generate"
    assert json.loads(native["sampling_params"]["structural_tag"]) == chat["response_format"]


def test_sglang_native_generate_schema_is_a_string():
    path, b = body("sglang", Kind.JSON_SCHEMA, SCHEMA, raw=True, max_tokens=9, seed=3)
    assert path == "/generate"
    assert b["text"] == "hi"
    params = b["sampling_params"]
    assert isinstance(params["json_schema"], str) and json.loads(params["json_schema"]) == SCHEMA
    assert params["max_new_tokens"] == 9


def test_sglang_native_reply_reads_meta_info():
    from sgcli.serving.base import Call

    dialect = get_dialect("sglang")
    reply = dialect.reply(
        Call("generate", {}),
        {
            "text": "12",
            "meta_info": {
                "prompt_tokens": 4,
                "completion_tokens": 2,
                "finish_reason": {"type": "length", "length": 2},
                "e2e_latency": 0.5,
            },
        },
    )
    assert (reply.output, reply.finish_reason, reply.prompt_tokens, reply.completion_tokens) == ("12", "length", 4, 2)
    assert reply.server_timings == {"server_ms": 500.0}  # sglang reports seconds


# --- capabilities: exit 2 naming who can ---------------------------------------------------


def test_engines_listing(run_cli):
    result = run_cli("backends", "--engines", "--json")
    assert result.exit_code == 0
    rows = {r["engine"]: r for r in map(json.loads, result.stdout.splitlines())}
    for row in rows.values():
        EngineRow.model_validate(row)
    assert set(rows) == {"vllm", "sglang", "openai"}
    assert "regex" in rows["vllm"]["kinds"] and "regex" not in rows["openai"]["kinds"]
    assert rows["vllm"]["server_backends_per_request"] is False


def test_openai_cannot_take_a_regex(run_cli):
    result = run_cli("generate", "--engine", "openai", "--base-url", "http://127.0.0.1:9", "--regex", "a+", "x")
    assert result.exit_code == 2
    assert "engine 'openai' does not support regex" in result.stderr
    assert "vllm, sglang" in result.stderr and "xgrammar" in result.stderr


def test_sglang_cannot_take_lark(run_cli, tmp_path):
    grammar = tmp_path / "g.lark"
    grammar.write_text('start: "a"\n')
    result = run_cli("generate", "--engine", "sglang", "--base-url", "http://127.0.0.1:9", "--lark", grammar, "x")
    assert result.exit_code == 2
    assert "does not support Lark" in result.stderr and "engines: vllm" in result.stderr


def test_vllm_per_request_compact_json_is_refused(run_cli, tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(SCHEMA))
    result = run_cli(
        "generate", "--engine", "vllm", "--base-url", "http://127.0.0.1:9", "--schema", schema,
        "--json-whitespace", "compact", "x",
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--json-whitespace compact" in result.stderr and "local backends" in result.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--engine", "vllm"], "needs --base-url"),
        (["--engine", "tgi", "--base-url", "http://x"], "'tgi' is not one of"),
        (["--engine", "vllm", "--base-url", "127.0.0.1:1"], "must start with http"),
        # each was exit 3 (an OverflowError or InvalidURL inside the client)
        (["--engine", "vllm", "--base-url", "http://127.0.0.1:99999"], "is not a URL: Port out of range"),
        (["--engine", "vllm", "--base-url", "http://[::1"], "is not a URL: Invalid IPv6 URL"),
        (["--engine", "vllm", "--base-url", "http://127.0.0.1:1 x"], "is not a URL: it holds a space"),
        (["--engine", "vllm", "--base-url", "http://127.0.0.1:-1"], "is not a URL: Port could not be cast"),
        (["--engine", "vllm", "--base-url", "http://x", "--concurrency", "0"], "--concurrency"),
        (["--concurrency", "0"], "--concurrency must be at least 1"),  # the local engine took it silently
        (["--engine", "vllm", "--base-url", "http://x", "--api-key-env", "SGCLI_NO_SUCH_VAR"], "not set"),
        (["--engine", "vllm", "--base-url", "http://x", "--reasoning"], "local engine only"),
        (["--engine", "vllm", "--base-url", "http://x", "--revision", "v2"], "--revision applies to the local"),
        (["--engine", "vllm", "--base-url", "http://x", "--chat-template-kwargs", "{}"], "local engine only"),
    ],
)
def test_bad_engine_flags_exit_2(run_cli, args, message):
    result = run_cli("generate", "--regex", "a", *args, "x")
    assert result.exit_code == 2
    assert message in result.stderr


# --- the HTTP client against the fault-injecting stub --------------------------------------


def gen(run_cli, stub, *args):
    return run_cli("generate", "--engine", "vllm", "--base-url", stub.url, "--quiet", *args)


def test_retries_429_503_and_reset_then_succeeds(run_cli):
    with Stub(answer=lambda b: "42") as stub:
        stub.script = [("status", 429, {"retry-after": "0"}), ("status", 503), ("reset",)]
        result = gen(run_cli, stub, "--regex", "[0-9]+", "--json", "-s", "Count.", "--seed", "3", "How many?")
    assert result.exit_code == 0, result.stderr
    record = json.loads(result.stdout)
    assert record["valid"] is True and record["output"] == "42" and record["engine"] == "vllm"
    GenerationRecord.model_validate(record)
    assert (record["sampling"]["seed"], record["sampling"]["system"]) == (3, "Count.")  # how to ask again
    assert len(stub.requests) == 4
    assert stub.requests[-1]["body"]["structured_outputs"] == {"regex": "[0-9]+"}


def test_retry_after_is_bounded_by_the_request_timeout(run_cli):
    """A 429 asking for an hour (or nan) waits at most --request-timeout before the next attempt."""
    with Stub(answer=lambda b: "42") as stub:
        stub.script = [("status", 429, {"retry-after": "3600"}), ("status", 429, {"retry-after": "nan"})]
        started = time.monotonic()
        result = gen(run_cli, stub, "--regex", "[0-9]+", "--json", "--request-timeout", "0.5", "n?")
        took = time.monotonic() - started
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["output"] == "42" and len(stub.requests) == 3
    assert took < 8, f"waited {took:.1f} s for a Retry-After past --request-timeout 0.5"


def test_slow_answer_times_out_then_retries(run_cli):
    with Stub(answer=lambda b: "7") as stub:
        stub.script = [("slow", 3.0)]
        result = gen(run_cli, stub, "--regex", "[0-9]+", "--json", "--request-timeout", "0.5", "n?")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["output"] == "7"
    assert len(stub.requests) == 2


@pytest.mark.parametrize("step", [("drip", 0.2), ("endless",)], ids=["dripped", "endless stream"])
def test_the_whole_answer_must_come_within_the_request_timeout(run_cli, step):
    """httpx's timeout bounds each read: a server sending a byte at a time, or a stream that never
    ends, kept a single prompt going forever (hostile_inputs.py: "endless-stream: one prompt")."""
    with Stub(answer=lambda b: "1234567890") as stub:
        stub.script = [step]
        t = time.monotonic()
        result = gen(run_cli, stub, "--regex", "[0-9 ]+", "--request-timeout", "0.5", "--retries", "0", "n?")
    assert time.monotonic() - t < 2.5
    assert result.exit_code == 2, result.output
    assert "--request-timeout 0.5 s" in result.stderr


def test_a_dripped_batch_answer_is_that_lines_error_record(run_cli, tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": 1, "prompt": "a"}\n{"id": 2, "prompt": "b"}\n')
    with Stub(answer=lambda b: "12345") as stub:
        stub.script = [("ok",), ("drip", 0.2)]
        t = time.monotonic()
        result = gen(
            run_cli,
            stub,
            "--regex",
            "[0-9]+",
            "--input",
            prompts,
            "--concurrency",
            "1",
            "--request-timeout",
            "0.5",
            "--retries",
            "0",
        )
    assert time.monotonic() - t < 2.5
    assert result.exit_code == 1, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["id"] for r in records] == [1, 2] and records[0]["valid"] is True
    assert records[1]["finish_reason"] == "error" and "--request-timeout 0.5 s" in records[1]["errors"][0]


def test_retries_exhausted_is_exit_2_for_a_single_prompt(run_cli):
    with Stub() as stub:
        stub.script = [("status", 503)] * 2
        result = gen(run_cli, stub, "--regex", "a", "--retries", "1", "x")
    assert result.exit_code == 2
    assert "HTTP 503: stub says 503 (after 2 attempts)" in result.stderr


@pytest.mark.parametrize(
    ("step", "says", "hint"),
    [
        (("status", 503), "HTTP 503: stub says 503 (after 1 attempt)", "--retries (now 0)"),
        (("status", 429, {"retry-after": "0"}), "HTTP 429: stub says 429 (after 1 attempt)", "rate-limiting"),
        (("raw", 502, "text/html", b"<html>" + b"x" * 2000 + b"</html>"), "HTTP 502: Bad Gateway (after", "later"),
        (
            ("raw", 200, "text/event-stream", b'event: error\ndata: {"error": {"message": "overloaded"}}\n\n'),
            "an error event in the stream: overloaded",
            "try again later\n",
        ),
    ],
    ids=["503", "429", "html-502", "stream-error-event"],
)
def test_a_server_that_answers_with_an_error_is_not_called_unreachable(run_cli, step, says, hint):
    """A 5xx, a 429 or a stream's error event read "cannot reach ... is the server up?" (and "1 attempts"):
    the server answered. The message says so, with its status or its words, and a hint that fits."""
    with Stub() as stub:
        stub.script = [step]
        result = run_cli(
            "generate", "--engine", "vllm", "--base-url", stub.url, "--retries", "0", "--regex", "a", "x"
        )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert f"vllm at {stub.url} answered with an error: {says}" in result.stderr
    assert hint in result.stderr + "\n" and "cannot reach" not in result.stderr and "server up?" not in result.stderr
    assert "xxxx" not in result.stderr


def test_a_batch_line_the_server_fails_says_it_answered(run_cli, tmp_path):
    with Stub(answer=lambda b: "a") as stub:
        stub.script = [("ok",), ("status", 503)]
        result = gen(
            run_cli, stub, "--regex", "a", "--retries", "0", "--concurrency", "1", "--input", _batch_file(tmp_path, 2)
        )
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert result.exit_code == 1 and len(records) == 2, result.output
    assert records[1]["errors"] == [
        f"vllm at {stub.url} answered with an error: HTTP 503: stub says 503 (after 1 attempt)"
    ]


def test_a_rejection_is_exit_2_with_the_servers_reason(run_cli):
    with Stub() as stub:
        stub.script = [("status", 400)]
        result = gen(run_cli, stub, "--regex", "a", "x")
    assert result.exit_code == 2
    assert "stub says 400" in result.stderr
    assert len(stub.requests) == 1  # a 4xx is not retried


def test_an_error_event_in_a_stream_is_a_rejection():
    from sgcli.serving.client import Rejected, _raise_stream_error

    _raise_stream_error({"choices": [{"delta": {"content": "a"}}]})  # an ordinary chunk passes
    with pytest.raises(Rejected, match="Invalid grammar"):
        _raise_stream_error({"error": {"message": "Invalid grammar specification", "code": 400}})


@pytest.mark.parametrize(("regex", "where"), [("(", "--regex:1:1:"), ("ab[z-a]", "--regex:1:7:")])
def test_a_regex_nothing_can_read_is_exit_2_before_the_request(run_cli, regex, where):
    """No local backend compiles a server's regex: '(' went out and came back `valid: null`, exit 0
    (hostile_inputs.py: "generate --regex '(' (vllm)")."""
    with Stub() as stub:
        result = gen(run_cli, stub, "--regex", regex, "x")
    assert result.exit_code == 2, result.output
    assert f"{where} the regex cannot be read" in result.stderr and not stub.requests


@pytest.mark.parametrize(
    ("text", "where", "says"),
    [
        ("false", ":1:1:", "it is `false`"),
        ('{"enum": []}', ":1:2:", "`enum` lists no value"),
        ('{\n  "type": "string",\n  "minLength": 5,\n  "maxLength": 2\n}', ":3:3:", "`minLength` 5 is greater"),
        ('{"type": "object", "properties": {"a": false}, "required": ["a"]}', ":1:35:", "required property 'a'"),
    ],
    ids=["false", "empty-enum", "min-over-max", "required-false"],
)
def test_a_schema_that_admits_no_value_is_exit_2_before_any_request(run_cli, tmp_path, text, where, says):
    """The server does the constrained decoding and sgcli checks the answer: such a schema went out and
    every answer came back invalid, exit 1 (hostile_inputs.py: "generate: enum empty" and its kin)."""
    schema = tmp_path / "s.json"
    schema.write_text(text)
    with Stub(answer=lambda b: '{"country": "France"}') as stub:
        result = gen(run_cli, stub, "--schema", schema, "x")
    assert result.exit_code == 2, result.output
    assert f"{schema}{where} the JSON Schema admits no value: " in result.stderr and says in result.stderr
    assert "hint: " in result.stderr
    assert not stub.requests and not stub.listings


def test_a_look_alike_that_admits_values_still_goes_to_the_server(run_cli, tmp_path):
    """Length bounds constrain strings only: with no `type`, an object answer is valid."""
    schema = tmp_path / "s.json"
    schema.write_text('{"minLength": 5, "maxLength": 2, "anyOf": [{"enum": []}, {"type": "object"}]}')
    with Stub(answer=lambda b: '{"country": "France"}') as stub:
        result = gen(run_cli, stub, "--schema", schema, "--json", "x")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["valid"] is True and len(stub.requests) == 1


def test_a_format_sgcli_cannot_check_is_exit_2_unless_allow_unenforced(run_cli, tmp_path):
    """jsonschema has no checker for the format, so no answer could be judged on it: refused as a local run
    refuses what nothing enforces; --allow-unenforced sends it and the record lists it under `unenforced`."""
    schema = tmp_path / "s.json"
    schema.write_text('{\n  "type": "string",\n  "format": "x-made-up"\n}')
    with Stub(answer=lambda b: '"hello"') as stub:
        refused = gen(run_cli, stub, "--schema", schema, "x")
        assert refused.exit_code == 2, refused.output
        said = f"{schema}:3:3: `format` at /format: no checker knows format 'x-made-up'"
        assert f"{said} (define it: --format x-made-up=REGEX)" in refused.stderr
        assert "--allow-unenforced" in refused.stderr and not stub.requests and not stub.listings
        args = ("--schema", schema, "--allow-unenforced", "--json", "x")
        allowed = run_cli("generate", "--engine", "vllm", "--base-url", stub.url, *args)  # not --quiet: the note
    assert allowed.exit_code == 0, allowed.output
    record = json.loads(allowed.stdout)
    GenerationRecord.model_validate(record)
    assert record["valid"] is True and record["weakened"] == []
    assert record["unenforced"] == [{"pointer": "/format", "keyword": "format", "backend": "vllm"}]
    assert "note: --allow-unenforced: sgcli's schema checker cannot judge 1 keyword(s)" in allowed.stderr
    assert len(stub.requests) == 1


def test_server_output_is_validated_independently(run_cli):
    with Stub(answer=lambda b: "abc") as stub:
        result = gen(run_cli, stub, "--regex", "[0-9]+", "--json", "n?")
    assert result.exit_code == 1
    record = json.loads(result.stdout)
    assert record["valid"] is False and "does not match the regex" in record["errors"][0]


def test_an_unfinished_server_answer_is_an_error(run_cli):
    with Stub(answer=lambda b: "12") as stub:
        stub.script = [("ok", "abort")]
        result = gen(run_cli, stub, "--regex", "[0-9]+", "--json", "n?")
    record = json.loads(result.stdout)
    assert result.exit_code == 1
    assert record["finish_reason"] == "error" and "finish_reason 'abort'" in record["errors"][0]
    GenerationRecord.model_validate(record)


def test_length_is_never_valid(run_cli):
    with Stub(answer=lambda b: "12") as stub:
        stub.script = [("ok", "length")]
        result = gen(run_cli, stub, "--regex", "[0-9]+", "--json", "n?")
    assert result.exit_code == 1
    record = json.loads(result.stdout)
    assert record["finish_reason"] == "length" and record["valid"] is False


def test_grammar_output_is_checked_independently(run_cli, tmp_path):
    grammar = tmp_path / "yn.gbnf"
    grammar.write_text('root ::= "yes" | "no"\n')
    for answer, code in (("yes", 0), ("maybe", 1)):
        with Stub(answer=lambda b, a=answer: a) as stub:
            result = gen(run_cli, stub, "--ebnf", grammar, "--json", "?")
        record = json.loads(result.stdout)
        assert result.exit_code == code and record["valid"] is (code == 0), record
        assert record["validated_by"]  # a checker other than the server's grammar engine


def test_streaming_single_prompt_and_api_key(run_cli, monkeypatch):
    monkeypatch.setenv("SGCLI_TEST_KEY", "sekret")
    with Stub(answer=lambda b: "1234567") as stub:
        result = gen(run_cli, stub, "--regex", "[0-9]+", "--api-key-env", "SGCLI_TEST_KEY", "n?")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "1234567\n"
    sent = stub.requests[-1]
    assert sent["body"]["stream"] is True
    assert sent["headers"].get("Authorization") == "Bearer sekret"


def test_streaming_summary_says_how_long_from_process_start(run_cli):
    with Stub(answer=lambda b: "42") as stub:
        args = ("generate", "--engine", "vllm", "--base-url", stub.url, "--regex", "[0-9]+", "n?")
        result = run_cli(*args)
    assert result.exit_code == 0, result.stderr
    assert "from start)" in result.stderr  # "first token N s (ready N s from start)"


def _batch_file(tmp_path, n):
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"id": f"r{i}", "prompt": f"line {i}"}) + "\n" for i in range(n)))
    return path


def _line(body):
    return int(body["messages"][-1]["content"].split()[-1])


def test_batch_in_input_order_with_bounded_concurrency(run_cli, tmp_path):
    # Later lines answer sooner, so completion order is the reverse of input order.
    with Stub(answer=lambda b: json.dumps({"n": _line(b)}), delay=lambda b: 0.05 * (12 - _line(b))) as stub:
        out = tmp_path / "out.jsonl"
        result = gen(
            run_cli, stub, "--schema", _schema(tmp_path), "--input", _batch_file(tmp_path, 12), "--output", out,
            "--concurrency", "3",
        )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == [f"r{i}" for i in range(12)]
    assert [r["parsed"] for r in records] == [{"n": i} for i in range(12)]
    assert all(r["valid"] for r in records)
    assert stub.max_in_flight <= 3 and stub.max_in_flight >= 2


def _schema(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(SCHEMA))
    return path


def test_a_servers_error_records_have_the_keys_and_order_of_its_answers(run_cli, tmp_path):
    """A malformed line's record had `backend: null`, `model: null` and `start_to_first_token_ms` beside
    answers that had "server", the model and no such key; an HTTP 400's lacked it too."""
    batch = tmp_path / "in.jsonl"
    batch.write_text('{"id": "a", "prompt": "x"}\nnot json\n{"id": "b", "prompt": "y"}\n')
    with Stub(answer=lambda b: "42") as stub:
        stub.script = [("ok",), ("status", 400)]
        result = gen(run_cli, stub, "--regex", "[0-9]+", "--input", batch, "--concurrency", "1")
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["finish_reason"] for r in records] == ["stop", "error", "error"]
    for record in records:
        assert list(record) == list(records[0]) and list(record["timings"]) == list(records[0]["timings"])
        assert (record["backend"], record["engine"], record["model"]) == ("server", "vllm", "stub-model")
        GenerationRecord.model_validate(record)


def test_batch_failures_become_error_records_with_every_key(run_cli, tmp_path):
    with Stub(answer=lambda b: json.dumps({"n": _line(b)})) as stub:
        # the first request goes alone; then the next one fails every attempt
        stub.script = [("ok",), ("status", 503), ("status", 503)]
        out = tmp_path / "out.jsonl"
        result = gen(
            run_cli, stub, "--schema", _schema(tmp_path), "--input", _batch_file(tmp_path, 4), "--output", out,
            "--concurrency", "1", "--retries", "1",
        )  # fmt: skip
    assert result.exit_code == 1
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == ["r0", "r1", "r2", "r3"]
    assert [r["valid"] for r in records] == [True, None, True, True]  # nothing came back: no verdict
    assert set(records[1]) == set(records[0])
    assert records[1]["finish_reason"] == "error" and "HTTP 503" in records[1]["errors"][0]
    assert records[1]["unchecked"] and records[0]["unchecked"] is None
    for record in records:
        GenerationRecord.model_validate(record)

    # The server is back: --resume answers the failed line again and only that one, each id once.
    with Stub(answer=lambda b: json.dumps({"n": _line(b)})) as stub:
        result = gen(
            run_cli, stub, "--schema", _schema(tmp_path), "--input", _batch_file(tmp_path, 4), "--output", out,
            "--resume",
        )  # fmt: skip
        asked = [_line(r["body"]) for r in stub.requests]
    assert result.exit_code == 0, result.stderr
    assert asked == [1]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["id"] for r in records) == ["r0", "r1", "r2", "r3"]
    assert all(r["valid"] for r in records)


def test_a_first_request_the_server_refuses_alone_is_that_lines_error_record(run_cli, tmp_path):
    """vLLM answers 400 to a prompt past the context: on the first line, that ended the whole batch with
    exit 2 and no record, and `--resume` could never get past it."""
    with Stub(answer=lambda b: json.dumps({"n": _line(b)})) as stub:
        stub.script = [("status", 400)]  # the first line only; the second, sent alone too, is answered
        result = gen(
            run_cli, stub, "--schema", _schema(tmp_path), "--input", _batch_file(tmp_path, 3), "--concurrency", "1"
        )
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert result.exit_code == 1, result.stderr
    assert [(r["id"], r["finish_reason"]) for r in records] == [("r0", "error"), ("r1", "stop"), ("r2", "stop")]
    assert "HTTP 400" in records[0]["errors"][0] and records[1]["valid"] is True


def test_a_server_that_refuses_the_first_two_requests_fails_fast(run_cli, tmp_path):
    out = tmp_path / "out.jsonl"
    with Stub(answer=lambda b: "{}") as stub:
        stub.script = [("status", 400), ("status", 400)]
        result = gen(run_cli, stub, "--schema", _schema(tmp_path), "--input", _batch_file(tmp_path, 4), "-o", out)
        sent = len(stub.requests)
    assert result.exit_code == 2 and "rejected the request" in result.stderr, result.stderr
    assert sent == 2 and not out.exists()  # not one error record a line


# --- nothing the user has is lost ------------------------------------------------------------


def _finished(path, n):
    from sgcli import RECORD_SCHEMA_VERSION

    path.write_text(
        "".join(
            json.dumps({"schema_version": RECORD_SCHEMA_VERSION, "id": f"r{i}", "finish_reason": "stop"}) + "\n"
            for i in range(n)
        )
    )
    return path.read_bytes()


@pytest.mark.parametrize("flag", ["--resume", "--force"])
@pytest.mark.parametrize("served", [[], ["--served-model", "m"]])  # the model list, or the first request, fails
def test_an_unreachable_server_leaves_the_output_as_it_was(run_cli, tmp_path, flag, served):
    out = tmp_path / "prev.jsonl"
    before = _finished(out, 3)
    lines = _batch_file(tmp_path, 6).read_text()
    (tmp_path / "six.jsonl").write_text("not json\n" + lines)  # a bad first line is not written either
    result = run_cli(
        "generate", "--engine", "openai", "--base-url", "http://127.0.0.1:9", "--retries", "0", *served,
        "--schema", ROOT / "examples" / "capital.json", "--input", tmp_path / "six.jsonl", "-o", out, flag,
    )  # fmt: skip
    assert result.exit_code == 2 and "127.0.0.1:9" in result.stderr, result.stderr
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "prev.jsonl", "six.jsonl"]  # no lock left


def test_an_existing_output_needs_resume_or_force(run_cli, tmp_path):
    out = tmp_path / "out.jsonl"
    before = _finished(out, 2)
    with Stub(answer=lambda b: json.dumps({"n": _line(b)})) as stub:
        args = ("--schema", _schema(tmp_path), "--input", _batch_file(tmp_path, 3), "--output", out)
        refused = gen(run_cli, stub, *args)
        assert refused.exit_code == 2 and "--resume" in refused.stderr and "--force" in refused.stderr
        assert out.read_bytes() == before and not stub.requests  # refused before anything was asked
        forced = gen(run_cli, stub, *args, "--force")
    assert forced.exit_code == 0, forced.stderr
    assert [json.loads(line)["parsed"] for line in out.read_text().splitlines()] == [{"n": i} for i in range(3)]


def test_a_second_writer_on_one_output_exits_2_naming_the_first(run_cli, tmp_path):
    from helpers import output_locked_by_another_process

    out = tmp_path / "out.jsonl"
    with output_locked_by_another_process(out) as holder, Stub() as stub:
        result = gen(run_cli, stub, "--regex", "a", "--input", _batch_file(tmp_path, 2), "-o", out, "--resume")
        assert result.exit_code == 2, result.stderr
        assert f"pid {holder.pid}" in result.stderr and not stub.requests


def test_bad_lines_are_listed_by_file_line_and_the_rest_answered(run_cli, tmp_path):
    good = [json.dumps({"id": f"r{i}", "prompt": f"line {i}"}) for i in range(3)]
    bad = ["not json", '{"id": "x", "prompt": 5}', "[1]", '{"prompt": null}', "{", '{"messages": 3}', "7"]
    prompts = tmp_path / "in.jsonl"
    prompts.write_text("\n".join([good[0], *bad, good[1], "", good[2]]) + "\n")
    out = tmp_path / "out.jsonl"
    with Stub(answer=lambda b: json.dumps({"n": _line(b)})) as stub:
        result = run_cli(
            "generate", "--engine", "vllm", "--base-url", stub.url, "--schema", _schema(tmp_path),
            "--input", prompts, "-o", out,
        )  # fmt: skip
    assert result.exit_code == 1, result.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 10 and [r["parsed"] for r in records if r["valid"]] == [{"n": i} for i in range(3)]
    errors = [r for r in records if r["finish_reason"] == "error"]
    assert len(errors) == 7 and all(r["valid"] is None and r["unchecked"] for r in errors)
    # one key set, answered or not: a server's records leave out the in-process model's keys
    from sgcli.batch.records import LOCAL_ONLY

    assert {frozenset(r) for r in records} == {frozenset(records[0])}
    assert "engine" in records[0] and not set(LOCAL_ONLY) & set(records[0])
    assert set(LOCAL_ONLY) == {"device", "dtype", "model_impl", "model_impl_reason", "kernel", "chat_template"}
    assert "10 records: 3 valid, 0 invalid, 7 errors" in result.stderr
    assert "tok/s) · 4 concurrent requests" in result.stderr  # the client's default concurrency, said
    listed = [line.strip() for line in result.stderr.splitlines() if line.strip().startswith("✗")]
    assert [line.startswith(f"✗ {prompts}:{n}:") for n, line in zip(range(2, 7), listed)] == [True] * 5, listed
    assert "invalid JSON" in listed[0] and "'prompt' must be a string" in listed[1]
    assert listed[5] == "✗ ... and 2 more errors", listed


BAD_MODELS = {
    "html": (200, "text/html", b"<html><body>Please log in</body></html>"),
    "not-json": (200, "application/json", b"{oops"),
    "a-list": (200, "application/json", b"[1, 2]"),
    "no-data": (200, "application/json", b'{"models": ["m"]}'),
}


@pytest.mark.parametrize("reply", sorted(BAD_MODELS))
def test_a_model_listing_that_is_no_listing_is_exit_2_naming_the_server(run_cli, tmp_path, reply):
    """Was JSONDecodeError/AttributeError (exit 3); the batch wrote 0 records."""
    with Stub(models=BAD_MODELS[reply]) as stub:
        single = gen(run_cli, stub, "--regex", "a", "x")
        out = tmp_path / "out.jsonl"
        batch = gen(run_cli, stub, "--regex", "a", "--input", _batch_file(tmp_path, 2), "--output", out)
    for result in (single, batch):
        assert result.exit_code == 2, result.output
        assert f"cannot list the models of vllm at {stub.url}" in result.stderr, result.stderr
        assert "internal error" not in result.output


BAD_REPLIES = {
    "html": ("raw", 200, "text/html", b"<html>gateway</html>"),
    "not-json": ("raw", 200, "application/json", b"not json"),
    "json-string": ("raw", 200, "application/json", b'"hello"'),
    "choices-not-a-list": ("raw", 200, "application/json", b'{"choices": "x"}'),
    "content-not-a-string": ("raw", 200, "application/json", b'{"choices": [{"message": {"content": 5}}]}'),
    "error-with-200": ("raw", 200, "application/json", b'{"error": {"message": "overloaded"}}'),
    # JSON's escape of half a surrogate pair parses, but is no text: writing the record raised (exit 3)
    "lone-surrogate": ("raw", 200, "application/json", b'{"choices": [{"message": {"content": "\\ud800"}}]}'),
    # a body its Content-Encoding does not describe: httpx's DecodingError was exit 3
    "gzip-lie": ("raw", 200, "application/json", b'{"choices": []}', {"content-encoding": "gzip"}),
    "redirect": ("raw", 307, "text/plain", b"", {"location": "/v2/elsewhere"}),
    # json recurses per level: RecursionError, exit 3, and a batch wrote nothing
    "nested-200000": ("raw", 200, "application/json", b"[" * 200_000 + b"]" * 200_000),
    "nested-600": ("raw", 200, "application/json", b'{"choices": ' + b"[" * 600 + b"]" * 600 + b"}"),
}


@pytest.mark.parametrize("reply", sorted(BAD_REPLIES))
def test_a_success_status_with_a_bad_body_is_exit_2_or_an_error_record(run_cli, tmp_path, reply):
    with Stub(answer=lambda b: json.dumps({"n": _line(b)})) as stub:
        stub.script = [BAD_REPLIES[reply]]
        single = gen(run_cli, stub, "--schema", _schema(tmp_path), "--json", "line 0")
    assert single.exit_code == 2 and "internal error" not in single.output, single.output
    assert f"vllm at {stub.url} sent a reply sgcli cannot use" in single.stderr, single.stderr

    with Stub(answer=lambda b: json.dumps({"n": _line(b)})) as stub:
        stub.script = [("ok",), BAD_REPLIES[reply]]  # the first request goes alone, then the bad reply
        out = tmp_path / "out.jsonl"
        args = ["--schema", _schema(tmp_path), "--input", _batch_file(tmp_path, 3), "--output", out]
        batch = gen(run_cli, stub, *args, "--concurrency", "1")
    assert batch.exit_code == 1, batch.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == ["r0", "r1", "r2"] and [r["valid"] for r in records] == [
        True,
        None,
        True,
    ]  # nothing came back: not judged
    assert records[1]["finish_reason"] == "error" and stub.url in records[1]["errors"][0]
    for record in records:
        GenerationRecord.model_validate(record)


def test_an_answer_holding_an_integer_longer_than_python_reads_is_unchecked_and_the_batch_goes_on(run_cli, tmp_path):
    """A 5,000-digit integer as the output: the output check's json.loads raised Python's 4,300-digit
    ValueError, exit 3; in a batch the later lines were never answered and --resume met it again."""
    schema = tmp_path / "int.json"
    schema.write_text('{"type": "integer", "minimum": 0}')
    big = "9" * 5000
    with Stub(answer=lambda b: big if _line(b) == 1 else "7") as stub:
        single = gen(run_cli, stub, "--schema", schema, "--json", "line 1")
        out = tmp_path / "out.jsonl"
        batch = gen(run_cli, stub, "--schema", schema, "--input", _batch_file(tmp_path, 3), "--output", out)
    assert single.exit_code == 0 and "internal error" not in single.output, single.output
    record = json.loads(single.stdout)
    assert record["output"] == big and record["valid"] is None and "5000 digits" in record["unchecked"]
    assert batch.exit_code == 0 and "internal error" not in batch.output, batch.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["id"], r["valid"]) for r in records] == [("r0", True), ("r1", None), ("r2", True)]
    assert records[1]["output"] == big and records[1]["parsed"] is None
    for record in records:
        GenerationRecord.model_validate(record)


DEEP = b"[" * 200_000 + b"]" * 200_000


@pytest.mark.parametrize(
    "step",
    [
        ("raw", 200, "text/event-stream", b"data: " + DEEP + b"\n\n"),
        ("raw", 200, "text/event-stream", b"data: " + DEEP),  # no blank line: read at the stream's end
        ("raw", 400, "application/json", DEEP),  # a rejection's reason
        ("raw", 503, "application/json", DEEP),  # the last failure's reason
    ],
    ids=["event", "event-unended", "rejection", "server-error"],
)
def test_a_reply_nested_past_the_depth_limit_is_exit_2_naming_the_server(run_cli, step):
    """A stream event or an error body 200,000 levels deep: RecursionError, exit 3."""
    with Stub() as stub:
        stub.script = [step]
        result = gen(run_cli, stub, "--regex", "a", "--retries", "0", "x")  # a single prompt without --json streams
    assert result.exit_code == 2 and "internal error" not in result.output, result.output
    assert stub.url in result.stderr, result.stderr
    if step[1] == 200:
        assert "nested more than 512 levels" in result.stderr, result.stderr


def test_a_stream_answered_as_json_is_exit_2(run_cli):
    with Stub() as stub:
        stub.script = [("raw", 200, "application/json", b'{"choices": [{"message": {"content": "a"}}]}')]
        result = gen(run_cli, stub, "--regex", "a", "x")  # a single prompt without --json streams
    assert result.exit_code == 2 and "not an event stream" in result.stderr, result.output


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_compare_backends_on_an_engine_says_a_request_cannot_choose(run_cli, engine):
    result = run_cli("compare-backends", "--engine", engine, "--base-url", "http://127.0.0.1:9", "--regex", "a", "x")
    assert result.exit_code == 2
    assert "a request cannot choose one" in result.stderr


@pytest.mark.parametrize("engine", ["vllm", "sglang", "openai"])
def test_generate_on_an_engine_refuses_a_chosen_backend(run_cli, engine):
    """The request carries no backend: a chosen one was ignored, exit 0, the record saying "server"."""
    args = ("generate", "--engine", engine, "--base-url", "http://127.0.0.1:9", "--schema", '{"type": "integer"}')
    result = run_cli(*args, "--backend", "xgrammar", "x")
    assert result.exit_code == 2, result.output
    assert "a request cannot choose one, so --backend xgrammar would be ignored" in result.stderr
    assert "choose the backend where the server starts" in result.stderr


def test_a_configured_backend_is_noted_not_sent_to_an_engine(run_cli, monkeypatch):
    """SGCLI_BACKEND (or sgcli.toml's backend) is set for local runs: it made every --engine run exit 2
    with a message about a --backend flag the user never gave."""
    monkeypatch.setenv("SGCLI_BACKEND", "xgrammar")
    with Stub(answer=lambda b: "7") as stub:
        result = gen(run_cli, stub, "--schema", '{"type": "integer"}', "--json", "x")
    assert result.exit_code == 0, result.output
    assert "note: SGCLI_BACKEND (xgrammar) is not sent to engine" in result.stderr


def test_compare_backends_engine_still_checks_the_constraint(run_cli):
    result = run_cli("compare-backends", "--engine", "openai", "--base-url", "http://127.0.0.1:9", "--regex", "a", "x")
    assert result.exit_code == 2
    assert "engine 'openai' does not support regex" in result.stderr


def test_ordered_writer_holds_records_until_those_before_are_done():
    import io

    from sgcli.batch.output import OrderedWriter

    sink = io.StringIO()
    writer = OrderedWriter(sink)
    assert writer.put(2, {"id": 2}) == [] and sink.getvalue() == ""
    assert writer.put(0, {"id": 0}) == [{"id": 0}]
    assert [r["id"] for r in writer.put(1, {"id": 1})] == [1, 2]
    assert [json.loads(line)["id"] for line in sink.getvalue().splitlines()] == [0, 1, 2]
    assert writer.written == 3


def test_served_folder_config_names_the_causal_lm_class(tmp_path):
    """A GGUF-converted config has `architectures: null`; a server would then load the bare base model."""
    from sgcli.engine.hf_export import _write_config

    source, target = tmp_path / "src.json", tmp_path / "config.json"
    source.write_text(json.dumps({"model_type": "llama", "architectures": None, "hidden_size": 8}))
    _write_config(source, target)
    written = json.loads(target.read_text())
    assert written["architectures"] == ["LlamaForCausalLM"] and written["hidden_size"] == 8


def test_served_folder_gets_the_tied_embeddings_a_server_would_miss(tmp_path):
    """Saving tied weights keeps only lm_head.weight; the served folder adds the embeddings' name."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    from sgcli.engine.hf_export import _tied_embeddings_shard

    head = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    weights, shard = tmp_path / "model.safetensors", tmp_path / "embed_tokens.safetensors"
    save_file({"lm_head.weight": head, "model.norm.weight": torch.ones(3)}, str(weights))
    _tied_embeddings_shard(weights, shard)
    with safe_open(str(shard), "pt") as f:
        assert list(f.keys()) == ["model.embed_tokens.weight"]
        assert torch.equal(f.get_tensor("model.embed_tokens.weight"), head)
    save_file({"lm_head.weight": head, "model.embed_tokens.weight": head.clone()}, str(weights))
    _tied_embeddings_shard(weights, shard)
    assert not shard.exists()  # both names present: nothing to add


def test_s_is_the_system_prompt_and_schema_takes_inline_json(run_cli):
    """`-s` as llm spells it; `--schema '{...}'` as vLLM's and llm's users write it."""
    bodies = []
    for flag in ("-s", "--system"):
        with Stub(answer=lambda b: "7") as stub:
            result = gen(run_cli, stub, flag, "Answer with a digit.", "--schema", '{"type": "integer"}', "--json", "n?")
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout)["valid"] is True
        bodies.append(stub.requests[-1]["body"])
    assert bodies[0] == bodies[1]
    assert bodies[0]["messages"][0] == {"role": "system", "content": "Answer with a digit."}
    assert bodies[0]["structured_outputs"] == {"json": {"type": "integer"}}


def test_a_record_that_cannot_be_written_stops_the_other_requests_before_the_client_closes(monkeypatch):
    """`put` raising (a full disk) mid-batch: the requests still in flight are cancelled before the HTTP
    client closes, so none fails on a closed client and is logged as an unretrieved task exception."""
    import asyncio

    from sgcli.batch.requests import Request
    from sgcli.errors import UserError
    from sgcli.serving import runner
    from sgcli.serving.client import ClientOptions

    finished, cancelled = [], []

    async def post(job, http, req):
        try:
            await asyncio.sleep(0.01 * int(req.id))
        except asyncio.CancelledError:
            cancelled.append((req.id, http.is_closed))
            raise
        assert not http.is_closed, "a request ran on a closed client"
        finished.append(req.id)
        return {"id": req.id}

    async def resolve(job, http):
        return None

    def put(index, record):
        if index == 2:
            raise UserError("cannot write the output file: No space left on device")

    monkeypatch.setattr(runner, "_post", post)
    monkeypatch.setattr(runner, "_resolve_model", resolve)
    job = runner.EngineJob(
        "openai",
        get_dialect("openai"),
        ConstraintSpec(Kind.REGEX, "a"),
        SamplingParams(),
        ClientOptions("http://127.0.0.1:9", concurrency=8),
    )
    with pytest.raises(UserError, match="No space left"):
        runner.run_batch(job, [Request(i, "x") for i in range(8)], put)
    assert cancelled and set(finished) | {i for i, _ in cancelled} == set(range(8)), (finished, cancelled)
    assert not any(closed for _, closed in cancelled), cancelled  # stopped while the client was open


def test_a_refusal_for_want_of_a_key_names_the_api_key_flag(run_cli):
    with Stub() as stub:
        stub.script = [("status", 401)]
        result = gen(run_cli, stub, "--regex", "a", "--json", "x")
    assert result.exit_code == 2 and "refused the request (HTTP 401)" in result.stderr, result.output
    assert "--api-key-env" in result.stderr


def test_a_redirect_names_where_it_points(run_cli):
    with Stub() as stub:
        stub.script = [BAD_REPLIES["redirect"]]
        result = gen(run_cli, stub, "--regex", "a", "--json", "x")
    assert result.exit_code == 2 and "HTTP 307, a redirect to /v2/elsewhere" in result.stderr, result.output


def test_an_event_whose_data_spans_several_lines_is_read_whole(run_cli):
    """The SSE standard joins an event's `data:` lines with newlines: a JSON object may be split over them."""
    event = json.dumps({"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": "stop"}]}, indent=1)
    body = "".join(f"data: {line}\n" for line in event.splitlines()) + "\ndata: [DONE]\n\n"
    with Stub() as stub:
        stub.script = [("raw", 200, "text/event-stream", body.encode())]
        result = gen(run_cli, stub, "--regex", "a", "x")  # a single prompt without --json streams
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "a"


def test_a_prompt_line_with_a_lone_surrogate_is_that_lines_error_record(run_cli, tmp_path):
    """JSON's "\\ud800" parses into no text a server or tokenizer takes: httpx's encoder raised (exit 3)
    and the lines after it were never answered."""
    batch = tmp_path / "in.jsonl"
    batch.write_text('{"id": 1, "prompt": "a"}\n{"id": 2, "prompt": "b \\ud800"}\n{"id": 3, "prompt": "c"}\n')
    out = tmp_path / "out.jsonl"
    with Stub(answer=lambda b: "a") as stub:
        result = gen(run_cli, stub, "--regex", "a", "--input", batch, "--output", out, "--concurrency", "1")
    assert result.exit_code == 1, result.output
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in records] == [1, "line-2", 3] and [r["valid"] for r in records] == [True, None, True]
    assert "in.jsonl:2" in records[1]["errors"][0] and "lone surrogate" in records[1]["errors"][0]
    assert len(stub.requests) == 2


def test_sigterm_ends_a_single_prompt_like_ctrl_c_and_gives_back_the_lock(tmp_path):
    """A default SIGTERM killed the process (exit 143, no word) and left `OUT.lock` behind, so the next
    run on that output was refused as a concurrent writer."""
    import signal
    import subprocess
    import sys

    out = tmp_path / "single.jsonl"
    with Stub(delay=lambda body: 5.0) as stub:
        child = subprocess.Popen(
            [sys.executable, "-m", "sgcli", "generate", "--engine", "vllm", "--base-url", stub.url, "--regex", "a",
             "--json", "-o", str(out), "hi"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not stub.requests and time.monotonic() < deadline:  # the request is out: the run has started
            time.sleep(0.05)
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=60)
    assert child.returncode == 143, err  # SIGTERM's code, as shells report it (Ctrl-C is 130)
    assert "interrupted" in err and "Traceback" not in err
    assert not Path(f"{out}.lock").exists()


def test_a_servers_answer_past_a_stop_string_is_cut_there():
    """A server that ignored `stop` gave `Paris` past `--stop Par`, reported valid (2026-12-06)."""
    from sgcli.serving.runner import _stopped_at

    assert _stopped_at('{"capital": "Paris"}', ("Par", "cap")) == 2
    assert _stopped_at("Paris", ("xyz",)) is None and _stopped_at("Paris", ()) is None


def test_a_stop_string_that_cut_the_answer_short_is_named(run_cli):
    with Stub(answer=lambda b: "abcd") as stub:
        result = gen(run_cli, stub, "--regex", "abcd", "--stop", "c", "--json", "x")
    record = json.loads(result.stdout)
    assert result.exit_code == 1 and record["output"] == "ab" and record["valid"] is False
    assert any("--stop string 'c' ended the output at character 2" in w for w in record["warnings"])


def _choice(index, text, finish, stream):
    return {
        "index": index,
        "finish_reason": finish,
        **({"delta": {"content": text}} if stream else {"message": {"content": text}}),
    }


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_only_the_choice_sgcli_asked_for_is_read(run_cli, stream):
    """A server that sent a second choice (index 1) beside the one asked for had it concatenated into the
    output (`garbage{"country": ...}`): index 0 is the answer, the others are named in a warning."""
    if stream:
        events = [{"choices": [_choice(1, "garbage", None, True)]}, {"choices": [_choice(0, "a", "stop", True)]}]
        body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        step = ("raw", 200, "text/event-stream", body.encode())
    else:
        reply = {"choices": [_choice(1, "garbage", "length", False), _choice(0, "a", "stop", False)]}
        step = ("raw", 200, "application/json", json.dumps(reply).encode())
    with Stub() as stub:
        stub.script = [step]
        result = gen(run_cli, stub, "--regex", "a", *([] if stream else ["--json"]), "x")
    assert result.exit_code == 0, result.output
    if stream:
        assert result.stdout.strip() == "a"
    else:
        record = json.loads(result.stdout)
        assert record["output"] == "a" and record["finish_reason"] == "stop" and record["valid"] is True
        assert "index 1" in record["warnings"][0] and "only index 0 is read" in record["warnings"][0]


def test_a_reply_without_the_asked_choice_is_exit_2():
    from sgcli.serving.base import BadReply, Call

    dialect = get_dialect("vllm")
    with pytest.raises(BadReply, match=r"no choice with index 0.*\[1\]"):
        dialect.reply(Call("chat", {}), {"choices": [_choice(1, "garbage", "stop", False)]})
    assert dialect.reply(Call("chat", {}), {"choices": [{"message": {"content": "a"}}]}).output == "a"  # no index


@pytest.mark.parametrize(
    "step, stream, says",
    [
        (("raw", 200, "application/json", b'{"choices": [' + b" " * 20_000 + b"]}"), False, "the answer to POST"),
        (("raw", 200, "text/event-stream", b"data: " + b"x" * 20_000), True, "the streamed answer to POST"),
        (("ok",), True, "the streamed answer to POST"),  # a stream of small events that goes on and on
        (("raw", 500, "text/plain", b"e" * 20_000), False, "the answer to POST"),  # an error's body too
    ],
    ids=["body", "one endless line", "many events", "error body"],
)
def test_a_reply_past_the_size_limit_is_a_bad_reply_naming_the_server(run_cli, monkeypatch, step, stream, says):
    """A server sending a 2 GB line grew sgcli to 2.3 GB before it was killed, and one ignoring max_tokens
    wrote 327 MB in 60 s (hostile-input tour, 2026-12-07): every answer is read up to a limit."""
    from sgcli.serving import client

    monkeypatch.setattr(client, "MAX_REPLY_BYTES", 10_000)
    with Stub(answer=lambda b: "7" * 20_000) as stub:
        stub.script = [step]
        args = ["--regex", "[0-9]+", "--retries", "0", "n?"]
        result = gen(run_cli, stub, *(args if stream else ["--json", *args]))
    assert result.exit_code == 2, result.output
    assert f"{says} /v1/chat/completions ran past 10,000 bytes" in result.stderr, result.stderr


def _one_raw_reply(run_cli, tmp_path, body: bytes):
    """A single prompt's run against a server answering `body` (a 200 with JSON): (result, its record)."""
    with Stub() as stub:
        stub.script = [("raw", 200, "application/json", body)]
        result = gen(run_cli, stub, "--schema", _schema(tmp_path), "--json", "x")
    return result, json.loads(result.stdout)


def test_a_count_that_is_no_count_leaves_usage_null_and_keeps_the_answer(run_cli, tmp_path):
    """`"prompt_tokens": "lots"` (or NaN) made an error record of a valid completion, "nothing was generated"."""
    reply = b'{"choices": [{"message": {"content": "{\\"n\\": 1}"}, "finish_reason": "stop"}], '
    reply += b'"usage": {"prompt_tokens": "lots", "completion_tokens": NaN}}'
    result, record = _one_raw_reply(run_cli, tmp_path, reply)
    assert result.exit_code == 0 and record["valid"] is True and record["output"] == '{"n": 1}', result.output
    assert record["usage"]["prompt_tokens"] is None and record["usage"]["completion_tokens"] is None
    said = " ".join(record["warnings"])
    assert "`usage.prompt_tokens` is 'lots', not a count" in said and "NaN or an infinity" in said


def test_no_finish_reason_is_named_as_missing_not_as_the_reason_unknown(run_cli, tmp_path):
    reply = b'{"choices": [{"message": {"content": "{\\"n\\": 1}"}}]}'
    result, record = _one_raw_reply(run_cli, tmp_path, reply)
    assert result.exit_code == 1 and record["finish_reason"] == "error"
    assert "the server sent no finish_reason: its answer may be cut short (8 characters came)" in record["errors"][0]


def test_a_refusal_is_named_not_read_as_a_broken_answer(run_cli, tmp_path):
    """OpenAI's `message.refusal` was dropped: the record said only "output is not JSON"."""
    reply = b'{"choices": [{"message": {"content": null, "refusal": "I cannot help with that."}, '
    reply += b'"finish_reason": "stop"}]}'
    result, record = _one_raw_reply(run_cli, tmp_path, reply)
    assert result.exit_code == 1 and record["finish_reason"] == "error" and record["valid"] is False
    assert record["errors"][0] == "the server's model refused: I cannot help with that."
