"""Every input is hostile: bad flags, paths, library names, nesting and references are exit 2 naming the fix,
before anything slow loads; never a traceback or exit 3."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import patch_everywhere

from sgcli.constraints.spec import MAX_DEPTH, MAX_JSON_DEPTH

ROOT = Path(__file__).resolve().parent.parent
CAPITAL = ROOT / "examples" / "capital.json"


@pytest.fixture
def no_model(monkeypatch):
    """Loading a model or tokenizer fails the test: every case here must be refused before that."""

    def boom(*args, **kwargs):
        raise AssertionError("a model or tokenizer was loaded before the bad input was refused")

    import sgcli.engine.loader
    import sgcli.tokenizers

    patch_everywhere(monkeypatch, sgcli.engine.loader, "load_model", boom)
    patch_everywhere(monkeypatch, sgcli.tokenizers, "load_tokenizer", boom)


def _refused(result, *needles: str) -> str:
    text = result.output
    assert result.exit_code == 2, text
    assert "internal error" not in text and "Traceback" not in text, text
    for needle in needles:
        assert needle in text, (needle, text)
    return text


@pytest.mark.parametrize(
    ("flags", "needles"),
    [
        (["--temperature", "nan"], ["--temperature nan is out of range", "from 0 (greedy)"]),
        (["--temperature", "inf"], ["--temperature inf is out of range"]),
        (["--temperature", "1e308"], ["out of range"]),
        (["--temperature", "-1"], ["out of range"]),
        (["--top-p", "nan"], ["--top-p nan is out of range", "(0, 1]"]),
        (["--top-k", "-3"], ["--top-k -3 is negative", "0 (off)"]),
        (["--seed", str(10**20)], ["--seed 100000000000000000000 is out of range", "18446744073709551615"]),
        (["--seed", "-1"], ["out of range"]),
        (["--max-tokens", "0"], ["at least 1"]),
        (["--device", "tpu"], ["'tpu' is not one of", "cuda:N"]),
        (["--grammar", "@../examples/capital"], ["not a library grammar name", "@json"]),
        (["--grammar", "@../../x"], ["not a library grammar name"]),
        (["--grammar", "@*"], ["not a library grammar name"]),
        (["--grammar", "@nope"], ["no grammar named @nope", "available"]),
        # json.loads recursed past Python's limit: exit 3 (hostile-input tour, 2026-12-07)
        (["--chat-template-kwargs", '{"a":' * 3000 + "1" + "}" * 3000], ["--chat-template-kwargs: JSON nested"]),
        (["--device-map", '{"a":' * 3000 + "1" + "}" * 3000], ["--device-map: JSON nested more than 512"]),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) and v and v[0].startswith("-") else None,
)
def test_bad_flag_values_exit_2_before_loading(run_cli, no_model, flags, needles):
    constraint = [] if "--grammar" in flags else ["--schema", CAPITAL]
    _refused(run_cli("generate", *constraint, *flags, "hi"), *needles)


def test_cuda_device_that_does_not_exist(run_cli, no_model):
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    text = _refused(run_cli("generate", "--schema", CAPITAL, "--device", f"cuda:{count + 7}", "hi"))
    assert ("no CUDA device" in text) if count == 0 else (f"has {count} CUDA device" in text)


def test_compare_backends_checks_sampling_flags_too(run_cli, no_model):
    _refused(run_cli("compare-backends", "--schema", CAPITAL, "--temperature", "nan", "hi"), "out of range")


@pytest.mark.parametrize(
    ("target", "needle"),
    [("/nonexistent/dir/x.jsonl", "does not exist"), ("DIR", "is a directory")]
    + ([("/dev/full", "No space left on device")] if os.path.exists("/dev/full") else []),
)
def test_bad_output_path_exit_2_before_loading(run_cli, no_model, tmp_path, target, needle):
    target = str(tmp_path) if target == "DIR" else target
    _refused(run_cli("generate", "--schema", CAPITAL, "-o", target, "hi"), needle, "--output" if needle != "No" else "")


def test_unwritable_output_exit_2(run_cli, no_model, tmp_path):
    if os.geteuid() == 0:  # root writes into a read-only folder, but not into /proc
        _refused(run_cli("generate", "--schema", CAPITAL, "-o", "/proc/sgcli-x.jsonl", "hi"), "cannot create files")
        return
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    _refused(run_cli("generate", "--schema", CAPITAL, "-o", folder / "x.jsonl", "hi"), "cannot create files")


def test_resume_needs_a_batch_and_an_output(run_cli, no_model, tmp_path):
    _refused(run_cli("generate", "--schema", CAPITAL, "--resume", "-o", tmp_path / "o.jsonl", "hi"), "--resume")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": 1, "prompt": "x"}\n')
    _refused(run_cli("generate", "--schema", CAPITAL, "--resume", "--input", prompts), "--resume needs --output")


def test_an_existing_output_is_refused_before_loading(run_cli, no_model, tmp_path):
    out = tmp_path / "o.jsonl"
    out.write_text('{"id": 1}\n')
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": 1, "prompt": "x"}\n')
    _refused(run_cli("generate", "--schema", CAPITAL, "--input", prompts, "-o", out), "already holds", "--force")
    single = run_cli("generate", "--schema", CAPITAL, "-o", out, "hi")  # a single prompt too, where --resume is
    _refused(single, "already holds", "pass --force")  # refused: the hint named it
    assert "--resume" not in single.stderr
    _refused(run_cli("generate", "--schema", CAPITAL, "--force", "hi"), "--force needs --output")
    assert out.read_text() == '{"id": 1}\n'


def _bounded_run(*args: str) -> subprocess.CompletedProcess:
    """`sgcli ARGS` in a child with a 2 GB address-space ceiling and a time limit: a read that is not
    bounded fails the test (MemoryError, or the timeout) instead of taking the machine's memory."""
    import resource

    def ceiling():
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "sgcli", *args], env=env, capture_output=True, text=True, timeout=60, preexec_fn=ceiling
    )


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["lint", "--schema", "/dev/zero"], ["/dev/zero: JSON Schema file is over the limit of 1,048,576 bytes"]),
        (["generate", "--ebnf", "/dev/zero", "hi"], ["over the limit of 1,048,576 bytes", "--max-constraint-bytes"]),
        (
            ["generate", "--regex", "a", "--input", "/dev/zero", "-o", "OUT"],
            ["/dev/zero:1: this line of the input file is over the limit of 4,194,304 bytes", "--max-prompt-bytes"],
        ),
    ],
    ids=["lint", "generate-ebnf", "generate-input"],
)
def test_dev_zero_is_refused_fast_naming_the_limit(tmp_path, args, needles):
    out = tmp_path / "x.jsonl"
    start = time.monotonic()
    done = _bounded_run(*[str(out) if a == "OUT" else a for a in args])
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    for needle in needles:
        assert needle in done.stderr, (needle, done.stderr)
    assert time.monotonic() - start < 30 and not out.exists()


