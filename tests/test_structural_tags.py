"""Structural tags (tool calls): both SGLang shapes, on xgrammar and llguidance.

Text outside the tags is free; a trigger must continue into one of its tags, whose
content is held to its schema. xgrammar's semantics are the reference: llguidance's
Lark translation must give the same verdict on every probe.
"""

from __future__ import annotations

import json
import re

import pytest

from sgcli.backends import get_backend, structural_tag
from sgcli.backends.base import new_bitmask
from sgcli.backends.matching import walk
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.errors import UserError

ARGS = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
OLD = {
    "structures": [
        {"begin": "<function=weather>", "schema": ARGS, "end": "</function>"},
        {"begin": "<function=time>", "schema": {"enum": ["utc", "local"]}, "end": "</function>"},
    ],
    "triggers": ["<function="],
}


def new_shape(at_least_one=False, stop_after_first=False) -> dict:
    tags = [
        {"begin": s["begin"], "content": {"type": "json_schema", "json_schema": s["schema"]}, "end": s["end"]}
        for s in OLD["structures"]
    ]
    return {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": ["<function="],
            "tags": tags,
            "at_least_one": at_least_one,
            "stop_after_first": stop_after_first,
        },
    }


def spec_of(doc) -> ConstraintSpec:
    return ConstraintSpec(Kind.STRUCTURAL_TAG, json.dumps(doc, indent=2), "tags.json")


def accepts(compiled, text: str) -> bool:
    """Every token of `text` is in the mask and accepted, and the grammar may stop after it."""
    vocab = compiled.vocab
    return walk(compiled.matcher(), vocab.encode(text), new_bitmask(len(vocab)), follow_mask=True).accepted


FREE = [
    "just text",
    "",
    "a < b and <functio",
    'call: <function=weather>{"city": "Paris"}</function> done',
    '<function=time>"utc"</function><function=weather>{"city":"Rome"}</function>',
]
BROKEN = [
    '<function=weather>{"town": "Paris"}</function>',
    '<function=time>"noon"</function>',
    "x <function=rain>{}</function>",
    '<function=weather>{"city": "Paris"}',
]


def test_old_shape_becomes_the_new_one():
    native, tt = structural_tag.parse(spec_of(OLD))
    assert native == structural_tag.to_xgrammar(tt)
    assert native["format"]["tags"][0] == {
        "type": "tag",
        "begin": "<function=weather>",
        "content": {"type": "json_schema", "json_schema": ARGS},
        "end": "</function>",
    }
    native_new, tt_new = structural_tag.parse(spec_of(new_shape()))
    assert native_new == new_shape() and tt_new.triggers == tt.triggers
    assert [t.content for t in tt_new.tags] == [t.content for t in tt.tags]


@pytest.mark.parametrize("backend", ["xgrammar", "llguidance"])
@pytest.mark.parametrize("doc", [OLD, new_shape()], ids=["old-shape", "new-shape"])
def test_only_the_tagged_part_is_constrained(smol_tokenizer, backend, doc):
    compiled = get_backend(backend).compile(spec_of(doc), smol_tokenizer.vocab)
    assert [accepts(compiled, t) for t in FREE] == [True] * len(FREE)
    assert [accepts(compiled, t) for t in BROKEN] == [False] * len(BROKEN)


@pytest.mark.parametrize("flags", [(True, False), (False, True), (True, True)])
def test_llguidance_agrees_with_xgrammar_on_the_flags(smol_tokenizer, flags):
    spec = spec_of(new_shape(*flags))
    xgr, llg = (get_backend(b).compile(spec, smol_tokenizer.vocab) for b in ("xgrammar", "llguidance"))
    probes = FREE + BROKEN + ['<function=time>"utc"</function> and after', '<function=time>"local"</function>']
    verdicts = [(accepts(xgr, p), accepts(llg, p)) for p in probes]
    assert all(a == b for a, b in verdicts), list(zip(probes, verdicts))
    assert any(a for a, _ in verdicts) and not all(a for a, _ in verdicts)


