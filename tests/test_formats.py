"""The OpenAPI formats sgcli checks beside jsonschema's (sgcli/constraints/formats.py): each one's
meaning, the after-the-fact validation and the decode-time checker agreeing, and schemas that use
them generated from instead of refused."""

from __future__ import annotations

import json
import re

import pytest

from sgcli import config
from sgcli.backends import compile_for
from sgcli.backends.guarantee import guarantee
from sgcli.backends.keyword_coverage import compiled_gaps
from sgcli.backends.matching import feed
from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
from sgcli.errors import UserError
from sgcli.lint.runner import byte_vocab
from sgcli.validation.verdict import schema_errors

CASES = {
    "int8": ([-128, 127, 0, 5.0, "x"], [128, -129, 1.5]),
    "int32": ([2**31 - 1, -(2**31), 7], [2**31, -(2**31) - 1, 0.5]),
    "int64": ([2**63 - 1, -(2**63)], [2**63, -(2**63) - 1]),
    "uint16": ([0, 65535], [-1, 65536]),
    "uint64": ([2**64 - 1], [2**64, -1]),
    "float": ([3.4e38, -1.5, 0], [3.5e38, -1e39]),
    "double": ([1e308, -1e308], []),
    "byte": (["", "YQ==", "YWI=", "YWJj", 5], ["YQ", "abc", "Y===", "YW Jj"]),
    "base64url": (["", "YQ", "YWI", "_-_-", "YQ=="], ["Y", "a+b/", "YWJj="]),
    "binary": (["", "\u0000\u00ff anything"], []),
    "password": (["hunter2"], []),
    "int-or-string": ([3, "3", "50%", 2.0], [1.5, None, [], {}, True]),
    "media-range": (
        ["application/json", "*/*", "text/*", "text/plain; charset=utf-8", 'a/b;q="x \\"y"', 3],
        ["json", "text/", "a/b c", "a b/c"],
    ),
    "iri": (
        ["https://例え.jp/パス?q=値#節", "urn:isbn:0451450523", "http://[::ffff:1.2.3.4]:80/", "http://[v1.fe]/", 4],
        ["/relative", "http://exa mple.com", "http://[1::2::3]/", "http://x/%zz", "", "http://x/\ue000"],
    ),
    # pydantic's names: Base64Bytes, IPvAnyAddress, IPvAnyInterface, IPvAnyNetwork
    "base64": (["", "YQ==", "YWJj"], ["YQ", "a b"]),
    "ipvanyaddress": (["192.0.2.1", "2001:db8::1", 7], ["192.0.2.300", "x", "10.0.0.0/8"]),
    "ipvanyinterface": (["192.0.2.1/24", "2001:db8::1/64", "10.0.0.1"], ["192.0.2.1/33", "x"]),
    "ipvanynetwork": (["10.0.0.0/8", "2001:db8::/32"], ["10.0.0.1/8", "x"]),
    # stricter than jsonschema's own checks, which took `" b @"` (any "@") and `"٣"` (str.isdigit)
    "email": (
        ["a@b.c", "a@b", '"a b"@c.d', "x+y@[192.0.2.1]", "a@[IPv6:2001:db8::1]", 5],
        [" b @", "@.", "cca@", "a..b@c", ".a@b", "a@b.", "a@[1.2.3]", "é@é.com"],
    ),
    "idn-email": (["é@é.com", "a@b.c", "用户@例子.广告"], [" b @", "@", "a@b..c"]),
    "relative-json-pointer": (["0", "100", "5504", "104#", "1/a~0/b"], ["٣", "²", "01", "1#x", "-1", "/a"]),
    "iri-reference": (
        ["", "../x", "#節", "//host/p?\ue000", "https://例え.jp/"],
        ["a b", "http://[::zz]/", "%4", "x/\ue000"],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_each_format_means_what_the_registry_says(name):
    good, bad = CASES[name]
    for value in good:
        assert schema_errors({"format": name}, value) == [], (name, value)
    for value in bad:
        assert schema_errors({"format": name}, value), (name, value)


def test_jsonschema_keeps_its_own_formats():
    assert schema_errors({"format": "date"}, "2026-12-04") == []
    assert schema_errors({"format": "date"}, "2026-13-04")
    assert schema_errors({"format": "x-made-up"}, "anything") == []  # unknown: an annotation, as before


def test_a_format_a_later_draft_defines_is_checked_in_an_older_drafts_schema():
    """OpenAPI 3.0's own schema is draft-04 and says `format: uri-reference`, a draft-06 format: it was
    unknown there, so nothing enforced it and the schema was refused; it means the same in any draft."""
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "string", "format": "uri-reference"}
    assert schema_errors(draft4, "../a#b") == []
    assert schema_errors(draft4, "a b")
    vocab = byte_vocab()
    compiled = compile_for("auto", ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(draft4), "o.json"), vocab)[0]
    assert guarantee(compiled).unenforced == []
    assert feed(compiled, vocab.encode('"../a#b"')).accepted and not feed(compiled, vocab.encode('"a b"')).accepted