def test_stdin_is_bounded_too(run_cli, no_model):
    schema = '{"type": "string"}' + " " * 200
    _refused(
        run_cli("generate", "--schema", "-", "--max-constraint-bytes", "100", "hi", input=schema),
        "<stdin>: JSON Schema file is over the limit of 100 bytes",
        "--max-constraint-bytes",
    )
    _refused(
        run_cli("generate", "--regex", "a", "--max-prompt-bytes", "10", "-", input="x" * 11),
        "<stdin>: prompt is over the limit of 10 bytes",
        "--max-prompt-bytes or SGCLI_MAX_PROMPT_BYTES",
    )


def test_an_input_without_a_newline_in_reach_is_exit_2_at_its_line(run_cli, no_model, tmp_path, monkeypatch):
    """A line over the limit gets an error record (tests/test_batch_records.py); one whose newline is not
    within 64 MiB past it (a file that is one line, /dev/zero) is exit 2 before the model loads."""
    import sgcli.constraints.reading

    monkeypatch.setattr(sgcli.constraints.reading, "SKIP_BYTES", 200)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": 1, "prompt": "short"}\n{"id": 2, "prompt": "' + "x" * 1000 + '"}\n')
    args = ("generate", "--regex", "a", "--input", prompts, "-o", tmp_path / "o.jsonl")
    _refused(run_cli(*args, "--max-prompt-bytes", "64"), f"{prompts}:2: this line", "64 bytes", "--max-prompt-bytes")
    monkeypatch.setenv("SGCLI_MAX_PROMPT_BYTES", "50")
    _refused(run_cli(*args), f"{prompts}:2:", "over the limit of 50 bytes")
    _refused(run_cli(*args, "--max-prompt-bytes", "-1"), "must not be negative")


def _deep_items(depth: int) -> dict:
    schema: dict = {"type": "integer"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


@pytest.fixture
def deep_schema(tmp_path) -> Path:
    path = tmp_path / "deep.json"
    depth = 1500  # past json.loads' (and json.dumps') own recursion limit too
    path.write_text('{"type": "array", "items": ' * depth + '{"type": "integer"}' + "}" * depth)
    return path


@pytest.mark.parametrize(
    "command",
    [
        ["generate", "--schema", "{f}", "hi"],
        ["compile", "{f}"],
        ["masks", "{f}", "--text", "[]"],
        ["compare-backends", "--schema", "{f}", "--no-generate"],
    ],
    ids=lambda c: c[0],
)
def test_deep_nesting_is_refused_naming_the_limit(run_cli, no_model, deep_schema, command):
    args = [str(deep_schema) if a == "{f}" else a for a in command]
    _refused(run_cli(*args), f"more than {MAX_JSON_DEPTH} levels", "$defs", "deep.json:1:")


def test_deep_nesting_in_lint_is_a_located_finding(run_cli, deep_schema):
    result = run_cli("lint", deep_schema)
    assert result.exit_code == 1 and "internal error" not in result.output, result.output
    text = deep_schema.read_text()
    col = [i for i, ch in enumerate(text) if ch == "{"][MAX_JSON_DEPTH] + 1  # the bracket opening level limit+1
    assert f"deep.json:1:{col}: S003" in result.output
    assert f"more than {MAX_JSON_DEPTH} levels" in result.output


def _deep_properties(depth: int) -> dict:
    schema: dict = {"type": "integer"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


@pytest.mark.parametrize(
    "schema",
    [_deep_properties(200), _deep_items(MAX_JSON_DEPTH - 1)],  # 401 JSON levels; exactly the limit
    ids=["200-level-properties", "items-at-the-limit"],
)
def test_deep_valid_schemas_are_read_and_meta_validated(run_cli, tmp_path, schema):
    """jsonschema's meta-validation recurses ~10 frames a level: it runs with room for that."""
    path = tmp_path / "deep_ok.json"
    path.write_text(json.dumps(schema))
    result = run_cli("lint", "--select", "S003", path)
    assert result.exit_code == 0 and "S003" not in result.output, result.output


@pytest.mark.parametrize("ref", ["#/$defs/nope", "#no-such-anchor"])
def test_dangling_local_ref_is_exit_2_at_its_line_and_column(run_cli, no_model, tmp_path, ref):
    path = tmp_path / "s.json"
    lines = [
        "{",
        '  "$defs": {"b": {"type": "integer"}},',
        '  "properties": {',
        f'    "a": {{"$ref": "{ref}"}}',
        "  }",
        "}",
    ]
    path.write_text("\n".join(lines))
    _refused(run_cli("generate", "--schema", path, "hi"), f"s.json:4:19: $ref '{ref}' does not resolve", "after '#'")


@pytest.mark.parametrize(
    "ref, says, hint",
    [
        ("https://example.com/thing.json", "points outside this file", "'#/$defs/NAME'"),
        ("other.json#/$defs/a", "names the file", "does not exist"),  # read from beside the schema: not there
    ],
)
def test_remote_ref_is_exit_2_naming_it(run_cli, no_model, tmp_path, ref, says, hint):
    """Nothing fetches it, so no backend could enforce it and no check could judge it (was: exit 0, valid null)."""
    path = tmp_path / "remote.json"
    path.write_text('{"type": "object",\n "properties": {"a": {"$ref": ' + json.dumps(ref) + "}}}")
    for command in (["compile", path], ["generate", "--schema", path, "hi"]):
        _refused(run_cli(*command), f"remote.json:2:31: $ref '{ref}' {says}", hint)


SUBSCHEMA_REFS = {  # what the `referencing` library raised TypeError/AttributeError on (exit 3)
    "pointer-into-true": {"$ref": "#/definitions/x/properties", "definitions": {"x": True}},
    "pointer-into-false-items": {"$ref": "#/$defs/x/items/0", "$defs": {"x": {"items": False}}},
}


@pytest.mark.parametrize("name", sorted(SUBSCHEMA_REFS))
def test_pointer_into_a_boolean_subschema_is_exit_2(run_cli, no_model, tmp_path, name):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(SUBSCHEMA_REFS[name]))
    _refused(run_cli("compile", path), f"$ref '{SUBSCHEMA_REFS[name]['$ref']}' does not resolve")


@pytest.mark.parametrize(
    "schema",
    [
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "properties": {"a": True, "b": False, "c": {"$ref": "#/definitions/t"}},
            "definitions": {"t": True},
        },
        {"$schema": "http://json-schema.org/draft-04/schema#", "dependencies": {"a": ["b"], "c": {"required": ["d"]}}},
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "definitions": {"n": {"id": "#num", "type": "integer"}},
            "properties": {"n": {"$ref": "#num"}},
        },
        {
            "$id": "https://example.com/root.json",
            "$defs": {"i": {"$id": "item.json", "$defs": {"z": {"type": "string"}}}},
            "properties": {"a": {"$ref": "item.json#/$defs/z"}},
        },
        {"$id": "urn:example:root", "$defs": {"a": {"type": "string"}}, "properties": {"a": {"$ref": "#/$defs/a"}}},
        {
            "$dynamicAnchor": "node",
            "type": "object",
            "properties": {"kids": {"type": "array", "items": {"$dynamicRef": "#node"}}},
        },
        {
            "$schema": "https://json-schema.org/draft/2019-09/schema",
            "$recursiveAnchor": True,
            "type": "object",
            "properties": {"kids": {"items": {"$recursiveRef": "#"}}},
        },
        {"type": "object", "properties": {"next": {"$ref": "#"}}},  # recursion through a property is fine
        {"$schema": "https://example.com/an-unknown-draft", "type": "integer"},
    ],
    ids=[
        "booleans",
        "draft4-dependencies",
        "draft4-id-anchor",
        "id-relative",
        "urn-base",
        "dynamicRef",
        "recursiveRef",
        "recursive",
        "unknown-draft",
    ],
)
def test_real_world_reference_shapes_are_read(schema):
    from sgcli.constraints.schema_input import check_schema
    from sgcli.constraints.spec import ConstraintSpec, Kind

    check_schema(ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "s.json"))  # no exception