TAG_RE = re.compile(r"<function=weather>(.*?)</function>|<function=time>(.*?)</function>", re.S)


def _check_tool_calls(text: str, finish_reason: str) -> int:
    """Independent check: each complete tag holds valid arguments, no trigger is left dangling
    (except a tag cut off by --max-tokens or the repetition guard). Returns the number of complete tags."""
    import jsonschema

    count, pos = 0, 0
    while (i := text.find("<function=", pos)) >= 0:
        m = TAG_RE.match(text, i)
        if m is None:
            assert finish_reason in ("length", "repetition") and "</function>" not in text[i:], text[i:]
            return count
        if m.group(1) is not None:
            jsonschema.validate(json.loads(m.group(1)), ARGS)
        else:
            assert json.loads(m.group(2)) in ("utc", "local")
        count, pos = count + 1, m.end()
    return count


@pytest.mark.parametrize("backend", ["xgrammar", "llguidance"])
def test_random_model_tool_calls_hold_their_schema(tiny_lm, smol_tokenizer, backend):
    from helpers import generate_with

    spec = spec_of(new_shape(at_least_one=True, stop_after_first=True))
    complete = 0
    for seed in range(3):
        record = generate_with(tiny_lm, smol_tokenizer, spec, backend, seed=seed, max_tokens=60)
        out = record["output"]
        assert out.startswith("<function="), out
        complete += _check_tool_calls(out, record["finish_reason"])
        if record["finish_reason"] == "stop":
            assert TAG_RE.fullmatch(out) and record["valid"], out
    assert complete >= 1  # the adversary did get through a whole tool call


@pytest.mark.parametrize("backend", ["xgrammar", "llguidance"])
def test_random_continuations_after_a_trigger_never_leave_a_broken_tag(smol_tokenizer, backend):
    """Random free text almost never writes a trigger itself, so the walk starts inside one:
    after 'see <function=', every continuation the mask allows (uniformly random tokens, the
    adversary) is either a complete tag with valid arguments or an unfinished one, never closed badly."""
    import random

    from sgcli.backends.base import allowed_ids

    vocab = smol_tokenizer.vocab
    compiled = get_backend(backend).compile(spec_of(OLD), vocab)
    rng = random.Random(7)
    for _ in range(8):
        matcher, mask = compiled.matcher(), new_bitmask(len(vocab))
        prefix = vocab.encode("see <function=")
        assert walk(matcher, prefix, mask, follow_mask=True).refused is None
        out = bytearray(b"".join(vocab.tokens[i] for i in prefix))
        for _ in range(40):
            if matcher.is_terminated():
                break
            matcher.fill_mask(mask)
            choices = [int(i) for i in allowed_ids(mask, len(vocab)) if i not in vocab.special_ids]
            if not choices:
                break
            token = rng.choice(choices)
            assert matcher.accept(token)
            out += vocab.tokens[token]
        text = out.decode("utf-8", errors="replace")
        _check_tool_calls(text, "length")  # the trigger is in `text`, so its checks always run


def test_begin_without_its_trigger_is_an_error_at_its_position():
    doc = json.loads(json.dumps(OLD))
    doc["structures"][1]["begin"] = "<tool=time>"
    with pytest.raises(UserError) as info:
        structural_tag.parse(spec_of(doc))
    assert info.value.message == (
        "structural tag: the begin '<tool=time>' starts with none of the triggers ['<function=']"
    )
    assert (info.value.location.line, info.value.location.col) == (20, 16)  # the value of structures/1/begin


def test_unknown_shape_names_both_shapes():
    with pytest.raises(UserError) as info:
        structural_tag.parse(spec_of({"tags": []}))
    assert info.value.message == "structural tag: neither 'structures' nor 'format' found"
    assert "structures" in info.value.hint and "triggered_tags" in info.value.hint