def test_an_openapi_schema_is_generated_from_not_refused_and_the_checker_holds_its_formats():
    """Before, `format: int32` was a keyword nothing enforced: exit 2 unless --allow-unenforced."""
    schema = {
        "type": "object",
        "properties": {
            "replicas": {"type": "integer", "format": "int32"},
            "port": {"format": "int-or-string", "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "data": {"type": "string", "format": "byte"},
        },
        "required": ["replicas", "port", "data"],
        "additionalProperties": False,
    }
    vocab = byte_vocab()
    for backend in ("auto", "llguidance", "xgrammar"):
        compiled = compile_for(backend, ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "k.json"), vocab)[0]
        kept = guarantee(compiled)  # no exit 2: the checker takes every format the grammar leaves
        assert kept.unenforced == [] and all(g.checker for g in compiled_gaps(compiled)), backend
        for text, valid in (
            ('{"replicas":2147483647,"port":"http","data":"YWJj"}', True),
            ('{"replicas":2147483648,"port":"http","data":"YWJj"}', False),
            ('{"replicas":1,"port":8080,"data":"YWJ"}', False),
            ('{"replicas":1,"port":8080,"data":""}', True),
        ):
            assert feed(compiled, vocab.encode(text)).accepted == valid, (backend, text)
            assert (schema_errors(schema, json.loads(text)) == []) == valid, text


def test_iri_agrees_with_jsonschemas_uri_checker_on_ascii():
    """An IRI is a URI with non-ASCII characters allowed: on ASCII text sgcli's RFC 3987 regex must agree
    with the RFC 3986 checker jsonschema uses for `uri` and `uri-reference` (rfc3986-validator)."""
    import random

    from rfc3986_validator import validate_rfc3986

    from sgcli.constraints.formats import EXTRA

    rng = random.Random(7)
    alphabet = "ab:/?#[]@!$&'()*+,;=%-._~1 AF"
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert EXTRA["iri"](text) == bool(validate_rfc3986(text, rule="URI")), text
        assert EXTRA["iri-reference"](text) == bool(validate_rfc3986(text, rule="URI_reference")), text
    for literal in ("[::1]", "[1:2:3:4:5:6:7:8]", "[::ffff:1.2.3.4]", "[1::2::3]", "[::zz]", "[v7.a:b]"):
        text = f"http://{literal}/p"
        assert EXTRA["iri"](text) == bool(validate_rfc3986(text, rule="URI")), text