@pytest.mark.parametrize(
    ("schema", "chain"),
    [
        (
            {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
            "'#/$defs/b' -> '#/$defs/a' -> '#/$defs/b'",
        ),
        ({"$ref": "#"}, "'#' -> '#'"),
        ({"anyOf": [{"type": "string"}, {"allOf": [{"$ref": "#"}]}]}, "'#' -> '#'"),
    ],
    ids=["two-defs", "root-to-itself", "through-anyOf"],
)
def test_ref_cycle_without_a_value_is_exit_2(run_cli, no_model, tmp_path, schema, chain):
    """llguidance compiled these to the empty string (exit 1 at generation); jsonschema recurses forever."""
    path = tmp_path / "cycle.json"
    path.write_text(json.dumps(schema))
    for command in (["compile", path], ["generate", "--schema", path, "hi"]):
        _refused(run_cli(*command), f"$ref cycle {chain}", "through a property or an array item")


def test_refs_by_id_anchor_and_absolute_uri_resolve(run_cli, tmp_path):
    schema = {
        "$id": "https://example.com/root.json",
        "$defs": {"item": {"$id": "item.json", "type": "integer"}, "x": {"$anchor": "xa", "type": "string"}},
        "properties": {
            "a": {"$ref": "item.json"},
            "b": {"$ref": "#xa"},
            "c": {"$ref": "https://example.com/root.json#/$defs/x"},
            "$ref": {"type": "string"},  # a property named $ref is not a reference
        },
        "enum": [{"$ref": "nothing"}],  # nor is data inside enum
    }
    path = tmp_path / "ids.json"
    path.write_text(json.dumps(schema))
    result = run_cli("compile", "-b", "llguidance", path)
    assert result.exit_code == 0, result.output


def test_lint_never_says_all_passed_after_a_read_error(run_cli, tmp_path):
    result = run_cli("lint", tmp_path / "missing.json")
    assert result.exit_code == 2
    assert "All checks passed" not in result.output
    assert "1 file could not be linted" in result.output


def test_non_utf8_input_line_rejects_only_that_line():
    from sgcli.batch.requests import BadLine, read_requests

    data = b'{"id": 1, "prompt": "a"}\n{"id": 2, "prompt": "caf\xe9"}\n{"id": 3, "prompt": "c"}\n'
    items = list(read_requests(data, "p.jsonl"))
    assert [type(i).__name__ for i in items] == ["Request", "BadLine", "Request"]
    bad = items[1]
    assert isinstance(bad, BadLine) and str(bad.location) == "p.jsonl:2:25" and "not UTF-8" in bad.message


def test_duplicate_ids_are_found():
    from sgcli.batch.requests import duplicate_ids, read_requests

    data = b'{"id": 1, "prompt": "a"}\n{"id": "1", "prompt": "b"}\n{"id": 1, "prompt": "c"}\n{"prompt": "d"}\n'
    assert duplicate_ids(list(read_requests(data, "p"))) == [1]


def test_deeply_nested_input_line_is_one_bad_line():
    from sgcli.batch.requests import BadLine, read_requests

    data = b'{"id": 1, "prompt": "a"}\n' + b"[" * 100000 + b"\n"
    items = list(read_requests(data, "p"))
    assert isinstance(items[1], BadLine) and "too deeply" in items[1].message


def test_offline_hub_fails_fast_naming_the_fix(run_cli, monkeypatch, tmp_path):
    from sgcli.models import hub

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    hub.offline.cache_clear()
    try:
        result = run_cli("generate", "-m", "someorg/not-cached", "--regex", "a", "hi")
    finally:
        hub.offline.cache_clear()
    # the user's own setting is named, not an unreachable hub (the probe never ran)
    _refused(result, "HF_HUB_OFFLINE is set", "'someorg/not-cached' has no tokenizer.json", "unset HF_HUB_OFFLINE")


def test_unreachable_hub_is_detected_by_a_short_probe(monkeypatch):
    from sgcli.models import hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for var in hub._PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "https://127.0.0.1:9")  # the discard port: nothing listens
    hub.offline.cache_clear()
    try:
        assert hub.offline() and hub.hub_options() == {"local_files_only": True}
        assert "the Hugging Face hub is not reachable" in hub.offline_error("a/b", "tokenizer.json").message
    finally:
        hub.offline.cache_clear()