def test_llguidance_names_xgrammar_for_content_it_cannot_express(smol_tokenizer):
    doc = new_shape()
    doc["format"]["tags"][0]["content"] = {"type": "json_schema", "json_schema": ARGS, "style": "qwen_xml"}
    with pytest.raises(UserError) as info:
        get_backend("llguidance").compile(spec_of(doc), smol_tokenizer.vocab)
    assert info.value.message == (
        "structural tag: content type \"json_schema with style 'qwen_xml'\" is not supported by the llguidance backend"
    )
    assert "--backend xgrammar" in info.value.hint
    get_backend("xgrammar").compile(spec_of(doc), smol_tokenizer.vocab)  # xgrammar takes it


# ---- every other structural-tag format, checked apart from the backend (validation/tag_formats.py) ----

CITY = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"]}
SEQUENCE = {
    "type": "structural_tag",
    "format": {
        "type": "sequence",
        "elements": [
            {"type": "const_string", "value": "Answer: "},
            {"type": "json_schema", "json_schema": CITY},
            {"type": "optional", "content": {"type": "regex", "pattern": " \\(sure: [0-9]{1,2}%\\)"}},
        ],
    },
}
SEPARATED = {
    "type": "structural_tag",
    "format": {
        "type": "tags_with_separator",
        "tags": [{"begin": "<call>", "content": {"type": "json_schema", "json_schema": CITY}, "end": "</call>"}],
        "separator": ",",
        "at_least_one": True,
    },
}


@pytest.mark.parametrize(
    ("doc", "output", "ok"),
    [
        (SEQUENCE, 'Answer: {"city": "Paris"}', True),
        (SEQUENCE, 'Answer: {"city": "Paris"} (sure: 90%)', True),
        (SEQUENCE, 'Answer: {"city": "Paris"} (sure: 900%)', False),
        (SEQUENCE, 'Answer: {"city": "Paris in the spring"}', False),  # maxLength 12
        (SEQUENCE, 'Reply: {"city": "Paris"}', False),
        (SEPARATED, '<call>{"city": "Oslo"}</call>,<call>{"city": "Rome"}</call>', True),
        (SEPARATED, '<call>{"city": "Oslo"}</call>;<call>{"city": "Rome"}</call>', False),
        (SEPARATED, "", False),  # at_least_one
        ({"type": "structural_tag", "format": {"type": "or", "elements": [SEQUENCE["format"], SEPARATED["format"]]}},)
        + ('<call>{"city": "Oslo"}</call>', True),
        # triggered tags met inside another format (`tag_formats._read_triggered`)
        (
            {
                "type": "structural_tag",
                "format": {
                    "type": "sequence",
                    "elements": [{"type": "const_string", "value": "> "}, new_shape()["format"]],
                },
            },
            '> ok <function=time>"utc"</function>',
            True,
        ),
        (
            {
                "type": "structural_tag",
                "format": {
                    "type": "sequence",
                    "elements": [{"type": "const_string", "value": "> "}, new_shape()["format"]],
                },
            },
            '> ok <function=time>"noon"</function>',
            False,
        ),
        ({"type": "structural_tag", "format": {"type": "any_text", "excludes": ["</s>"]}}, "free text", True),
        ({"type": "structural_tag", "format": {"type": "any_text", "excludes": ["</s>"]}}, "a</s>b", False),
        (
            {"type": "structural_tag", "format": {"type": "repeat", "min": 2, "max": 3, "content": SEQUENCE["format"]}},
            'Answer: {"city": "A"}' * 2,
            True,
        ),
        (
            {"type": "structural_tag", "format": {"type": "repeat", "min": 2, "max": 3, "content": SEQUENCE["format"]}},
            'Answer: {"city": "A"}' * 4,
            False,
        ),
    ],
)
def test_composite_formats_are_read_apart_from_the_backend(doc, output, ok):
    from sgcli.validation.tag_check import tag_errors

    errors = tag_errors(spec_of(doc), output, "ecma")
    assert (errors == []) is ok, errors
    if not ok:
        assert "offset" in errors[0]