def test_every_format_a_backend_calls_exact_is_exact():
    """A backend's grammar that takes `2023-02-30` as a date (xgrammar), second 60 in a time (xgrammar and
    llguidance) or writes non-JSON for an email (outlines-core) must leave that format to sgcli's checker:
    random walks of each bare grammar and edge values, judged by jsonschema (benchmarks/format_edges.py)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from format_edges import format_edges, undeclared

    for backend in ("llguidance", "xgrammar", "outlines_core"):
        rows = format_edges(backend, walks=40)
        assert rows and not [row for row in rows if "error" in row or undeclared(row)], backend


def test_an_approximated_format_is_enforced_by_the_checker():
    schema = {"type": "object", "properties": {"d": {"type": "string", "format": "date"}}, "required": ["d"]}
    vocab = byte_vocab()
    for backend in ("llguidance", "xgrammar", "outlines_core"):
        spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "d.json").for_generation()  # as generate does
        compiled = compile_for(backend, spec, vocab)[0]
        assert [(g.pointer, g.checker) for g in compiled_gaps(compiled)] == [("/properties/d/format", True)], backend
        assert feed(compiled, vocab.encode('{"d":"2024-02-29"}')).accepted, backend
        for bad in ('{"d":"2023-02-30"}', '{"d":"2023-02-29"}'):
            assert not feed(compiled, vocab.encode(bad)).accepted, (backend, bad)


PATHS = {
    "type": "object",
    "properties": {"path": {"type": "string", "format": "path", "maxLength": 12}},
    "required": ["path"],
    "additionalProperties": False,
}


@pytest.fixture
def path_format():
    """`--format path=^[a-z]+(/[a-z]+)*$` for the test, then no user formats again."""
    from sgcli.constraints.formats import current_user_formats, parse_user_format, set_user_formats

    before = current_user_formats()
    set_user_formats((parse_user_format("path=^[a-z]+(/[a-z]+)*$"),))
    yield
    set_user_formats(before)


def test_a_format_no_one_defines_is_refused_and_names_the_flag_that_defines_it():
    """Angular's and Nest's schematics say `"format": "path"`: no checker knows it, so nothing would
    enforce it; the refusal says how to define it."""
    vocab = byte_vocab()
    compiled = compile_for("auto", ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(PATHS), "p.json"), vocab)[0]
    with pytest.raises(UserError) as refused:
        guarantee(compiled)
    assert "`format` at /properties/path/format" in str(refused.value)
    assert "no checker knows format 'path' (define it: --format path=REGEX)" in str(refused.value)


@pytest.mark.parametrize("backend", ["auto", "llguidance", "xgrammar"])
def test_a_user_defined_format_is_enforced_by_the_checker_and_judged_by_validation(path_format, backend):
    vocab = byte_vocab()
    compiled = compile_for(backend, ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(PATHS), "p.json"), vocab)[0]
    assert guarantee(compiled).unenforced == []
    for text, valid in (('{"path":"a/bc"}', True), ('{"path":"a//b"}', False), ('{"path":"A"}', False)):
        assert feed(compiled, vocab.encode(text)).accepted == valid, (backend, text)
        assert (schema_errors(PATHS, json.loads(text)) == []) == valid, text


def test_generation_under_a_user_format_gives_only_valid_outputs(path_format, tiny_lm, smol_tokenizer):
    """The random model tries every string the grammar allows; the checker keeps those of the format."""
    from helpers import generate_with

    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(PATHS), "p.json", json_options=JsonOptions(whitespace="compact"))
    finished = 0
    for seed in range(6):
        record = generate_with(tiny_lm, smol_tokenizer, spec, seed=seed, max_tokens=60)
        if record["finish_reason"] == "stop":
            finished += 1
            value = json.loads(record["output"])["path"]  # `$` is Python's: before a final "\n" too, as in `pattern`
            assert record["valid"] and re.search(r"^[a-z]+(/[a-z]+)*$", value) and len(value) <= 12
        else:  # a dead end of the checker is never called valid
            assert record["valid"] is False
    assert finished


def test_a_user_format_inside_a_grammar_says_the_flag_stops_there(path_format):
    """--format is read by sgcli's checker, which follows a --schema output only: in a `%json` schema
    the refusal says so and what does reach the grammar (a `pattern`), where it said only the former."""
    from sgcli.backends.keyword_coverage import schema_gaps

    schema = {"type": "string", "format": "path"}
    spec = ConstraintSpec(Kind.LARK, f'start: "p=" %json {json.dumps(schema)}\n', "p.lark")
    (gap,) = schema_gaps(spec, "xgrammar")
    assert (gap.pointer, gap.checker) == ("/format", False)
    assert "--format path=REGEX does not reach it" in gap.why_not_checked
    assert "`pattern`" in gap.why_not_checked


@pytest.mark.parametrize(
    "value, says",
    [
        ("path", "expected NAME=REGEX"),
        ("json", "for the output's format: --output-format json"),  # the flag mistaken for --output-format
        ("email=.", "already has its standard meaning"),
        ("path=(a", "does not compile at column 1"),
    ],
)
def test_a_bad_format_definition_is_exit_2_before_anything_compiles(run_cli, tmp_path, value, says):
    schema = tmp_path / "p.json"
    schema.write_text(json.dumps(PATHS))
    result = run_cli("compile", str(schema), "--format", value)
    assert result.exit_code == 2 and says in " ".join(result.output.replace("│", " ").split()), result.output


@pytest.fixture
def fresh_config():
    config.reset()
    yield
    config.reset()  # the next test reads its own


def test_the_flag_and_the_config_file_define_a_format_for_compile(run_cli, tmp_path, monkeypatch, fresh_config):
    schema = tmp_path / "p.json"
    schema.write_text(json.dumps(PATHS))
    monkeypatch.chdir(tmp_path)
    refused = run_cli("compile", str(schema), "--backend", "llguidance")
    assert refused.exit_code == 2 and "--format path=REGEX" in refused.output
    assert run_cli("compile", str(schema), "--backend", "llguidance", "--format", "path=^[a-z/]+$").exit_code == 0
    (tmp_path / "sgcli.toml").write_text('format = ["path=^[a-z/]+$"]\n')
    config.reset()  # read once a process: read again
    from_file = run_cli("compile", str(schema), "--backend", "llguidance")
    assert from_file.exit_code == 0, from_file.output
    (tmp_path / "sgcli.toml").write_text('format = ["path=a", "path=b"]\n')
    config.reset()
    twice = run_cli("compile", str(schema), "--backend", "llguidance")
    assert twice.exit_code == 2 and "more than once" in twice.output


def test_a_keyword_inside_a_warned_subschema_is_one_gap_not_two():
    """llguidance warns about a `oneOf` (the checker takes it whole), and the unknown format inside a
    branch was a declared gap too: lint printed two J005 at one position, the refusal listed it twice."""
    schema = {
        "properties": {"p": {"oneOf": [{"type": "string", "maxLength": 3}, {"type": "string", "format": "x-no"}]}}
    }
    compiled = compile_for("llguidance", ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "o.json"), byte_vocab())[
        0
    ]
    pointers = [g.pointer for g in compiled_gaps(compiled)]
    assert "/properties/p/oneOf/1/format" in pointers and len(pointers) == len(set(pointers)), pointers


def test_a_user_defined_format_gets_no_unknown_format_warning(run_cli, tmp_path, fresh_config):
    """llguidance's `Unknown format: path` was printed though --format defined it: only the note stays."""
    schema = tmp_path / "p.json"
    schema.write_text(json.dumps(PATHS))
    result = run_cli("compile", str(schema), "--backend", "llguidance", "--format", "path=^[a-z/]+$")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "Unknown format" not in text
    assert "sgcli's schema checker enforces `format`" in text