DEEP_GRAMMARS = {
    "deep.regex": "({open}a{close})",
    "deep.gbnf": 'root ::= {open}"a"{close}\n',
    "deep.lark": 'start: {open}"a"{close}\n',
}


@pytest.mark.parametrize("name", sorted(DEEP_GRAMMARS))
def test_deeply_nested_grammars_are_refused_naming_the_limit(run_cli, no_model, tmp_path, name):
    n = 3000
    path = tmp_path / name
    path.write_text(DEEP_GRAMMARS[name].format(open="(" * n, close=")" * n))
    _refused(run_cli("compile", path), f"nested more than {MAX_DEPTH} groups deep", "rules")
    lint = run_cli("lint", path)
    assert lint.exit_code == 1 and "internal error" not in lint.output and "S004" in lint.output, lint.output


@pytest.mark.parametrize("name", sorted(DEEP_GRAMMARS))
def test_grammars_nested_to_the_limit_lint_cleanly(run_cli, tmp_path, name):
    path = tmp_path / name
    path.write_text(DEEP_GRAMMARS[name].format(open="(" * (MAX_DEPTH - 1), close=")" * (MAX_DEPTH - 1)))
    result = run_cli("lint", "-b", "xgrammar", path)
    assert result.exit_code == 0, result.output


def test_deep_regex_flag_is_refused(run_cli, no_model):
    _refused(run_cli("generate", "--regex", "(" * 500 + "a" + ")" * 500, "hi"), "--regex:1:", "groups deep")


@pytest.mark.parametrize("bad", [["--temperature", "nan"], ["-o", "/nonexistent/dir/x"], ["--top-k", "-1"]])
def test_bad_flags_are_refused_without_importing_torch(bad):
    """Refusing a flag takes the time of `--help`, not of importing torch (~10 s on a busy machine)."""
    import subprocess
    import sys

    code = (
        "import runpy, sys\n"
        f"sys.argv = ['sgcli', 'generate', '--schema', {str(CAPITAL)!r}, *{bad!r}, 'hi']\n"
        "try:\n    runpy.run_module('sgcli', run_name='__main__')\n"
        "except SystemExit as exc:\n    print('exit', exc.code, 'torch' in sys.modules)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.stdout.strip().splitlines()[-1] == "exit 2 False", (done.stdout, done.stderr)


def test_if_then_else_probe_resolves_refs_against_the_root():
    """The ui5.yaml shape: a `$ref` to `#/properties/...` inside a nested `then` (was PointerToNowhere, exit 3)."""
    from sgcli.lint.schema_probes import keyword_probes

    schema = {
        "type": "object",
        "properties": {
            "framework": {"type": "object", "properties": {"name": {"enum": ["SAPUI5", "OpenUI5"]}}},
            "config": {
                "type": "object",
                "properties": {"type": {"enum": ["application", "library"]}},
                "if": {"properties": {"type": {"const": "application"}}},
                "then": {"properties": {"builder": {"$ref": "#/properties/framework"}}},
                "else": {"properties": {"builder": {"type": "string"}}},
            },
        },
    }
    _, probes = keyword_probes(schema)
    probed = {p.path for p in probes}
    assert ("properties", "config", "then") in probed and ("properties", "config", "else") in probed


def test_probes_of_a_self_referring_meta_schema_are_built_without_blowing_up(monkeypatch):
    """draft-07's meta-schema: ~30 properties, most of them `{"$ref": "#"}`. Building every optional
    property of every recursion grew as 30^depth (the Schema Store catalogue ships these; the
    benchmark ran for minutes). A recursive $ref is built with its required parts only."""
    from jsonschema_specifications import REGISTRY

    from sgcli.lint import schema_instances
    from sgcli.lint.schema_probes import keyword_probes

    meta = REGISTRY.contents("http://json-schema.org/draft-07/schema")
    visited = []
    value = schema_instances.InstanceBuilder.value

    def counted(self, schema, depth, variant=0):
        visited.append(depth)
        return value(self, schema, depth, variant)

    monkeypatch.setattr(schema_instances.InstanceBuilder, "value", counted)
    base, probes = keyword_probes(meta)
    schema_instances.validator(meta).validate(base)
    assert {"type", "enum", "minimum", "uniqueItems", "additionalProperties"} <= {p.keyword for p in probes}
    assert len(visited) < 20 * schema_instances.MAX_BUILD_STEPS  # a few hundred per probe, not exponential


def _left_recursive_chain(n: int, syntax: str) -> str:
    """`r0 -> r1 -> ... -> r(n-1) -> r0`, each rule left-recursive through the next: a 10,000-rule
    chain walked rule to rule needs 10,000 stack frames."""
    define, root = (":", "start") if syntax == "lark" else (" ::=", "root")
    rules = [f"{root}{define} r0"] + [f'r{i}{define} r{(i + 1) % n} "a" | "b"' for i in range(n)]
    return "\n".join(rules) + "\n"


@pytest.mark.parametrize("suffix", ["lark", "gbnf"])
@pytest.mark.slow  # ~5-12 s: make test-slow, run by CI
def test_ten_thousand_rule_left_recursive_grammar_lints_and_converts(run_cli, tmp_path, suffix):
    """Was RecursionError (exit 3) in lint/structure.py, generate's preflight and convert."""
    path = tmp_path / f"chain.{suffix}"
    path.write_text(_left_recursive_chain(10_000, suffix))
    lint = run_cli("lint", "--select", "G,W", path)
    assert lint.exit_code in (0, 1) and "internal error" not in lint.output, lint.output
    if suffix == "gbnf":  # llama.cpp rejects left recursion: one finding for the whole cycle
        assert lint.output.count("G004") == 1 and "… 9994 more …" in lint.output, lint.output
    target = "gbnf" if suffix == "lark" else "lark"
    converted = run_cli("convert", path, "--to", target, "--no-check")
    assert converted.exit_code == 0 and converted.output.count("r9999") >= 2, converted.output[-500:]


@pytest.mark.slow  # ~5-12 s: make test-slow, run by CI
def test_ten_thousand_rule_chain_passes_generates_preflight():
    from sgcli.constraints.spec import ConstraintSpec, Kind
    from sgcli.dialects.lark import parse_lark
    from sgcli.dialects.shortest import ShortestStrings
    from sgcli.lint.preflight import structure_errors

    text = _left_recursive_chain(10_000, "lark")
    structure_errors(ConstraintSpec(Kind.LARK, text, "chain.lark"))  # no exception: nothing undefined
    grammar = parse_lark(text)
    assert ShortestStrings(grammar.definitions()).rules["start"] == "b"


def test_doubling_grammar_has_no_shortest_sentence_instead_of_2_to_the_60():
    from sgcli.dialects.lark import parse_lark
    from sgcli.dialects.shortest import MAX_SENTENCE, ShortestStrings

    text = "start: r0\n" + "".join(f"r{i}: r{i + 1} r{i + 1}\n" for i in range(60)) + 'r60: "a"\n'
    rules = ShortestStrings(parse_lark(text).definitions()).rules
    assert rules["r60"] == "a" and len(rules["r44"]) == 2**16 and rules["start"] is None
    assert all(s is None or len(s) <= MAX_SENTENCE for s in rules.values())


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("stacked.lark", 'start: "a"' + "?" * 5000 + "\n"),
        ("stacked.gbnf", 'root ::= "a"' + "?" * 5000 + "\n"),
        ("stacked.regex", "a" + "?" * 5000),
    ],
)
def test_thousands_of_stacked_repetition_operators_are_refused_at_a_stated_depth(run_cli, tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    lint = run_cli("lint", "--select", "S004", path)
    assert lint.exit_code == 1 and "internal error" not in lint.output, lint.output
    assert "more than 100 repetition operators on one element" in lint.output


def test_schema_pattern_nested_past_the_limit_is_not_a_crash():
    from sgcli.dialects.shortest import regex_sample

    assert regex_sample("(" * 3000 + "a" + ")" * 3000) is None  # the reader refuses it at 100 groups


def test_lint_probes_of_a_2000_property_schema_stop_at_the_compile_timeout(run_cli, tmp_path):
    """The keyword probes ran outside every limit: 88 KB, 2,000 properties, past 90 s and 4.1 GB."""
    import time

    kinds = [{"type": "string", "maxLength": 20}, {"type": "integer", "minimum": 0}, {"enum": ["a", "b", "c"]}]
    props = {f"field_{i:04d}": kinds[i % 3] for i in range(2000)}
    path = tmp_path / "wide.json"
    path.write_text(json.dumps({"type": "object", "properties": props, "required": list(props)[:50]}, indent=1))
    t = time.perf_counter()
    result = run_cli("lint", "-b", "llguidance", "--compile-timeout", "2", path)
    assert time.perf_counter() - t < 60, "lint ran far past its limit"
    assert result.exit_code == 1 and "internal error" not in result.output, result.output
    assert "J003 keyword enforcement was not checked: the probes ran past the 2 s time limit" in result.output


# --- found by benchmarks/hostile_inputs.py (issue 28's fault goals) -----------------------------


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["compile", CAPITAL, "--compile-timeout", "nan"], "--compile-timeout nan is not a number"),
        (["compile", CAPITAL, "--compile-timeout", "inf"], "--compile-timeout inf is more than the largest allowed"),
        (["lint", CAPITAL, "--compile-timeout", "-inf"], "must not be negative"),
    ],
    ids=["nan", "inf", "-inf"],
)
def test_a_compile_timeout_that_is_not_a_number_is_exit_2(run_cli, args, needle):
    """NaN passed every `< 0` check and reached the watchdog (ValueError, exit 3); inf overflowed its clock."""
    _refused(run_cli(*args), needle, "0 turns it off")