def test_a_format_nothing_here_reads_is_unchecked_not_guessed():
    from sgcli.validation.tag_check import tag_errors
    from sgcli.validation.verdict import Unchecked

    for fmt in (
        {"type": "grammar", "grammar": 'root ::= "a"'},
        {"type": "json_schema", "json_schema": {}, "style": "qwen_xml"},
    ):
        with pytest.raises(Unchecked):
            tag_errors(spec_of({"type": "structural_tag", "format": fmt}), "a", "ecma")


@pytest.mark.parametrize("backend", ["xgrammar", "llguidance"])
def test_json_inside_tags_takes_generates_bounded_layout(smol_tokenizer, backend):
    """A tag's JSON took any whitespace between tokens, whatever the layout: a small model wrote whitespace
    until --max-tokens. Under generate's compact layout it is compact (llguidance) or takes at most one
    whitespace character a gap (xgrammar)."""
    from sgcli.constraints.spec import GENERATE_WHITESPACE, JsonOptions

    doc = SEQUENCE if backend == "xgrammar" else new_shape()
    text = 'Answer: {"city":' if backend == "xgrammar" else 'see <function=weather>{"city":'
    spec = ConstraintSpec(Kind.STRUCTURAL_TAG, json.dumps(doc), "t.json", json_options=JsonOptions(GENERATE_WHITESPACE))
    compiled = get_backend(backend).compile(spec, smol_tokenizer.vocab)
    vocab = compiled.vocab

    def refused(prefix: str):
        return walk(compiled.matcher(), vocab.encode(prefix), new_bitmask(len(vocab)), follow_mask=False).refused

    assert refused(text) is None
    assert refused(text + "   ") is not None  # three whitespace characters in a row
    # llguidance writes it compact; xgrammar has no compact form in a tag, so it allows one character
    assert (refused(text + " ") is None) is (backend == "xgrammar")


def test_random_model_sequence_outputs_are_validated_by_the_tag_check(tiny_lm, smol_tokenizer):
    """A `sequence` structural tag was generated and then reported `unchecked`: now each output is read
    against it, and every one the grammar let end is valid (the random-logits adversary tries everything)."""
    from helpers import generate_with

    from sgcli.constraints.spec import GENERATE_WHITESPACE, JsonOptions

    spec = ConstraintSpec(
        Kind.STRUCTURAL_TAG, json.dumps(SEQUENCE), "seq.json", json_options=JsonOptions(GENERATE_WHITESPACE)
    )
    finished = 0
    for seed in range(3):
        record = generate_with(tiny_lm, smol_tokenizer, spec, "xgrammar", seed=seed, max_tokens=40)
        assert record["validated_by"] == "structural_tags", record
        if record["finish_reason"] == "stop":
            finished += 1
            assert record["valid"] is True, (record["output"], record["errors"])
    assert finished >= 1


@pytest.mark.parametrize("key", ["at_least_one", "stop_after_first"])
def test_a_flag_that_is_not_a_boolean_is_an_error_at_its_value(key):
    # read by truthiness, "false" meant true on llguidance (xgrammar refused it with no position)
    doc = new_shape(**{key: "false"})
    spec = spec_of(doc)
    with pytest.raises(UserError) as info:
        structural_tag.parse(spec)
    assert info.value.message == f"structural tag: '{key}' must be true or false, not \"false\""
    line = next(i for i, text in enumerate(spec.text.splitlines(), 1) if f'"{key}"' in text)
    col = spec.text.splitlines()[line - 1].index('"false"') + 1
    assert (info.value.location.line, info.value.location.col) == (line, col)


def test_a_nested_flag_that_is_not_a_boolean_is_unchecked_not_read_as_true():
    from sgcli.validation.tag_check import tag_errors
    from sgcli.validation.verdict import Unchecked

    inner = dict(new_shape()["format"], at_least_one="false")
    doc = {"type": "structural_tag", "format": {"type": "sequence", "elements": [inner]}}
    with pytest.raises(Unchecked):
        tag_errors(spec_of(doc), "just text", "ecma")