EMAIL = {
    "type": "object",
    "properties": {"email": {"type": "string", "format": "email", "maxLength": 20}},
    "required": ["email"],
    "additionalProperties": False,
}


def test_the_checker_leaves_an_email_room_for_its_at_sign_within_max_length():
    """xgrammar drops maxLength beside format: its grammar wrote 20 characters with no `@`, and the checker
    refused only the closing quote, past any repair ("backtracking gave up after 64 undone tokens")."""
    vocab = byte_vocab()
    compiled = compile_for("xgrammar", ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(EMAIL), "e.json"), vocab)[0]

    def takes_all(text: str) -> bool:
        ids = vocab.encode(text)
        return feed(compiled, ids).taken == len(ids)

    assert not takes_all('{"email":"' + "a" * 19)  # no room left for `@` and a domain
    assert takes_all('{"email":"' + "a" * 18) and takes_all('{"email":"' + "a" * 18 + "@")
    assert not takes_all('{"email":"' + "a" * 18 + "@b@")
    assert feed(compiled, vocab.encode('{"email":"' + "a" * 18 + "@b" + '"}')).accepted


def test_generation_of_an_email_under_max_length_on_xgrammar_ends_valid(tiny_lm, smol_tokenizer):
    from helpers import generate_with

    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(EMAIL), "e.json", json_options=JsonOptions(whitespace="compact"))
    for seed in range(4):
        record = generate_with(tiny_lm, smol_tokenizer, spec, "xgrammar", seed=seed, max_tokens=100)
        assert record["finish_reason"] == "stop" and record["valid"], (seed, record["output"], record["errors"])


def test_a_length_dropped_beside_another_format_says_generation_may_dead_end_and_names_llguidance():
    uri = {"type": "string", "format": "uri", "maxLength": 20}
    compiled = compile_for("xgrammar", ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(uri), "u.json"), byte_vocab())[0]
    (gap,) = [g for g in compiled_gaps(compiled) if g.keyword == "maxLength"]
    assert "dead end" in gap.reason and "llguidance" in gap.reason, gap.reason