def test_a_request_timeout_of_nan_is_exit_2(run_cli, no_model):
    result = run_cli("generate", "--schema", CAPITAL, "--engine", "openai", "--base-url", "http://127.0.0.1:9",
                     "--request-timeout", "nan", "hi")  # fmt: skip
    _refused(result, "--request-timeout must be more than 0 seconds, got nan")


@pytest.mark.parametrize(
    "flag", [["--base-url", "http://127.0.0.1:9"], ["--served-model", "m"], ["--api-key-env", "K"]]
)
def test_server_flags_without_an_engine_are_exit_2_before_loading(run_cli, no_model, flag):
    """--base-url without --engine was ignored: the run loaded the in-process model (30 s) instead."""
    _refused(run_cli("generate", "--schema", CAPITAL, *flag, "hi"), f"{flag[0]} is for a server", "--engine vllm")


@pytest.mark.parametrize(
    ("text", "where", "needle"),
    [
        ('{"type": "number",\n "maximum": NaN}', ":2:13:", "NaN and Infinity are not JSON"),
        ('{"type": "number", "minimum": -Infinity}', ":1:31:", "NaN and Infinity are not JSON"),
        ('{"type": "integer", "maximum": 1e999}', ":1:32:", "past the largest float"),
        ('{"type": "integer", "maximum": ' + "9" * 5000 + "}", ":1:32:", "5000 digits is too long"),
    ],
    ids=["NaN", "-Infinity", "1e999", "5000 digits"],
)
def test_numbers_json_has_no_value_for_are_exit_2_at_their_position(run_cli, no_model, tmp_path, text, where, needle):
    """Python's json reads NaN, Infinity and 1e999 (inf); the request body and jsonschema cannot take
    them: `generate --engine` ended in exit 3 (ValueError: Out of range float values)."""
    schema = tmp_path / "s.json"
    schema.write_text(text)
    _refused(run_cli("compile", schema), f"{schema}{where} invalid JSON", needle)
    engine = ["--engine", "openai", "--base-url", "http://127.0.0.1:9", "--served-model", "m"]
    _refused(run_cli("generate", "--schema", schema, *engine, "hi"), f"{schema}{where}", needle)


def test_an_input_line_with_nan_is_that_lines_error():
    from sgcli.batch.requests import read_requests

    data = b'{"id": 1, "prompt": "a"}\n{"id": NaN, "prompt": "b"}\n{"id": 3, "prompt": "c"}\n'
    items = list(read_requests(data, "p.jsonl"))
    assert [type(i).__name__ for i in items] == ["Request", "BadLine", "Request"]
    assert str(items[1].location) == "p.jsonl:2:8" and "NaN and Infinity are not JSON" in items[1].message