def test_a_schema_strings_json_error_is_placed_at_the_string_not_inside_it():
    # the position inside the string was reported as a position in the file (1:2 for line 5's string)
    doc = json.loads(json.dumps(OLD))
    doc["structures"][0]["schema"] = "{not json"
    spec = spec_of(doc)
    with pytest.raises(UserError) as info:
        structural_tag.parse(spec)
    assert "(line 1, column 2 of the string)" in info.value.message
    line = next(i for i, text in enumerate(spec.text.splitlines(), 1) if "{not json" in text)
    col = spec.text.splitlines()[line - 1].index('"{not json') + 1
    assert (info.value.location.line, info.value.location.col) == (line, col)


def test_xgrammars_position_in_the_grammar_it_made_of_a_tag_is_not_claimed_as_the_files(smol_tokenizer):
    # "EBNF parser error at line 1, column 11" was reported as tags.json:1:11, the bad class being elsewhere
    doc = new_shape()
    doc["format"]["tags"][0]["content"] = {"type": "regex", "pattern": "[z-a]"}
    with pytest.raises(UserError) as info:
        get_backend("xgrammar").compile(spec_of(doc), smol_tokenizer.vocab)
    assert info.value.location.line is None and "at that position" not in (info.value.hint or "")


def test_xgrammars_looser_compact_in_a_tag_is_a_warning(smol_tokenizer):
    """xgrammar's compact tag JSON allows one whitespace character between tokens, said only in a code comment:
    compare-backends' `compact` row (and generate) now carry a warning saying so."""
    from sgcli.constraints.spec import JsonOptions

    def warnings(doc, options: JsonOptions) -> list[str]:
        spec = ConstraintSpec(Kind.STRUCTURAL_TAG, json.dumps(doc), "t.json", json_options=options)
        return [str(w) for w in get_backend("xgrammar").compile(spec, smol_tokenizer.vocab).warnings]

    (compact,) = [w for w in warnings(SEQUENCE, JsonOptions("compact")) if "structural tag" in w]
    assert "no compact layout" in compact and "one whitespace character" in compact
    assert not [w for w in warnings(SEQUENCE, JsonOptions("flexible")) if "structural tag" in w]
    assert not [w for w in warnings(SEQUENCE, JsonOptions("flexible", max_whitespace=2)) if "structural tag" in w]