def test_a_byte_order_mark_is_not_part_of_the_json(run_cli, tmp_path):
    """Windows editors write a UTF-8 BOM: a schema was exit 2 ("Unexpected UTF-8 BOM") and an --input
    file's first line an error record."""
    from sgcli.batch.requests import Request, read_requests

    schema = tmp_path / "s.json"
    schema.write_bytes(b"\xef\xbb\xbf" + CAPITAL.read_bytes().replace(b"\n", b"\r\n"))
    result = run_cli("compile", schema, "--backend", "llguidance")
    assert result.exit_code == 0, result.output
    items = list(read_requests(b'\xef\xbb\xbf{"id": 1, "prompt": "a"}\r\n{"id": 2, "prompt": "b"}\r\n', "p"))
    assert all(isinstance(i, Request) for i in items) and [i.id for i in items] == [1, 2]


@pytest.mark.parametrize("which", ["--input", "the constraint"])
def test_an_output_that_is_a_file_the_run_reads_is_exit_2(run_cli, no_model, tmp_path, which):
    """`--input p.jsonl -o p.jsonl --force` replaced the prompts with their records."""
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"id": 1, "prompt": "a"}\n')
    schema = tmp_path / "s.json"
    schema.write_bytes(CAPITAL.read_bytes())
    target = prompts if which == "--input" else schema
    before = target.read_bytes()
    result = run_cli("generate", "--schema", schema, "--input", prompts, "-o", tmp_path / "." / target.name, "--force")
    _refused(result, f"is {which}", "overwrite what this run reads")
    assert target.read_bytes() == before


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_full_stdout_is_exit_2_not_an_internal_error():
    """`sgcli lint --json > /dev/full` (a full disk under a redirect) ended in exit 3 (OSError ENOSPC)."""
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            [sys.executable, "-m", "sgcli", "lint", str(CAPITAL), "--json"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )
    assert done.returncode == 2, done.stderr
    assert "cannot write the standard output: No space left on device" in done.stderr
    assert "internal error" not in done.stderr and "Exception ignored" not in done.stderr


# --- found by a hunt for inputs the hostile benchmark did not have (2026-12-06) ------------------


@pytest.fixture
def in_folder(tmp_path, monkeypatch):
    """The working directory is `tmp_path`, and the configuration is read afresh from it."""
    from sgcli import config

    monkeypatch.chdir(tmp_path)
    config.reset()
    yield tmp_path
    config.reset()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["compile", CAPITAL, "--max-constraint-bytes", str(10**20)], "is more than the largest allowed"),
        (["lint", CAPITAL, "--compile-timeout", "1e10"], "--compile-timeout 10000000000.0 is more than the largest"),
        (["compile", CAPITAL, "--compile-memory", str(2**62)], "--compile-memory"),
        (["compile", CAPITAL, "-b", "xgrammar", "--indent", str(10**20)], "--indent must be from 0 to 64"),
        (["compile", CAPITAL, "-b", "llguidance", "--max-whitespace", str(10**20)], "--max-whitespace must be from 1"),
        (["generate", "--schema", CAPITAL, "--threads", "100000", "hi"], "--threads 100000 is more than"),
    ],
    ids=["bytes", "timeout", "memory", "indent", "max-whitespace", "threads"],
)
def test_numbers_past_any_use_are_exit_2_not_an_overflow(run_cli, no_model, args, needle):
    """10**20 bytes overflowed a read (OverflowError), 1e10 s the watchdog's clock, --indent xgrammar's
    integer, and 100,000 threads crashed torch (SIGSEGV): each is a range now, exit 2 naming it."""
    _refused(run_cli(*args), needle)


def test_a_config_number_out_of_range_is_exit_2_at_its_line(run_cli, in_folder):
    (in_folder / "sgcli.toml").write_text('backend = "llguidance"\nmax-constraint-bytes = 9223372036854775807\n')
    _refused(run_cli("lint", CAPITAL), "sgcli.toml:2: 'max-constraint-bytes' = 9223372036854775807 is out of range")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("# [tool.sgcli] below\n[tool]\nsgcli = 5\n", "pyproject.toml:3: 'tool.sgcli' must be a table"),
        ('description = "see [tool.sgcli]"\ntool = 5\n', "pyproject.toml:2: 'tool' must be a table"),
    ],
)
def test_a_pyproject_whose_tool_table_is_not_a_table_is_exit_2(run_cli, in_folder, text, needle):
    (in_folder / "pyproject.toml").write_text(text)
    _refused(run_cli("lint", CAPITAL), needle)


def test_a_table_name_given_a_value_is_not_its_own_did_you_mean(run_cli, in_folder):
    (in_folder / "sgcli.toml").write_text("lint = 5\n")
    text = _refused(run_cli("lint", CAPITAL), "sgcli.toml:1: 'lint' must be a table ([lint]), not 5")
    assert "Did you mean" not in text


def test_an_unreadable_pyproject_is_exit_2_naming_it(run_cli, in_folder, monkeypatch):
    """It may hold sgcli's settings: reading past it would run without them, silently."""
    (in_folder / "pyproject.toml").write_text('[tool.sgcli]\nbackend = "llguidance"\n')

    import os

    real_open = os.open

    def unreadable(path, *args, **kwargs):  # tests run as root, whom permissions do not stop
        if os.fspath(path).endswith("pyproject.toml"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", unreadable)
    _refused(run_cli("lint", CAPITAL), "pyproject.toml: cannot read the configuration: Permission denied")


@pytest.mark.parametrize(
    "args",
    [
        ["generate", "--schema", CAPITAL, "caf\udce9"],
        ["generate", "--schema", CAPITAL, "--system", "caf\udce9", "hi"],
        ["generate", "--schema", CAPITAL, "--stop", "\udcff", "hi"],
        ["masks", "--schema", CAPITAL, "--text", "caf\udce9"],
        ["compare-backends", "--schema", CAPITAL, "--no-generate", "--text", "caf\udce9"],
    ],
    ids=["prompt", "system", "stop", "masks-text", "compare-text"],
)
def test_text_arguments_that_are_not_utf8_are_exit_2(run_cli, no_model, args):
    """Bytes that are not UTF-8 on the command line reach Python as lone surrogates (surrogateescape):
    the server's JSON encoder and the tokenizer raised (exit 3)."""
    _refused(run_cli(*args), "not UTF-8 text (0x")


@pytest.mark.parametrize(
    "args",
    [
        ["compile", "--schema", "-"],
        ["lint", "--schema", "-"],
        ["lint", "-"],  # said it could not tell the kind from the extension
        ["generate", "--schema", str(CAPITAL), "-"],
        [
            "generate",
            "--schema",
            str(CAPITAL),
            "--input",
            "-",
            "--engine",
            "openai",
            "--base-url",
            "http://127.0.0.1:9",
        ],
    ],
    ids=["compile", "lint", "lint FILE", "prompt", "input"],
)
def test_a_closed_stdin_is_exit_2(args):
    """`<&-` (CI steps, daemons): sys.stdin is None, and reading '-' raised AttributeError (exit 3)."""
    done = subprocess.run(
        [sys.executable, "-m", "sgcli", *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
        preexec_fn=lambda: os.close(0),
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "stdin is closed" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["lint", "-"], "--kind"),  # the extension '(none)' of '-' named no way out
        (["compile", "-"], "--kind"),
        (["convert", "-", "--to", "lark"], "convert does not read stdin"),  # "input not found: -"
        (["bench", "-"], "bench does not read stdin"),
    ],
)
def test_a_grammar_from_stdin_names_its_kind_or_is_refused_saying_why(run_cli, args, needle):
    result = run_cli(*args, input='root ::= "a"\n')
    assert result.exit_code == 2 and needle in result.stderr, result.stderr
    assert run_cli("lint", "-", "--kind", "ebnf", input='root ::= "a"\n').exit_code == 0


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--schema", "-", "--input", "-"], "--input and --schema are '-'"),
        (["--schema", "-", "-"], "the prompt and --schema are '-'"),
    ],
)
def test_two_inputs_from_stdin_are_exit_2_before_either_is_read(run_cli, no_model, args, needle):
    """The first reader swallowed stdin: the schema was read from the prompts (an 'invalid JSON' error
    about the wrong thing), or the prompt was empty and the run went on."""
    _refused(run_cli("generate", *args, input=CAPITAL.read_text()), needle, "only one input can come from stdin")


def test_an_output_onto_a_file_the_schemas_ref_reads_is_refused_even_with_force(run_cli, no_model, tmp_path):
    """The schema itself was protected, the files its `$ref`s bundle were not: --force replaced one."""
    defs = tmp_path / "defs.json"
    defs.write_text('{"$defs": {"c": {"type": "string"}}}')
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "object", "properties": {"c": {"$ref": "defs.json#/$defs/c"}}}')
    server = ["--engine", "openai", "--base-url", "http://127.0.0.1:9"]
    result = run_cli("generate", "--schema", schema, "-o", defs, "--force", *server, "hi")
    _refused(result, "is a file the schema's $ref reads", "choose another --output file")
    assert defs.read_text() == '{"$defs": {"c": {"type": "string"}}}'


def test_an_empty_prompt_from_stdin_is_exit_2(run_cli, no_model):
    """An upstream step that wrote nothing: the run generated from an empty prompt, exit 0."""
    _refused(run_cli("generate", "--schema", CAPITAL, "-", input=""), "the prompt read from stdin is empty")


@pytest.mark.parametrize(
    ("name", "text", "where", "needle"),
    [
        ("wrap.regex", "a{4294967296}", "wrap.regex:1:2", "repetition count 4,294,967,296"),
        ("wrap.gbnf", 'root ::= "a"{4294967297}\n', "wrap.gbnf:1:13", "xgrammar wraps it around"),
        ("wrap.lark", "start: /a{4294967297}/\n", "wrap.lark:1:10", "repetition count"),
        ("big.gbnf", 'root ::= "a" "\\U0011FFFF"\n', "big.gbnf:1:15", "past U+10FFFF"),
        ("big.lark", 'start: "\\U0011FFFF"\n', "big.lark:1:9", "unknown escape \\U"),  # no \U in a Lark string
        ("esc.gbnf", 'root ::= "a\\q" [\\z]\n', "esc.gbnf:1:12", "unknown escape \\q"),
        ("hex.gbnf", 'root ::= "a" "\\x4"\n', "hex.gbnf:1:15", "\\x needs 2 hex digits"),
        # xgrammar wrote a lone surrogate's three bytes, no UTF-8 text (lint passed, auto chose xgrammar)
        ("half.gbnf", 'root ::= "a" "\\ud800"\n', "half.gbnf:1:15", "half of a UTF-16 surrogate pair"),
        ("half.lark", 'start: "a" /x\\ud800/\n', "half.lark:1:", "ud800"),
    ],
)
@pytest.mark.parametrize("backend", ["xgrammar", "llguidance"])
def test_a_spelling_no_backend_reads_as_written_is_exit_2_at_its_place(
    run_cli, tmp_path, name, text, where, needle, backend
):
    """A count past 2**32 was wrapped around by xgrammar (`"a"{4294967297}` took "a", lint clean, and auto
    chose xgrammar) and made Python's re raise (exit 3); `\\U0011FFFF` made chr() raise (exit 3)."""
    path = tmp_path / name
    path.write_text(text)
    result = run_cli("compile", path, "--backend", backend)  # a grammar a backend refuses: exit 1, at its place
    assert result.exit_code == 1 and "internal error" not in result.output, result.output
    assert needle in result.output and where in result.output.replace(str(tmp_path) + "/", ""), result.output
    _refused(run_cli("masks", path, "--text", "a", "--backend", backend), needle)