def _bad_content(json_schema) -> str:
    tag = {"begin": "<function=weather>", "content": {"type": "json_schema", "json_schema": json_schema}}
    doc = {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<function="], "tags": []}}
    doc["format"]["tags"].append(tag | {"end": "</function>"})
    return json.dumps(doc, indent=2)


@pytest.mark.parametrize(
    "command", [["compile"], ["lint", "--kind", "structural_tag"], ["lint"], ["generate", "--backend", "none"]]
)
def test_a_tags_invalid_schema_is_exit_2_at_its_keyword_before_any_backend(run_cli, tmp_path, command):
    """Each backend said only `Invalid type: strin` for the file, and auto said it once per backend. A
    constraint flag is exit 2, as `--schema` is; a file lint reads is an S003 finding, as a schema file's."""
    path = tmp_path / "tag.json"
    text = _bad_content({"type": "object", "properties": {"city": {"type": "strin"}}})
    path.write_text(text)
    line = next(n for n, row in enumerate(text.splitlines(), 1) if '"strin"' in row)
    col = text.splitlines()[line - 1].index('"type": "strin"') + 1
    as_file = "--kind" in command
    given = [str(path)] if as_file else ["--structural-tag", str(path)] + (["hi"] if command[0] == "generate" else [])
    result = run_cli(*command, *given)
    assert result.exit_code == (1 if as_file else 2), result.output
    out = result.stdout if as_file else result.stderr
    assert f"{path}:{line}:{col}" in out and "invalid JSON Schema at /properties/city/type" in out, out
    assert "every backend failed" not in result.stderr and out.count("'strin'") == 1
    assert ("S003" in out) is as_file


def test_an_inline_json_that_is_not_a_schema_is_exit_2_at_its_keyword(run_cli, tmp_path):
    path = tmp_path / "g.lark"
    path.write_text('start: "A: " %json {\n  "type": "object",\n  "properties": {"city": {"type": "strin"}}\n}\n')
    result = run_cli("compile", path)
    assert result.exit_code == 2 and f"{path}:3:27: %json #1: invalid JSON Schema" in result.stderr, result.stderr
    assert run_cli("lint", path).stdout.count(f"{path}:3:27: S003 %json #1") == 1


def test_an_inline_json_that_is_not_json_is_exit_2_at_its_place_in_the_file(run_cli, tmp_path):
    """A trailing comma in the second `%json`: llguidance said "trailing comma at line 3 column 42", counted
    from the JSON's own start, with no file position (xgrammar placed it at the `%json`)."""
    path = tmp_path / "g.lark"
    path.write_text(
        'start: "<a>" first "</a><b>" second "</b>"\nfirst: %json {"type": "object"}\n'
        'second: %json {\n  "type": "object",\n  "properties": {"y": {"type": "string"},}\n}\n'
    )
    for command in (["compile", "-b", "llguidance"], ["compile", "-b", "xgrammar"], ["generate", "--lark"]):
        result = run_cli(*command, path, *(["hi"] if command[0] == "generate" else []))
        assert result.exit_code == 2 and f"{path}:5:42: %json #2: not JSON" in result.stderr, result.output
    assert f"{path}:5:42: S003 %json #2: not JSON" in run_cli("lint", path).stdout


def test_free_text_in_a_tag_ends_at_the_tags_end():
    """`<think>a</think>b</think>...` is not one think tag: xgrammar's masks refuse it, and the independent
    tag check took it (any_text ran past the first `</think>`), a `valid: true` the backend never meant."""
    from sgcli.backends.matching import accepts_bytes
    from sgcli.lint.runner import byte_vocab
    from sgcli.validation.validate import validate

    think = {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"}
    call = {"type": "tag", "begin": "<c>", "content": {"type": "json_schema", "json_schema": {"type": "integer"}}}
    call["end"] = "</c>"
    doc = {"type": "structural_tag", "format": {"type": "sequence", "elements": [think, call]}}
    spec = ConstraintSpec(Kind.STRUCTURAL_TAG, json.dumps(doc), "t.json")

    def valid(text: str):
        return validate(spec, text, finish_reason="stop", grammar_complete=True).valid

    assert valid("<think>a b</think><c>1</c>") is True
    assert valid("<think>a</think>b</think><c>1</c>") is False
    # and a schema violation after it is the reason given (the think tag's free text, running on, was "furthest")
    errors = validate(spec, '<think>a</think><c>"x"</c>', finish_reason="stop", grammar_complete=True).errors
    assert errors == [
        "the output does not match the structural tag at offset 19: schema violation at /: 'x' is not of type 'integer'"
    ]
    compiled = get_backend("xgrammar").compile(spec, byte_vocab())
    assert not accepts_bytes(compiled, b"<think>a</think>b</think><c>1</c>").accepted  # as the backend reads it
    assert accepts_bytes(compiled, b"<think>a b</think><c>1</c>").accepted


def test_a_structural_tag_file_given_as_a_file_is_read_as_one(run_cli, tmp_path):
    """`sgcli lint tags.json` (compile, masks) read a structural tag as a JSON Schema: "S003 'structural_tag'
    is not a JSON Schema type", with no word of --structural-tag. Its `"type"` says what it is."""
    path = tmp_path / "tags.json"
    path.write_text(json.dumps(new_shape()))
    result = run_cli("lint", path)
    assert result.exit_code == 0 and "S003" not in result.stdout, result.output
    result = run_cli("compile", path, "-b", "xgrammar", "--json")
    assert result.exit_code == 0 and '"kind": "structural_tag"' in result.stdout, result.output
    assert run_cli("lint", path, "--kind", "json_schema").exit_code == 1  # asked as a schema, judged as one