@pytest.mark.parametrize(
    ("text", "where", "what", "hint"),
    [
        ('start: "abc\nnext: "x"\n', "1:8", "unterminated string", 'close it with " on its line'),
        ('start: "\\q"\n', "1:9", "unknown escape \\q", "the character itself"),
        ('root ::= "a" b\nb ::= "x"\n', "1:1", "`root ::=` is a GBNF rule, not Lark", "--kind ebnf"),
        ('start: "a" b\nb ::= "x"\n', "2:1", "`b ::=` is a GBNF rule, not Lark", "rename it to .gbnf"),
    ],
)
def test_lark_mistakes_are_placed_and_named_by_sgclis_reader(run_cli, tmp_path, text, where, what, hint):
    """llguidance said only "lexer error", at the end of the line, for an unclosed string and `\\q`, and
    "Expected token '_', found '='" for GBNF in a .lark file; sgcli's reader says what and where first."""
    path = tmp_path / "g.lark"
    path.write_text(text)
    linted = run_cli("lint", path, "--output-format", "json")
    found = json.loads(linted.stdout)
    assert linted.exit_code == 1 and len(found) == 1, linted.output
    assert f"{found[0]['line']}:{found[0]['col']}" == where and what in found[0]["message"], found
    assert hint in found[0]["hint"], found
    _refused(run_cli("convert", path, "--to", "gbnf", "--no-check"), f"{path}:{where}:", what, hint)
    _refused(run_cli("masks", path, "--text", "a"), f"{path}:{where}:", what, hint)


def test_lint_finds_an_escape_llama_cpp_refuses_on_the_default_backend(run_cli, tmp_path):
    """`"a\\q" [\\z]`: llama.cpp and xgrammar refuse `\\q`; sgcli's reader took it for `q`, so lint on the
    default backend (llguidance, which gets sgcli's print) said "All checks passed" and convert printed "aq"."""
    path = tmp_path / "badesc.gbnf"
    path.write_text('root ::= "a\\q" [\\z]\n')
    result = run_cli("lint", path)
    assert result.exit_code == 1, result.output
    assert f"{path}:1:12: S0" in result.output and "unknown escape \\q" in result.output, result.output


def test_an_empty_stop_string_is_exit_2(run_cli, no_model):
    """`--stop ''` is found before the first token: every output came back empty (2026-12-06)."""
    _refused(run_cli("generate", "--regex", "a", "--stop", "", "hi"), "--stop", "must not be empty")


def test_a_pattern_nested_past_pythons_re_is_exit_2_at_the_pattern(run_cli, no_model, tmp_path):
    """Python's re (jsonschema's `format: regex` check of the meta-schema) ran out of stack on 500 nested
    groups: lint and compile exited 3 (2026-12-06)."""
    schema = tmp_path / "deep.json"
    schema.write_text('{"type": "string", "pattern": "' + "(" * 500 + "a" + ")" * 500 + '"}')
    _refused(run_cli("compile", schema, "-b", "llguidance"), f"{schema}:1:", "nests 500 groups deep")
    linted = run_cli("lint", schema)
    assert linted.exit_code == 1 and "S003" in linted.output and "nests 500 groups deep" in linted.output


def test_a_refusal_inside_a_drafts_meta_schema_is_placed_at_the_users_ref(run_cli, no_model, tmp_path):
    """`$ref` to the 2020-12 meta-schema: the refusal was placed at `https://json-schema.org/...:59:28`,
    a file the user never sees (and github/sarif output named it as the file)."""
    schema = tmp_path / "meta.json"
    schema.write_text('{"$ref": "https://json-schema.org/draft/2020-12/schema"}')
    _refused(run_cli("compile", schema, "-b", "llguidance"), f"{schema}:1:10:", "$dynamicRef")


def test_a_named_pipe_nothing_writes_to_is_read_as_empty_not_waited_on(run_cli, no_model, tmp_path):
    """`sgcli compile p.gbnf` on a FIFO with no writer blocked in open() until killed (2026-12-06)."""
    from helpers import bounded_hang

    fifo = tmp_path / "p.gbnf"
    os.mkfifo(fifo)
    with bounded_hang(30):
        _refused(run_cli("compile", fifo, "-b", "llguidance"), f"{fifo}:1:1:", "is empty")


def test_deep_json_in_a_bench_line_or_lark_options_is_exit_2_at_its_place(run_cli, tmp_path):
    """A bench JSONL line nested 3,000 deep and `%llguidance {...}` nested so were exit 3 (RecursionError)."""
    items = tmp_path / "b.jsonl"
    items.write_text('{"schema": {"type": "integer"}, "instances": [1]}\n{"schema":' + "[" * 3000 + "]" * 3000 + "}\n")
    result = run_cli("bench", items, "--backend", "llguidance")
    assert f"{items}:2:1: llguidance: input error: JSON nested more than 512" in result.output, result.output
    grammar = tmp_path / "o.lark"
    grammar.write_text("%llguidance " + '{"a":' * 3000 + "1" + "}" * 3000 + '\nstart: "a"\n')
    result = run_cli("convert", grammar, "--to", "gbnf")
    assert result.exit_code == 2 and f"{grammar}:1:13" in result.stderr and "nested more than 512" in result.stderr


def test_a_utf16_file_is_one_message_naming_utf16(run_cli, no_model, tmp_path):
    """Windows' "Unicode" save: an --input file gave an error record for every line (NULs between the
    characters), a schema "not UTF-8 at byte 0"; now one exit 2 at its start, naming the encoding."""
    batch = tmp_path / "in.jsonl"
    batch.write_bytes('{"prompt": "a"}\n{"prompt": "b"}\n'.encode("utf-16"))
    schema = tmp_path / "s.json"
    schema.write_bytes('{"type": "integer"}'.encode("utf-16"))
    for args in (["generate", "--regex", "a", "--input", batch, "-o", tmp_path / "o.jsonl"], ["lint", schema]):
        result = run_cli(*args)
        assert result.exit_code == 2, result.output
        assert ":1:1: " in result.stderr and "UTF-16 or UTF-32 text" in result.stderr, result.stderr
    assert not (tmp_path / "o.jsonl").exists()


def test_a_control_character_in_a_model_id_or_api_key_is_exit_2_naming_the_flag(run_cli, no_model, monkeypatch):
    """`--served-model $'m\\r\\nX-Evil: 1'` was echoed raw into the summary; a key with a newline failed in
    httpx as "cannot list the models", blaming the server."""
    server = ["generate", "--engine", "openai", "--base-url", "http://127.0.0.1:9", "--regex", "a"]
    result = run_cli(*server, "--served-model", "m\r\nX-Evil: 1", "hi")
    assert result.exit_code == 2 and "--served-model" in result.stderr and "control character" in result.stderr
    monkeypatch.setenv("TEST_SERVER_KEY", "abc\n")
    result = run_cli(*server, "--api-key-env", "TEST_SERVER_KEY", "hi")
    assert result.exit_code == 2 and "--api-key-env TEST_SERVER_KEY" in result.stderr and "control" in result.stderr
