"""Guaranteed means guaranteed: what a backend's grammar leaves unenforced, sgcli's schema checker
enforces while decoding, and what neither enforces is exit 2 before any model loads.

The per-keyword cases come from tests/conformance/keyword_positions.json (benchmarks/keyword_positions.py):
each invalid instance breaks one keyword only (checked with jsonschema), at one of many positions.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import jsonschema
import pytest

from sgcli.backends import compile_for, get_backend
from sgcli.backends.auto import ranked
from sgcli.backends.guarantee import guarantee
from sgcli.backends.keyword_coverage import compiled_gaps, schema_gaps
from sgcli.backends.matching import accepts_bytes, feed
from sgcli.backends.schema_checker import CheckedCompiled, with_checker
from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
from sgcli.errors import UserError
from sgcli.lint.runner import byte_vocab
from sgcli.validation.verdict import schema_errors

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from keyword_positions import CORPUS  # noqa: E402

CASES = json.loads(CORPUS.read_text())
KEYWORDS = (
    "additionalProperties enum const pattern minLength maxLength minimum maximum multipleOf minItems maxItems "
    "uniqueItems minProperties maxProperties required oneOf not type if else"
).split()
# where each backend leaves keywords to the checker: every keyword of the list leaks at these on xgrammar
POSITIONS = {
    "xgrammar": ("root", "property", "$ref", "allOf", "then", "anyOf property"),
    "llguidance": ("root", "property", "$ref", "allOf", "then", "anyOf property"),
    "outlines_core": ("root", "property"),
}
OUTLINES_KEYWORDS = ("minimum", "maximum", "multipleOf", "uniqueItems", "maxProperties")
LLGUIDANCE_DROPS = ("uniqueItems", "not", "if", "else")  # compiled lenient, it drops what it does not implement


def spec_of(schema, name="s.json") -> ConstraintSpec:
    return ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema, indent=1), name)


def gen_spec_of(schema, name="s.json") -> ConstraintSpec:
    """`spec_of` as `generate` compiles it (a dry run's grammar reads more spellings: raw_escaped_names)."""
    return spec_of(schema, name).for_generation()


def takes(compiled, value) -> bool:
    """Whether the matcher accepts `value` in both JSON layouts; the mask must agree with accept()."""
    vocab = compiled.vocab
    taken = False
    for separators in ((", ", ": "), (",", ":")):
        result = feed(compiled, vocab.encode(json.dumps(value, separators=separators)), check_mask=True)
        assert not result.inconsistent, result.problem
        taken |= result.accepted
    return taken


def leaking_cases(backend: str, keyword: str):
    """(case, bare compiled) for each corpus case of `keyword` whose invalid instance the bare backend takes."""
    vocab = byte_vocab()
    for case in CASES:
        if case["keyword"] != keyword or case["position"] not in POSITIONS[backend]:
            continue
        try:
            bare = get_backend(backend).compile(spec_of(case["schema"], case["description"]), vocab)
        except UserError:
            continue
        if any(takes(bare, t["data"]) for t in case["tests"] if not t["valid"]):
            yield case, bare


@pytest.mark.parametrize(
    ("backend", "keyword"),
    [("xgrammar", k) for k in KEYWORDS]
    + [("outlines_core", k) for k in OUTLINES_KEYWORDS]
    + [("llguidance", k) for k in LLGUIDANCE_DROPS],
)
def test_the_checker_refuses_what_the_bare_backend_lets_through(backend, keyword):
    found = list(leaking_cases(backend, keyword))
    assert found, f"{backend} enforces {keyword} at every position tried: pick others"
    for case, bare in found:
        checked = with_checker(bare)
        assert isinstance(checked, CheckedCompiled), case["description"]
        gaps = compiled_gaps(bare)
        assert gaps and all(g.checker for g in gaps)  # named, and the checker takes them all
        for t in case["tests"]:
            if t["valid"]:
                assert takes(checked, t["data"]) == takes(bare, t["data"]), (case["description"], t)
            else:
                assert not takes(checked, t["data"]), (case["description"], t)


def test_llguidance_leaves_the_checker_exactly_what_it_drops():
    """llguidance, compiled lenient, drops only keywords it does not implement, each a named gap; where it
    drops none its grammar alone takes no invalid instance, and where it drops some, grammar + checker don't."""
    vocab = byte_vocab()
    bare_only = checked = 0
    for case in CASES:
        if case["keyword"] not in KEYWORDS or case["position"] not in ("root", "property", "$ref", "allOf"):
            continue
        try:
            compiled = compile_for("llguidance", spec_of(case["schema"]), vocab)[0]
        except UserError:
            continue
        gaps = compiled_gaps(compiled)
        dropped = {w.pointer for w in compiled.warnings if "Unimplemented keys" in w.message}
        assert dropped <= {g.pointer for g in gaps}, case["description"]  # every dropped keyword is a gap
        assert isinstance(compiled, CheckedCompiled) == bool(gaps), case["description"]
        bare_only += not gaps
        checked += bool(gaps)
        assert not any(takes(compiled, t["data"]) for t in case["tests"] if not t["valid"]), case["description"]
    assert bare_only >= 40 and checked >= 10


def test_a_pattern_llguidance_cannot_match_is_left_to_the_checker_not_a_refusal():
    """AWS's tag keys (`^(?!aws:).*`, cfn-lint's CloudFormation schemas): llguidance refused the whole
    schema for one look-around. Now that pattern alone is left out of its grammar, named, and enforced
    by sgcli's checker; every other keyword stays llguidance's."""
    schema = {
        "type": "object",
        "properties": {
            "Key": {"type": "string", "pattern": "^(?!aws:)[a-z:]{1,8}$"},
            "Word": {"type": "string", "pattern": "^\\bcat\\b$"},
            "Id": {"type": "string", "pattern": "^[0-9]{2}$"},
        },
        "required": ["Key", "Word", "Id"],
        "additionalProperties": False,
    }
    compiled = compile_for("llguidance", spec_of(schema), byte_vocab())[0]
    gaps = compiled_gaps(compiled)
    assert {(g.pointer, g.checker) for g in gaps} == {
        ("/properties/Key/pattern", True),
        ("/properties/Word/pattern", True),
    }
    assert isinstance(compiled, CheckedCompiled)
    assert takes(compiled, {"Key": "ab:c", "Word": "cat", "Id": "12"})
    assert not takes(compiled, {"Key": "aws:c", "Word": "cat", "Id": "12"})  # the look-ahead, by the checker
    bare = compiled.inner  # the grammar keeps the rest of the pattern: its class and its bound {1,8}
    assert takes(bare, {"Key": "aws:c", "Word": "cat", "Id": "12"})
    assert not takes(bare, {"Key": "abcdefghi", "Word": "cat", "Id": "12"})
    assert not takes(bare, {"Key": "AB", "Word": "cat", "Id": "12"})
    assert not takes(compiled, {"Key": "ab", "Word": "cat", "Id": "1x"})  # the grammar's own pattern
    assert not takes(compiled, {"Key": "ab", "Word": "cat", "Id": "12", "x": 1})
    # relaxed, DocumentDB's collection-name pattern still has `^` mid-pattern, which llguidance refuses:
    # then the pattern is left out of its grammar altogether, and the checker still enforces it
    mid_anchors = {"type": "string", "pattern": "^(^(?!(system\\x2e)))(^[_a-zA-Z0-9])([^$]*)$"}
    compiled = compile_for("llguidance", spec_of(mid_anchors), byte_vocab())[0]
    assert [(g.pointer, g.checker) for g in compiled_gaps(compiled)] == [("/pattern", True)]
    assert takes(compiled, "users") and not takes(compiled, "system.users") and not takes(compiled, "-x")
    # inside a Lark grammar's sub-schema there is no checker: still llguidance's refusal, never a drop
    lark = ConstraintSpec(Kind.LARK, "start: @a\n", "g.lark", subgrammars=(("a", spec_of(schema)),))
    with pytest.raises(UserError, match="look-around"):
        get_backend("llguidance").compile(lark, byte_vocab())


def test_a_pattern_llguidance_cannot_decide_beside_a_length_is_left_to_the_checker():
    """cfn-lint's IAM policy path: an unanchored search under `maxLength: 512` made llguidance say
    "Unable to determine if regex is empty" and refuse the whole schema. Now that pattern is left out of
    its grammar, which keeps the length (the string stays bounded), and the checker enforces it."""
    path = {"type": "string", "minLength": 1, "maxLength": 512, "pattern": "((/[A-Za-z0-9\\.,\\+@=_-]+)*)/"}
    schema = {
        "type": "object",
        "properties": {"Path": path, "Id": {"type": "string", "pattern": "^[0-9]{2}$"}},
        "required": ["Path", "Id"],
        "additionalProperties": False,
    }
    import llguidance as llg  # the library alone refuses it

    alone = json.dumps({"grammars": [{"json_schema": path}]})
    assert "Unable to determine if regex is empty" in llg.LLMatcher.validate_grammar_with_warnings(alone)[1][0]
    compiled = compile_for("llguidance", spec_of(schema), byte_vocab())[0]
    assert [(g.pointer, g.checker) for g in compiled_gaps(compiled)] == [("/properties/Path/pattern", True)]
    assert any("cannot decide" in w.message for w in compiled.warnings)
    assert takes(compiled, {"Path": "/a/b/", "Id": "12"})
    assert not takes(compiled, {"Path": "no slash", "Id": "12"})  # the pattern, by the checker
    bare = compiled.inner
    assert takes(bare, {"Path": "no slash", "Id": "12"})
    assert not takes(bare, {"Path": "/" * 513, "Id": "12"})  # the grammar keeps the length
    assert not takes(bare, {"Path": "", "Id": "12"})
    assert not takes(compiled, {"Path": "/", "Id": "1x"})  # the grammar's own pattern


def test_gaps_are_named_at_their_pointers_through_refs_and_conditionals():
    schema = {
        "$defs": {"tags": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}},
        "type": "object",
        "properties": {
            "tags": {"$ref": "#/$defs/tags"},
            "n": {"anyOf": [{"type": "integer", "not": {"const": 3}}, {"type": "null"}]},
            "m": {"type": "integer"},
        },
        "if": {"properties": {"m": {"const": 1}}},
        "then": {"required": ["n"]},
    }
    gaps = {(g.pointer, g.keyword): g for g in schema_gaps(gen_spec_of(schema), "xgrammar")}
    assert set(gaps) == {
        ("/$defs/tags/uniqueItems", "uniqueItems"),
        ("/properties/n/anyOf/0/not", "not"),
        ("/if", "if"),
        ("/then", "then"),
    }
    # each is validated at the subschema that applies unconditionally where it sits
    assert gaps[("/$defs/tags/uniqueItems", "uniqueItems")].anchors == ("/$defs/tags",)
    assert gaps[("/properties/n/anyOf/0/not", "not")].anchors == ("/properties/n",)
    assert gaps[("/if", "if")].anchors == ("",)
    assert schema_gaps(spec_of(schema), "none") == []  # the unconstrained backend is validated, not checked


@pytest.mark.parametrize("backend", ["xgrammar", "outlines_core"])
@pytest.mark.parametrize("pattern", ['^a"b$', "^a\\\\b$", "^a\\nb$", "^a\\u0022b$", "^a.b$", "^\\{(.|[\r\n])*\\}$"])
def test_a_pattern_the_backend_would_write_raw_is_left_to_the_checker(backend, pattern):
    """xgrammar and outlines-core match a pattern against the string's raw JSON text: `^a"b$` let xgrammar
    write `"a"b"`, and `.` let outlines-core write a raw quote, neither of them JSON. Such a pattern is
    left out of their grammar (which then writes an ordinary, escaped JSON string) and the checker
    enforces it on the decoded value. (ansible-lint's `[\r\n]`, raw in the pattern, made xgrammar
    refuse the schema, placed at line:col of its own EBNF as if in the file.)"""
    schema = {"type": "object", "properties": {"k": {"type": "string", "pattern": pattern}}, "required": ["k"]}
    vocab = byte_vocab()
    compiled = compile_for(backend, spec_of(schema), vocab)[0]
    gaps = [(g.pointer, g.checker) for g in compiled_gaps(compiled) if g.keyword == "pattern"]
    if backend == "xgrammar" and pattern == "^a.b$":
        assert gaps == []  # xgrammar excludes what JSON escapes from `.`: its grammar keeps the pattern
    else:
        assert gaps == [("/properties/k/pattern", True)]
    for raw in ('{"k":"a"b"}', '{"k":"a\\qb"}', '{"k":"a\nb"}', '{"k":"{\r}"}', '{"k":"a\x01b"}'):
        assert not feed(compiled, vocab.encode(raw)).accepted, raw  # never text that is not JSON
    for value in ('a"b', "a\\b", "a\nb", "axb", "{\n}"):
        text = json.dumps({"k": value})
        valid = not schema_errors(schema, {"k": value})
        accepted = feed(compiled, vocab.encode(text)).accepted
        # where its grammar keeps the pattern, xgrammar refuses what JSON escapes: sound, not complete
        assert accepted == valid if gaps else (valid or not accepted), (text, valid)


@pytest.mark.parametrize("pattern", ["^(vpc-)([a-z0-9]+)\\Z", "\\A[0-9a-f]+\\Z"])
def test_a_pattern_xgrammar_reads_with_letters_for_anchors_is_left_to_the_checker(pattern):
    """cfn-lint's CloudFormation schemas end patterns with `\\Z`: xgrammar read it as the letter Z (and
    warned), so its grammar demanded `vpc-abZ`, which jsonschema (Python's re: an anchor) then refused.
    The pattern is left to the checker, which reads it as the check does."""
    schema = {"type": "object", "properties": {"k": {"type": "string", "pattern": pattern}}, "required": ["k"]}
    vocab = byte_vocab()
    compiled = compile_for("xgrammar", spec_of(schema), vocab)[0]
    assert [(g.pointer, g.checker) for g in compiled_gaps(compiled) if g.keyword == "pattern"] == [
        ("/properties/k/pattern", True)
    ]
    for value in ("vpc-ab", "vpc-abZ", "0af", "0afZ", "Z"):
        text = json.dumps({"k": value})
        assert feed(compiled, vocab.encode(text)).accepted == (not schema_errors(schema, {"k": value})), text


def test_patterns_a_backend_cannot_take_are_declared_before_compiling_and_rank_auto():
    """The patterns a backend's grammar relaxes or leaves out are known from its table before any
    compile (`SchemaKeywords.raw_patterns`, `unmatchable`): `auto` ranks by them, and the compile's own
    warnings add no second gap for them."""
    from sgcli.backends.auto import ranked

    quote = {"type": "object", "properties": {"k": {"type": "string", "pattern": '^a"b$'}}, "required": ["k"]}
    look = {"type": "object", "properties": {"k": {"type": "string", "pattern": "^(?!x)[a-z]+$"}}}
    declared = {
        (name, label): [(g.pointer, g.checker) for g in schema_gaps(spec_of(schema), name) if g.keyword == "pattern"]
        for label, schema in (("quote", quote), ("look", look))
        for name in ("llguidance", "xgrammar", "outlines_core")
    }
    assert declared[("xgrammar", "quote")] == declared[("outlines_core", "quote")] == [("/properties/k/pattern", True)]
    assert declared[("llguidance", "quote")] == []
    # a lookaround: each grammar takes the pattern relaxed (xgrammar had ignored the lookahead itself, with a
    # warning that made the same gap only after compiling: auto chose it saying it enforced every keyword)
    for name in ("llguidance", "xgrammar", "outlines_core"):
        assert declared[(name, "look")] == [("/properties/k/pattern", True)], name
    assert [name for name, _ in ranked(spec_of(look))][0] == "llguidance"  # a tie: the order breaks it
    compiled = compile_for("xgrammar", spec_of(quote), byte_vocab())[0]
    assert [g.pointer for g in compiled_gaps(compiled) if g.keyword == "pattern"] == ["/properties/k/pattern"]


def test_inside_a_grammar_xgrammar_refuses_a_pattern_it_would_write_raw():
    """No checker follows a schema inside a grammar: there such a pattern is refused at its line:col."""
    inner = {"type": "object", "properties": {"s": {"type": "string", "pattern": '^a"b$'}}}
    fmt = {"type": "tag", "begin": "<a>", "content": {"type": "json_schema", "json_schema": inner}, "end": "</a>"}
    tag = ConstraintSpec(Kind.STRUCTURAL_TAG, json.dumps({"type": "structural_tag", "format": fmt}, indent=1), "t.json")
    lark = ConstraintSpec(Kind.LARK, "start: @a\n", "g.lark", subgrammars=(("a", spec_of(inner)),))
    for spec in (tag, lark):
        with pytest.raises(UserError, match="no checker follows a schema inside a grammar") as info:
            get_backend("xgrammar").compile(spec, byte_vocab())
        assert info.value.location.line is not None
    get_backend("llguidance").compile(lark, byte_vocab())  # which escapes them


def test_xgrammars_length_bounded_strings_take_no_raw_control_character():
    """xgrammar writes a string under minLength/maxLength as `[^"\\\r\n]{2,3}`: a raw tab or U+0001 went
    in, and the output was not JSON. Its class is narrowed to what its plain strings take."""
    schema = {"type": "object", "properties": {"s": {"type": "string", "minLength": 2, "maxLength": 3}}}
    vocab = byte_vocab()
    compiled = compile_for("xgrammar", spec_of(schema), vocab)[0]
    for text, accepted in (
        ('{"s":"\x01\x02"}', False),
        ('{"s":"\tx"}', False),
        ('{"s":"ab"}', True),
        ('{"s":"abcd"}', False),
    ):
        assert feed(compiled, vocab.encode(text)).accepted == accepted, text
    # no string of its grammars takes the UTF-8 form of a surrogate, which no decoder reads
    for shape in ({"type": "string"}, {"type": "string", "maxLength": 5}):
        plain = compile_for("xgrammar", spec_of(shape), vocab)[0]
        assert feed(plain, list('"a\u00e9b"'.encode())).accepted
        assert not feed(plain, list(b'"a\xed\xb8\xbab"')).accepted, shape
    # the same strings inside a structural tag's JSON
    inner = {"type": "object", "properties": {"s": {"type": "string", "maxLength": 3}}, "required": ["s"]}
    fmt = {"type": "tag", "begin": "<a>", "content": {"type": "json_schema", "json_schema": inner}, "end": "</a>"}
    tag = ConstraintSpec(Kind.STRUCTURAL_TAG, json.dumps({"type": "structural_tag", "format": fmt}), "t.json")
    compiled = get_backend("xgrammar").compile(tag, vocab)
    assert feed(compiled, vocab.encode('<a>{"s":"ab"}</a>')).accepted
    assert not feed(compiled, vocab.encode('<a>{"s":"\x01"}</a>')).accepted


def test_draft4s_boolean_exclusive_bounds_reach_xgrammar_in_their_later_form():
    """OpenAPI 3.0's own schema is draft 4: `"minimum": 0, "exclusiveMinimum": true`. xgrammar read only
    the later, numeric form and refused the whole schema ("Value must be a number", no position)."""
    schema = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {
            "a": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
            "b": {"type": "number", "maximum": 5, "exclusiveMaximum": False},
            "c": {"type": "number", "exclusiveMaximum": True},  # no bound: nothing to exclude
        },
        "required": ["a", "b", "c"],
    }
    vocab = byte_vocab()
    compiled = compile_for("xgrammar", spec_of(schema), vocab)[0]
    for value, valid in (
        ({"a": 0.5, "b": 5, "c": 9}, True),
        ({"a": 0, "b": 5, "c": 9}, False),
        ({"a": 1, "b": 5.5, "c": 9}, False),
    ):
        assert (schema_errors(schema, value) == []) == valid
        assert feed(compiled, vocab.encode(json.dumps(value, separators=(",", ":")))).accepted == valid, value


def test_a_key_no_draft_validates_by_is_no_gap():
    """Snowplow's schemas carry a `self` object (vendor, name, version) beside `type`; outlines-core's walk
    called it an ignored keyword, so it was listed as a gap the checker "enforced". It constrains nothing."""
    schema = {
        "self": {"vendor": "com.acme", "name": "click", "format": "jsonschema", "version": "1-0-0"},
        "x-note": {"minimum": 3},
        "type": "object",
        "properties": {"self": {"type": "integer", "minimum": 0}},
    }
    gaps = {g.pointer for g in schema_gaps(spec_of(schema), "outlines_core")}
    assert gaps == {"/properties/self/minimum"}  # a property named `self` is a schema like any other


def test_id_relative_refs_resolve_to_their_pointer():
    schema = {
        "$id": "https://example.com/root.json",
        "$defs": {"tags": {"$id": "tags.json", "type": "array", "uniqueItems": True}},
        "type": "object",
        "properties": {"a": {"$ref": "tags.json"}, "b": {"$ref": "https://example.com/tags.json"}},
    }
    gaps = schema_gaps(gen_spec_of(schema), "xgrammar")
    assert [(g.pointer, g.anchors) for g in gaps] == [("/$defs/tags/uniqueItems", ("/$defs/tags",))]
    checked = compile_for("xgrammar", gen_spec_of(schema), byte_vocab())[0]
    assert takes(checked, {"a": [1, 2], "b": [3]}) and not takes(checked, {"b": [3, 3]})


def test_a_dead_string_is_masked_before_it_is_written():
    """maxLength, enum and an anchored pattern are checked on the string's prefix: the model cannot
    write itself into a string that can no longer be valid."""
    vocab = byte_vocab()
    schema = {
        "type": "object",
        "properties": {"a": {"maxLength": 3}, "b": {"enum": ["red", "green"], "anyOf": [{}, {"type": "null"}]}},
    }
    checked = compile_for("xgrammar", gen_spec_of(schema), vocab)[0]
    assert takes(checked.inner, {"a": "abcd"})  # the bare grammar would write it
    for text, refused_at in (('{"a": "abcd"}', 10), ('{"b": "rex"}', 9)):
        result = feed(checked, vocab.encode(text), check_mask=True)
        assert (result.accepted, result.taken) == (False, refused_at), (text, result)
    assert feed(checked, vocab.encode('{"a": "abc", "b": "green"}'), check_mask=True).accepted


def test_rollback_restores_the_checker_with_the_grammar():
    vocab = byte_vocab()
    checked = compile_for("xgrammar", spec_of({"type": "array", "uniqueItems": True}), vocab)[0]
    matcher = checked.matcher()
    for token in vocab.encode("[1,2"):
        assert matcher.accept(token)
    matcher.rollback(2)  # back to "[1"
    for token in vocab.encode(",1"):
        assert matcher.accept(token)
    assert not matcher.accept(vocab.encode("]")[0])  # [1,1] breaks uniqueItems
    matcher.rollback(2)
    assert all(matcher.accept(t) for t in vocab.encode(",3]")) and matcher.can_stop()


@pytest.mark.parametrize(
    "command",
    [("generate", "hi"), ("compile",), ("compare-backends", "--no-generate")],
    ids=["generate", "compile", "compare-backends"],
)
def test_nothing_enforces_is_exit_2_naming_keyword_and_position(run_cli, tmp_path, command):
    path = tmp_path / "made_up.json"
    prop = '    "a": {"type": "string", "format": "x-made-up"}'  # no backend, and not the checker, knows it
    path.write_text("\n".join(["{", '  "type": "object",', '  "properties": {', prop, "  }", "}"]))
    result = run_cli(command[0], "--backend", "xgrammar", "--schema", path, *command[1:])
    assert result.exit_code == 2, result.output
    assert "made_up.json:4:29: `format` at /properties/a/format" in result.output, result.output
    assert "--allow-unenforced" in result.output


def test_compile_with_allow_unenforced_lists_them_per_row(run_cli, tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"type": "array", "uniqueItems": True, "items": {"type": "string", "format": "x-y"}}))
    result = run_cli("compile", "-b", "xgrammar", "--schema", path, "--json", "--allow-unenforced")
    assert result.exit_code == 0, result.output
    (row,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert row["checked"] == ["`uniqueItems` at /uniqueItems"]
    assert row["unenforced"] == ["`format` at /items/format"]


def test_allow_unenforced_lists_every_unenforced_keyword_in_the_record(tiny_lm, smol_tokenizer):
    from sgcli.engine.sampling import SamplingParams
    from sgcli.engine.session import PromptOptions, Request, Session

    schema = {"type": "object", "properties": {"when": {"type": "string", "format": "x-made-up"}}, "required": ["when"]}
    vocab = smol_tokenizer.vocab.padded(tiny_lm.logits_width)
    compiled = compile_for("xgrammar", spec_of(schema), vocab)[0]
    with pytest.raises(UserError, match="format` at /properties/when/format"):
        guarantee(compiled)
    kept = guarantee(compiled, allow_unenforced=True)
    assert kept.unenforced == [{"pointer": "/properties/when/format", "keyword": "format", "backend": "xgrammar"}]
    session = Session(
        tiny_lm, smol_tokenizer, compiled, SamplingParams(temperature=1.0, seed=0), 60, (), PromptOptions(raw=True),
        weakened=kept.weakened, unenforced=kept.unenforced,
    )  # fmt: skip
    record = list(session.stream(Request(0, "Answer:")))[-1].record
    assert record["unenforced"] == kept.unenforced and record["weakened"] == kept.weakened


def test_auto_prefers_the_backend_that_leaves_the_fewest_keywords_unenforced(monkeypatch):
    # llguidance (lenient) and xgrammar both leave uniqueItems to the checker: a tie, llguidance by the order
    spec = spec_of({"type": "array", "items": {"type": "integer"}, "uniqueItems": True})
    compiled, fallbacks = compile_for("auto", spec, byte_vocab())
    assert (compiled.backend, fallbacks) == ("llguidance", [])
    assert isinstance(compiled, CheckedCompiled) and not takes(compiled, [1, 1]) and takes(compiled, [1, 2])
    # were outlines-core's grammar to enforce uniqueItems, it would come first; refused, auto goes on to
    # llguidance, and names why outlines-core was passed over
    outlines = type(get_backend("outlines_core"))
    table = outlines.capabilities.schema_keywords
    better = dataclasses.replace(
        table, enforced=table.enforced | {"uniqueItems"}, typed=frozenset(), first_branch=False
    )
    monkeypatch.setattr(outlines, "capabilities", dataclasses.replace(outlines.capabilities, schema_keywords=better))
    assert [name for name, _ in ranked(spec)] == ["outlines_core", "llguidance", "xgrammar"]
    tried = []

    def compile_one(backend):
        tried.append(backend.name)
        if backend.name == "outlines_core":
            raise UserError("stands in for a refusal")
        return backend.compile(spec, byte_vocab())

    from sgcli.backends.auto import compile_auto

    compiled, fallbacks = compile_auto(spec, byte_vocab(), compile_one)
    assert tried == ["outlines_core", "llguidance"] and compiled.backend == "llguidance"
    assert fallbacks == [{"backend": "outlines_core", "reason": "stands in for a refusal"}]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": True, "b": {"not": True}}},
        {
            "$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}, "uniqueItems": True}},
            "$ref": "#/$defs/node",
        },
        {
            "$id": "https://example.com/tree",
            "$dynamicAnchor": "node",
            "type": "object",
            "properties": {"kids": {"type": "array", "items": {"$dynamicRef": "#node"}}},
        },
        {"$schema": "https://example.com/no-such-draft", "type": "array", "uniqueItems": True},
    ],
    ids=["true-subschema", "ref-cycle", "dynamic-ref", "unknown-draft"],
)
def test_hostile_schemas_are_handled_not_crashed(run_cli, tmp_path, schema):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(schema))
    result = run_cli("masks", "--backend", "xgrammar", "--schema", path, "--text", "[]")
    assert result.exit_code in (0, 1, 2) and "internal error" not in result.output, result.output
    for backend in ("xgrammar", "llguidance"):
        try:
            compiled = compile_for(backend, spec_of(schema), byte_vocab())[0]
        except UserError:
            continue
        guarantee(compiled, allow_unenforced=True)  # never raises anything but a UserError
        takes(compiled, {})


_STRING_OR_NULL = {"anyOf": [{"type": "string"}, {"type": "null"}]}  # xgrammar drops what stands beside it
GENERATED = {
    "type": "object",
    "properties": {
        "s": {**_STRING_OR_NULL, "maxLength": 3},
        "p": {**_STRING_OR_NULL, "pattern": "^[a-c]+$"},
        "n": {"type": "integer", "not": {"const": 3}},
        "tags": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
        "pick": {"oneOf": [{"type": "integer", "minimum": 100}, {"type": "integer", "maximum": 200}]},
    },
    "required": ["s", "p", "n", "tags", "pick"],
    "additionalProperties": False,
}


def test_random_model_outputs_through_the_checker_all_validate(tiny_lm, smol_tokenizer):
    """xgrammar leaves maxLength and pattern (beside anyOf), not, uniqueItems and oneOf to the checker; a
    random model tries every token the mask lets through, and writes strings of any length and bytes
    (multi-byte characters cut across tokens, \\u escapes) where the bare grammar lets it."""
    from sgcli.engine.sampling import SamplingParams
    from sgcli.engine.session import PromptOptions, Request, Session

    spec = dataclasses.replace(spec_of(GENERATED), json_options=JsonOptions(whitespace="compact"))
    vocab = smol_tokenizer.vocab.padded(tiny_lm.logits_width)
    bare = get_backend("xgrammar").compile(spec, vocab)
    checked = with_checker(bare)
    assert {g.keyword for g in compiled_gaps(bare)} == {"maxLength", "pattern", "not", "uniqueItems", "oneOf"}
    validator = jsonschema.Draft202012Validator(GENERATED)

    def run(compiled, seed):
        params = SamplingParams(temperature=1.0, seed=seed)
        session = Session(tiny_lm, smol_tokenizer, compiled, params, 160, (), PromptOptions(raw=True))
        return list(session.stream(Request(seed, "Answer:")))[-1].record

    for seed in range(6):
        record = run(checked, seed)
        assert record["finish_reason"] == "stop" and record["valid"], record
        assert validator.is_valid(json.loads(record["output"])), record["output"]
    # the same seeds through the bare grammar: some output breaks the schema
    assert any(not run(bare, seed)["valid"] for seed in range(6))


def test_sgcli_test_runs_a_schema_through_the_checker(run_cli, tmp_path):
    """`sgcli test` judges a schema as generation decodes it: xgrammar's grammar plus the checker."""
    cases = tmp_path / "tags.test.yaml"
    schema = json.dumps({"type": "array", "items": {"type": "integer"}, "uniqueItems": True})
    cases.write_text(
        f"grammar: {{kind: json_schema, text: '{schema}'}}\n"
        "cases:\n  - {input: '[1, 2]', accept: true}\n  - {input: '[1, 1]', accept: false}\n"
    )
    result = run_cli("test", cases, "--backend", "xgrammar", "--json")
    assert result.exit_code == 0, result.output
    bare = get_backend("xgrammar").compile(spec_of(json.loads(schema)), byte_vocab())
    assert takes(bare, [1, 1])  # the case passes only because the checker refuses it


def test_a_surrogate_pair_written_as_escapes_counts_as_one_character():
    vocab = byte_vocab()
    checked = compile_for("xgrammar", spec_of({"maxLength": 2}), vocab)[0]
    pair = "\\ud83d\\udca9"  # one character, U+1F4A9, in ASCII escapes
    assert feed(checked, vocab.encode(f'"{pair}{pair}"'), check_mask=True).accepted
    assert not feed(checked, vocab.encode(f'"{pair}{pair}{pair}"'), check_mask=True).accepted


# ---- schemas inside a grammar: the checker does not follow them, so each keyword is enforced or refused ----


def lark_with_sub(schema, name="s") -> ConstraintSpec:
    sub = spec_of(schema, f"{name}.schema.json")
    return ConstraintSpec(Kind.LARK, f'start: "v=" @{name}\n', "wrap.lark", subgrammars=((name, sub),))


@pytest.mark.parametrize("backend", ["llguidance", "xgrammar"])
def test_a_sub_schema_keyword_is_enforced_by_the_grammar_or_refused(backend):
    """Every corpus case as a Lark grammar's `@s` sub-schema: the backend refuses the grammar, or sgcli refuses
    a keyword it leaves unenforced (naming it in the sub-schema's file), or its grammar takes no invalid
    instance. Nothing in between: that was the silent weakening."""
    vocab = byte_vocab()
    outcomes = {"compile refused": 0, "keyword refused": 0, "enforced": 0}
    for case in CASES:
        if case["keyword"] not in KEYWORDS or case["position"] not in ("root", "property", "$ref"):
            continue
        spec = lark_with_sub(case["schema"])
        try:
            compiled = compile_for(backend, spec, vocab)[0]
        except UserError:
            outcomes["compile refused"] += 1
            continue
        try:
            guarantee(compiled)
        except UserError as exc:
            assert "in @s" in exc.message and exc.location.path == "s.schema.json", exc.message
            assert exc.location.line is not None, exc.message
            outcomes["keyword refused"] += 1
            continue
        outcomes["enforced"] += 1
        for t in case["tests"]:
            taken = any(
                feed(compiled, vocab.encode("v=" + json.dumps(t["data"], separators=seps))).accepted
                for seps in ((", ", ": "), (",", ":"))
            )
            assert t["valid"] or not taken, (case["description"], t)
    # both ways are taken (llguidance refuses in its compile what it does not implement, xgrammar compiles it)
    assert outcomes["enforced"] >= 40 and outcomes["compile refused"] + outcomes["keyword refused"] >= 10, outcomes


def test_a_keyword_refused_inside_a_grammar_is_named_where_the_user_wrote_it():
    schema = '{\n  "type": "array",\n  "items": {"type": "string"},\n  "uniqueItems": true\n}'
    inline = ConstraintSpec(Kind.LARK, 'start: "tags: " obj\nobj: %json ' + schema + "\n", "inline.lark")
    schema_file = ConstraintSpec(Kind.JSON_SCHEMA, schema, "t.json")
    sub = ConstraintSpec(Kind.LARK, 'start: "tags: " @t\n', "wrap.lark", subgrammars=(("t", schema_file),))
    tag_doc = {"structures": [{"begin": "<t>", "schema": json.loads(schema), "end": "</t>"}], "triggers": ["<t"]}
    tag = ConstraintSpec(Kind.STRUCTURAL_TAG, json.dumps(tag_doc, indent=2), "tag.json")
    expected = {
        "inline.lark": ("inline.lark:5:3", "in %json #1"),
        "wrap.lark": ("t.json:4:3", "in @t"),
        "tag.json": ("tag.json:10:9", "in /structures/0/schema"),
    }
    for spec in (inline, sub, tag):
        compiled = compile_for("xgrammar", spec, byte_vocab())[0]
        with pytest.raises(UserError) as info:
            guarantee(compiled)
        where, label = expected[spec.origin]
        assert f"{where}: `uniqueItems` at /uniqueItems {label}: not enforced by xgrammar" in info.value.message
        kept = guarantee(compiled, allow_unenforced=True)
        assert kept.unenforced == [
            {"pointer": "/uniqueItems", "keyword": "uniqueItems", "backend": "xgrammar", "within": label[3:]}
        ]
        with pytest.raises(UserError, match="Unimplemented keys"):  # llguidance refuses it in a grammar
            compile_for("llguidance", spec, byte_vocab())


def test_auto_lint_and_generate_agree_on_a_sub_schema_keyword(run_cli, tmp_path):
    (tmp_path / "t.json").write_text('{"type": "array", "uniqueItems": true}')
    (tmp_path / "wrap.lark").write_text('start: "tags: " @t\n')
    sub = f"t={tmp_path / 't.json'}"
    lint = run_cli("lint", tmp_path / "wrap.lark", "--sub", sub)
    assert lint.exit_code == 1 and "t.json:1:19: J005 `uniqueItems` at /uniqueItems in @t" in lint.output, lint.output
    assert "generate would use xgrammar: llguidance refused it" in lint.output
    compiled = run_cli("compile", tmp_path / "wrap.lark", "--sub", sub)
    assert compiled.exit_code == 2 and "t.json:1:19: `uniqueItems` at /uniqueItems in @t" in compiled.output
    # a sub-schema every backend enforces stays clean
    (tmp_path / "t.json").write_text('{"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2}')
    assert run_cli("lint", tmp_path / "wrap.lark", "--sub", sub).exit_code == 0


def test_only_real_inline_schemas_count_and_an_unreadable_one_is_refused_whole():
    from sgcli.dialects.embedded import embedded_schemas

    text = (
        'start: "%json {\\"uniqueItems\\": true}" a b  // %json {"not": {}}\n'
        'a: /%json/ %json {"type": "integer", "minimum": NaN}\n'
        'b: %json {"type": "string"}\n'
    )
    spec = ConstraintSpec(Kind.LARK, text, "g.lark")
    found = embedded_schemas(spec)
    assert [(e.label, e.spec.text) for e in found] == [
        ("%json #1", '{"type": "integer", "minimum": NaN}'),
        ("%json #2", '{"type": "string"}'),
    ]
    assert str(found[1].location("/type")) == "g.lark:3:11"
    (gap,) = schema_gaps(spec, "xgrammar")  # NaN is no JSON: nothing of that schema counts as enforced
    assert (gap.keyword, gap.embedded.label, gap.checker) == ("$schema", "%json #1", False)
    assert "could not read the schema" in gap.reason


def test_the_stop_ids_a_string_screen_looks_at_are_those_allowed():
    """`_allowed_stops` replaced `np.intersect1d` (5.6 ms a step in a free string, sorting ~49k allowed
    ids): the same answer, on random sorted id sets."""
    import random
    from types import SimpleNamespace

    import numpy as np

    from sgcli.backends.token_screen import _allowed_stops

    rng = random.Random(5)
    for _ in range(200):
        ids = np.array(sorted(rng.sample(range(300), rng.randint(0, 60))), dtype=np.int64)
        stops = frozenset(rng.sample(range(300), rng.randint(0, 4)))
        plan = SimpleNamespace(stop_ids=stops)
        expected = np.intersect1d(ids, np.array(sorted(stops), dtype=np.int64))
        assert _allowed_stops(plan, ids).tolist() == expected.tolist()


@pytest.mark.parametrize(("backend", "step"), [("llguidance", 9), ("xgrammar", 9), ("outlines_core", 60)])
def test_random_walks_through_sgclis_matcher_are_json_and_valid(backend, step):
    """Random walks over the 256 byte tokens through grammar + checker, on a sample of the keyword-position
    corpus: every text that ends is JSON (UTF-8 included) and valid. Denser walks of the same kind
    (every 2nd case, 6 each) found xgrammar's strings taking the bytes of a surrogate (ED B8 BA: its own
    test above) and its date format taking 4519-11-31 (tests/test_formats.py)."""
    from sgcli.backends.matching import sample_strings

    vocab = byte_vocab()
    walked = 0
    for case in CASES[::step]:
        try:
            compiled = compile_for(backend, spec_of(case["schema"]), vocab)[0]
        except UserError:
            continue
        for text in sample_strings(compiled, 4, seed=1):
            walked += 1
            value = json.loads(text.decode("utf-8"))  # raises on what is not JSON
            assert schema_errors(case["schema"], value) == [], (case["description"], text)
    assert walked >= 20


@pytest.mark.parametrize("required", [[], ["x"]])
def test_llguidances_property_counts_beside_optional_properties_are_left_to_the_checker(smol_tokenizer, required):
    """llguidance counts only the properties `properties` does not list where some it lists are
    optional: `maxProperties: 1` took {"x": "a", "y": 1}, and nothing said so. Declared before compiling
    (auto ranks by it), placed by its compile warning, and enforced by the checker; where every listed
    property is required it counts them all, and nothing is left."""
    schema = {"type": "object", "properties": {"x": {"type": "string"}}, "required": required, "maxProperties": 1}
    spec = spec_of(schema)  # a dry run's grammar: it also reads names written with escapes as raw text

    def counted(gaps) -> list[str]:
        return [g.pointer for g in gaps if g.keyword != "properties"]

    declared = counted(schema_gaps(spec, "llguidance"))
    compiled = get_backend("llguidance").compile(spec, smol_tokenizer.vocab)
    checked = with_checker(compiled)
    too_many = b'{"x": "a", "y": 1}'
    assert accepts_bytes(checked, b'{"x": "a"}').accepted
    assert not accepts_bytes(checked, too_many).accepted and not schema_errors(schema, {"x": "a"})
    if required:
        assert declared == [] and counted(compiled_gaps(compiled)) == []
        assert not accepts_bytes(compiled, too_many).accepted
    else:
        assert declared == ["/maxProperties"] and counted(compiled_gaps(compiled)) == ["/maxProperties"]
        assert accepts_bytes(compiled, too_many).accepted  # the bare grammar's leak, which the checker closes
        assert [name for name, _ in ranked(spec)][0] == "xgrammar"  # whose grammar counts every property


def test_a_schema_with_embedded_ids_is_crawled_once_not_at_every_lookup(monkeypatch):
    """AsyncAPI 3.0's bundled schema (400 KB, ~100 embedded `$id`s) took `sgcli compile` 71 s: every `$ref`
    lookup through an uncrawled `referencing` registry crawled the whole schema again (10,000 crawls)."""
    import referencing

    from sgcli.backends.schema_doc import SchemaDoc

    crawls = []
    crawl = referencing.Registry.crawl
    monkeypatch.setattr(referencing.Registry, "crawl", lambda self: crawls.append(1) or crawl(self))
    n = 30
    definitions = {
        f"d{i}": {"$id": f"https://x.org/d{i}.json", "properties": {"next": {"$ref": f"https://x.org/d{i + 1}.json"}}}
        for i in range(n)
    }
    definitions[f"d{n}"] = {"$id": f"https://x.org/d{n}.json", "type": "string"}
    doc = SchemaDoc({"$id": "https://x.org/root.json", "$ref": "https://x.org/d0.json", "definitions": definitions})
    crawls.clear()  # building it crawls (once); a lookup must not
    for i in range(n):
        target, why = doc.resolve(f"/definitions/d{i}/properties/next", f"https://x.org/d{i + 1}.json")
        assert (target, why) == (f"/definitions/d{i + 1}", None)
    assert crawls == [], len(crawls)


def test_a_meta_schema_copy_embedded_under_its_id_does_not_take_over_the_drafts_uri():
    """AsyncAPI 2.0.0-rc1 (draft 7) embeds draft 4's meta-schema under `definitions`, with its `id` and
    `$schema`. jsonschema reads `http://json-schema.org/draft-04/schema#/...` as the real meta-schema;
    so does the walk: the copy, crawled under that URI, had sent `#/definitions/simpleTypes` inside it
    to the root, where nothing is, and the schema was refused."""
    from sgcli.backends.schema_doc import SchemaDoc

    copy = {"id": "http://json-schema.org/draft-04/schema", "$schema": "http://json-schema.org/draft-04/schema"}
    copy["definitions"] = {"simpleTypes": {"enum": ["string", "integer"]}}
    copy["properties"] = {"type": {"items": {"$ref": "#/definitions/simpleTypes"}}}
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema",
        "$id": "https://x.org/root.json",
        "properties": {"type": {"$ref": "http://json-schema.org/draft-04/schema#/properties/type"}},
        "definitions": {"http://json-schema.org/draft-04/schema": copy},
    }
    doc = SchemaDoc(schema)
    assert doc.resolve("/properties/type", "http://json-schema.org/draft-04/schema#/properties/type") == (None, None)


def test_a_value_jsonschema_cannot_judge_is_refused_not_passed():
    """`1E999` is infinity to Python's JSON reader; jsonschema's float `multipleOf` raised OverflowError
    on it, the checker took the exception for "valid", and the `not` beside it went unchecked: random
    models stopped at `{"price":26903240E531369896}` with `valid: null` and exit 0."""
    schema = {"properties": {"price": {"type": "number", "multipleOf": 0.5, "not": {"minimum": 1000}}}}
    compiled = compile_for("xgrammar", spec_of(schema), byte_vocab())[0]
    assert isinstance(compiled, CheckedCompiled)
    text = b'{"price":1E999}'
    assert not feed(compiled, compiled.vocab.encode(text.decode()), check_mask=True).accepted
    assert feed(compiled, compiled.vocab.encode('{"price":2.5}'), check_mask=True).accepted


DRAFT3_EXTENDS = {"$schema": "http://json-schema.org/draft-03/schema#", "type": "integer", "extends": {"maximum": 3}}


@pytest.mark.parametrize(
    "args",
    [
        ["compile", "--backend", "llguidance"],
        ["generate", "--engine", "openai", "--base-url", "http://127.0.0.1:9", "x"],
    ],
    ids=["compile", "generate-on-a-server"],
)
def test_a_schema_sgcli_cannot_walk_is_refused_not_taken_as_enforced(run_cli, tmp_path, args):
    """Draft 3's `extends` given one schema breaks `referencing`'s crawl: the keyword coverage caught
    the error and declared no gap (the grammar took `9` under `maximum: 3`), and the server path crashed."""
    schema = tmp_path / "d3.json"
    schema.write_text(json.dumps(DRAFT3_EXTENDS))
    command, *rest = args
    result = run_cli(command, "--schema", schema, *rest)
    assert result.exit_code == 2, result.output
    assert "cannot read the schema's structure" in result.output and "internal error" not in result.output


_O = {"o": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}
BESIDE_CASES = [  # (schema, an instance only the keyword beside $ref / enum / const refuses)
    ({"$defs": _O, "properties": {"x": {"$ref": "#/$defs/o", "required": ["b"]}}}, {"x": {"a": 1}}),
    ({"$defs": _O, "$ref": "#/$defs/o", "additionalProperties": False, "properties": {"a": {}}}, {"a": 1, "z": 2}),
    ({"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n", "maximum": 3}, 9),
    ({"type": "string", "enum": ["red", None]}, None),
    ({"type": "string", "enum": ["red", "greenish"], "maxLength": 4}, "greenish"),
    ({"type": "integer", "enum": [1, 50], "maximum": 10}, 50),
    ({"type": "integer", "const": "x"}, "x"),
    ({"type": "string", "enum": ["ab", "cd"], "pattern": "^a"}, "cd"),
]


@pytest.mark.parametrize("backend", ["xgrammar", "outlines_core"])
@pytest.mark.parametrize(("schema", "invalid"), BESIDE_CASES)
def test_keywords_a_backend_drops_beside_ref_enum_or_const_are_left_to_the_checker(backend, schema, invalid):
    """xgrammar compiles a `$ref`, an `enum` or a `const` alone and drops the keywords beside it (outlines-core
    the ones beside `enum`/`const`): `{"type": "string", "enum": ["red", null]}` took null, with no gap named,
    and random models stopped on such outputs under `--backend auto`. Where every listed value meets the
    keywords beside, nothing is dropped and nothing is left to the checker."""
    assert not jsonschema.Draft202012Validator(schema).is_valid(invalid)
    try:
        compiled = compile_for(backend, spec_of(schema), byte_vocab())[0]
    except UserError:
        return  # refused: nothing generated
    assert not takes(compiled, invalid), compiled_gaps(compiled)
    plain = {"type": "string", "enum": ["red", "green"]}  # the common shape: every value of the type
    assert not schema_gaps(spec_of(plain), backend)


@pytest.mark.parametrize(
    ("pattern", "rust_only", "python_reading"),
    [
        ("^[a-z&&[^aeiou]]+$", "wlkkq", "a]"),  # Rust: a set difference; Python: `[a-z&&[^aeiou]` then `]+`
        ("^[[:upper:]]{2,3}$", "CCC", None),  # Rust: a POSIX class; Python: `[[:upper:]` then `]{2,3}`
    ],
)
def test_a_pattern_rust_reads_as_set_syntax_is_left_to_the_checker_on_llguidance(pattern, rust_only, python_reading):
    """llguidance reads a `pattern` with Rust's regex crate, whose classes have set operations and nesting;
    jsonschema reads the same characters literally. Random models stopped on `"wlkkq"` under auto."""
    schema = {"type": "string", "pattern": pattern, "maxLength": 8}
    assert not jsonschema.Draft202012Validator(schema).is_valid(rust_only)
    compiled = compile_for("llguidance", spec_of(schema), byte_vocab())[0]
    assert isinstance(compiled, CheckedCompiled)
    assert not takes(compiled, rust_only)
    if python_reading is not None:  # (sgcli's reader cannot read `[[:upper:]`: the checker's strings refuse more)
        assert jsonschema.Draft202012Validator(schema).is_valid(python_reading)
        assert takes(compiled, python_reading)


@pytest.mark.parametrize(
    ("schema", "invalid", "valid"),
    [
        # the grammar divides the number as written; the check the float it reads (exact_numbers): 0.07 is a
        # multiple of 0.01 to both (jsonschema's float division said 7.000000000000001 and refused it)
        ({"type": "number", "multipleOf": 0.01, "exclusiveMinimum": 0, "exclusiveMaximum": 1}, 0.075, 0.07),
        # past 2**53 a bound is read as a float: 9007199254740993 became ...992, which the grammar then took
        ({"type": "integer", "minimum": 9007199254740993, "maximum": 9007199254740995}, 9007199254740992, 2**53 + 2),
    ],
    ids=["fractional-multipleOf", "bound-past-2**53"],
)
@pytest.mark.parametrize("backend", ["llguidance", "xgrammar"])
def test_numbers_a_grammar_reads_otherwise_than_jsonschema_are_left_to_the_checker(backend, schema, invalid, valid):
    from sgcli.constraints.dialect import dialect_of

    validator = dialect_of(schema).cls(schema)
    assert not validator.is_valid(invalid) and validator.is_valid(valid)
    compiled = compile_for(backend, spec_of(schema), byte_vocab())[0]
    assert not takes(compiled, invalid), compiled_gaps(compiled)
    assert takes(compiled, valid)


@pytest.mark.parametrize(
    ("schema", "text"),
    [
        ({"type": "object", "properties": {"x": {"enum": []}}}, b'{"x":}'),  # not JSON, and taken
        ({"required": ["zz", "y"], "properties": {"y": {"type": "integer"}}}, b'{"y":-6}'),
        ({"const": {"k\u0001": 'a"b\t'}}, b'{"k\x01":"a"b\t"}'),  # a raw control character and quote
    ],
    ids=["empty-enum", "required-unlisted", "const-needing-escapes"],
)
def test_what_outlines_core_writes_wrong_is_left_to_the_checker(schema, text):
    """outlines-core's grammar took each of these, with no keyword named (random walks of the const wrote
    raw control characters 40 times in 40)."""
    compiled = compile_for("outlines_core", spec_of(schema), byte_vocab())[0]
    assert isinstance(compiled, CheckedCompiled)
    assert not feed(compiled, compiled.vocab.encode(text.decode()), check_mask=True).accepted


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"type": "array", "minItems": 2}, [1, "a"], [1]),
        ({"type": "array", "contains": {"type": "integer"}, "minContains": 2}, ["a", 1, 2], ["a", 1]),
        ({"type": ["object", "array"], "minItems": 2}, [None, None], [None]),
    ],
)
def test_xgrammar_strict_mode_does_not_close_an_array_that_must_hold_items(schema, valid, invalid):
    """For generation sgcli compiles in xgrammar's strict mode, which reads a missing `items` as none
    allowed: these schemas were refused ("minItems is greater than the number of prefixItems, but
    additional items are not allowed: 2 > 0"), a message about keywords they do not have."""
    compiled = compile_for("xgrammar", spec_of(schema).for_generation(), byte_vocab())[0]
    assert takes(compiled, valid) and not takes(compiled, invalid)


@pytest.mark.parametrize(
    ("backend", "schema", "text"),
    [
        # a negated class leaving out a quote or backslash still took it escaped
        ("llguidance", {"type": "string", "pattern": '^[^"]*$'}, b'"\\""'),
        ("llguidance", {"type": "string", "pattern": "^[^\\\\]*$"}, b'"\\\\"'),
        ("llguidance", {"type": "string", "pattern": "^[^!-~]$"}, b'"\\""'),
        # a key written twice: two properties to the grammar, one to jsonschema
        ("llguidance", {"type": "object", "minProperties": 2}, b'{"b":1,"b":2}'),
        ("outlines_core", {"type": "object", "minProperties": 2}, b'{"b":1,"b":2}'),
        (
            "xgrammar",
            {"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 2},
            b'{"b":1,"b":2}',
        ),
        # a property name beyond ASCII was matched as an additional property
        (
            "xgrammar",
            {"properties": {"é": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
            '{"é":"x"}'.encode(),
        ),
        # bytes that are no UTF-8 text, where the checker runs: a crash (UnicodeDecodeError), or '\ud800' judged
        ("xgrammar", {"type": "object", "propertyNames": {"pattern": "^.$"}}, b'{"\xed\xa0\x80":1}'),
        ("xgrammar", {"type": "object", "propertyNames": {"pattern": "^.$"}}, b'{"\xf0\x81\x8b\xb3":1}'),
    ],
)
def test_leaks_found_by_walking_the_mask_are_left_to_the_checker(backend, schema, text):
    """Found 2026-12-06 by walking bytes through each backend's mask as decoding does: each text breaks the
    schema, and the bare grammar took it with no keyword named."""
    from sgcli.backends.matching import new_bitmask, walk

    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema, ensure_ascii=False), "s.json").for_generation()
    compiled = compile_for(backend, spec, byte_vocab())[0]
    assert isinstance(compiled, CheckedCompiled)
    w = walk(compiled.matcher(), list(text), new_bitmask(len(compiled.vocab)), follow_mask=True)
    assert w.refused is not None or not w.can_stop


ESCAPED_KEYS = [
    ({"properties": {"a": {"type": "integer"}}}, b'{"\\u0061":"x"}'),
    ({"properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}}, b'{"\\u0061":"x"}'),
    (
        {"properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": True},
        b'{"a":1,"\\u0061":"x"}',
    ),
    ({"properties": {"a/b": {"type": "integer"}}, "additionalProperties": True}, b'{"a\\/b":"x"}'),
    ({"patternProperties": {"^b": {"type": "integer"}}}, b'{"b\\u0063":"x"}'),
]


@pytest.mark.parametrize("backend", ["llguidance", "xgrammar"])
@pytest.mark.parametrize(("schema", "text"), ESCAPED_KEYS)
def test_a_key_spelled_with_escapes_cannot_pass_its_propertys_rule_when_generating(backend, schema, text):
    """Both grammars match property names as written: `"\\u0061"` was an additional key to them and `a` to
    jsonschema, so `{"\\u0061": "x"}` passed `properties: {a: integer}` with no gap named (2026-12-06).
    Generating, strings get one spelling per character (json_layout.UNIQUE_ESCAPES); a dry run judges a
    given text with every escape JSON has."""
    assert schema_errors(schema, json.loads(text))  # invalid to jsonschema
    spec = spec_of(schema).for_generation()
    compiled = compile_for(backend, spec, byte_vocab())[0]
    if backend == "xgrammar" and "patternProperties" in schema:
        assert isinstance(compiled, CheckedCompiled)  # not its grammar's to enforce: the checker's
    assert not accepts_bytes(compiled, text).accepted
    kept = [b'{"a\\"b":1}', b'{"c":"x\\ny\\t\\"\\\\"}', '{"é":"ü"}'.encode()]  # the one spelling of each stays
    for valid in kept if "additionalProperties" in schema else ():  # (else closed in xgrammar's strict mode)
        if not schema_errors(schema, json.loads(valid)):
            assert accepts_bytes(compiled, valid).accepted, valid


@pytest.mark.parametrize("backend", ["llguidance", "xgrammar"])
def test_generated_strings_hold_no_escape_a_character_has_another_spelling_for(backend):
    """Random walks of free strings and keys under generation never write `\\u` or `\\/`."""
    from sgcli.backends.matching import sample_strings

    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}
    compiled = compile_for(backend, spec_of(schema).for_generation(), byte_vocab())[0]
    texts = sample_strings(compiled, 40, seed=3)
    assert len(texts) >= 20
    for text in texts:
        assert b"\\u" not in text and b"\\/" not in text, text
        assert not schema_errors(schema, json.loads(text))


@pytest.mark.parametrize("generating", [False, True])
def test_xgrammars_first_character_of_an_additional_name_is_utf8(generating):
    """The class of an additional property's first character (`[^\\0-\\x1f\\"\\\\\\r\\na]`, beside a
    property `a`) took the bytes of a surrogate, which no UTF-8 decoder reads: narrowed like every other."""
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}
    spec = spec_of(schema).for_generation() if generating else spec_of(schema)
    compiled = get_backend("xgrammar").compile(spec, byte_vocab())
    assert not accepts_bytes(compiled, b'{"\xed\xa0\x80":"x"}').accepted
    assert accepts_bytes(compiled, '{"é":"x"}'.encode()).accepted


def test_a_schema_inside_a_lark_grammar_is_generated_with_one_spelling_per_character_too():
    """An inline `%json` and a `--sub` schema reach llguidance as schemas of their own: generating, their
    strings are narrowed as a `--schema`'s (`x{"\\u0061": "x"}` passed `properties: {a: integer}`)."""
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    inline = ConstraintSpec(Kind.LARK, f'start: "x" %json{json.dumps(schema)} | "y" %json {{"type": "string"}}\n', "g")
    sub = ConstraintSpec(Kind.LARK, 'start: "x" @s\n', "h.lark", subgrammars=(("s", spec_of(schema)),))
    for spec in (inline, sub):
        dry = compile_for("llguidance", spec, byte_vocab())[0]
        generating = compile_for("llguidance", spec.for_generation(), byte_vocab())[0]
        assert accepts_bytes(dry, b'x{"\\u0061":"x"}').accepted  # a dry run judges with every JSON escape
        assert not accepts_bytes(generating, b'x{"\\u0061":"x"}').accepted
        assert accepts_bytes(generating, b'x{"a":1}').accepted
    control = b'y"\\u0001"'  # the other inline schema: narrowed too
    assert accepts_bytes(compile_for("llguidance", inline, byte_vocab())[0], control).accepted
    assert not accepts_bytes(compile_for("llguidance", inline.for_generation(), byte_vocab())[0], control).accepted


@pytest.mark.parametrize("backend", ["llguidance", "xgrammar", "outlines_core"])
def test_draft3s_required_on_the_property_itself_is_left_to_the_checker(backend):
    """Draft 3 writes `required: true` inside the property's own subschema; every grammar took `{}` with no
    keyword named (2026-12-06). The gap is the object's `properties`, checked where the object closes."""
    draft3 = "http://json-schema.org/draft-03/schema#"
    inner = {"type": "object", "properties": {"a": {"type": "string", "required": True}, "b": {"type": "integer"}}}
    schema = {"$schema": draft3, "type": "object", "properties": {"o": inner}}
    compiled = compile_for(backend, spec_of(schema).for_generation(), byte_vocab())[0]
    assert [(g.pointer, g.anchors) for g in compiled_gaps(compiled)] == [
        ("/properties/o/properties", ("/properties/o",))
    ]
    assert not accepts_bytes(compiled, b'{"o":{}}').accepted and not accepts_bytes(compiled, b'{"o":{"b":1}}').accepted
    assert accepts_bytes(compiled, b'{"o":{"a":"x"}}').accepted and accepts_bytes(compiled, b"{}").accepted


@pytest.mark.parametrize(
    ("schema", "exact", "dropped"),
    [
        ({"const": "hello\u0000there"}, b'"hello\\u0000there"', b'"hellothere"'),
        ({"enum": ["a\u0001b", "c"]}, b'"a\\u0001b"', b'"ab"'),
        ({"const": "a\u007fb"}, b'"a\\u007fb"', b'"ab"'),
        ({"type": "string", "pattern": "^a\\x01b$"}, b'"a\\u0001b"', b'"ab"'),
    ],
)
def test_a_schema_that_asks_for_a_character_only_an_escape_writes_keeps_every_escape(schema, exact, dropped):
    """Narrowed to one spelling per character, llguidance wrote such a character as nothing: `"ab"` for
    `const: "a\\u0001b"` (2026-12-06). Such a schema keeps JSON's escapes when generating."""
    from sgcli.backends.json_layout import one_spelling_fits

    assert not one_spelling_fits(schema)
    assert one_spelling_fits({"type": "string", "pattern": "^[a-z]+\\d$", "description": "tab\there"})
    compiled = compile_for("llguidance", spec_of(schema).for_generation(), byte_vocab())[0]
    assert accepts_bytes(compiled, exact).accepted and not accepts_bytes(compiled, dropped).accepted


@pytest.mark.parametrize("text", [b"[-]", b"[" + b"1" * 4301 + b"]"])
def test_a_value_json_does_not_read_is_refused_not_a_crash(text):
    """The checker's reader raised JSONDecodeError on `-` alone (where a grammar reads on) and ValueError past
    Python's 4,300-digit integer limit: `sgcli masks` exited 3 (2026-12-06)."""
    schema = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
    compiled = compile_for("llguidance", spec_of(schema), byte_vocab())[0]
    assert isinstance(compiled, CheckedCompiled)
    assert not accepts_bytes(compiled, text).accepted


@pytest.mark.parametrize("pattern", ["^cat|dog$", "numerical|categorical|text", "^a\\$", "^a$|^b$"])
def test_outlines_core_gets_each_pattern_as_one_group(pattern):
    """outlines-core puts a pattern between quotes as it is: `^cat|dog$` became `"cat` or `dog"` (e2e:
    `{"kind":"cat}`, not JSON), and `^a\\$` lost its escaped `$` (2026-12-06)."""
    from sgcli.backends.matching import sample_strings

    schema = {"type": "object", "properties": {"kind": {"type": "string", "pattern": pattern}}, "required": ["kind"]}
    compiled = compile_for("outlines_core", spec_of(schema).for_generation(), byte_vocab())[0]
    texts = sample_strings(compiled, 8, seed=1)
    assert texts
    for text in texts:
        assert not schema_errors(schema, json.loads(text)), text


PATTERN_READINGS = [
    # shorthand classes read wider than Python's re (llguidance and xgrammar: \w and \d are ASCII to them)
    ("llguidance", {"type": "string", "pattern": "^\\W$"}, "ۿ"),
    ("llguidance", {"type": "string", "pattern": "^[^\\d]$"}, "٠"),
    ("xgrammar", {"type": "string", "pattern": "^\\D$"}, "٠"),
    ("xgrammar", {"type": "string", "pattern": "^\\s$"}, "\ufeff"),
    ("xgrammar", {"type": "string", "pattern": "^\\S$"}, "\x85"),
    ("outlines_core", {"type": "string", "pattern": "^\\w+$"}, "\u0301"),
    # xgrammar: an optional group holding an unbounded repetition took that repetition alone
    ("xgrammar", {"type": "string", "pattern": "^(a+b)?$"}, "a"),
    ("xgrammar", {"type": "string", "pattern": "^[0-9]+(-[a-z]+)?$"}, "1a"),
    # name patterns read as a `pattern` is (llguidance), and jsonschema's reading of an empty one
    ("llguidance", {"patternProperties": {'^[^"]+$': {"type": "integer"}}, "additionalProperties": False}, {'a"b': 1}),
    ("llguidance", {"patternProperties": {"^[a-z&&[^aeiou]]+$": {}}, "additionalProperties": False}, {"wlkkq": 1}),
    ("llguidance", {"patternProperties": {"^\\W+$": {}}, "additionalProperties": False}, {"ۿ": 1}),
    ("llguidance", {"patternProperties": {"": {"type": "integer"}}, "additionalProperties": False}, {"x": 1}),
]


@pytest.mark.parametrize(("backend", "schema", "value"), PATTERN_READINGS)
def test_a_pattern_a_grammar_reads_otherwise_than_jsonschema_is_left_to_the_checker(backend, schema, value):
    """Found 2026-12-06 by random walks checked with jsonschema: each value breaks the schema, and the bare
    grammar took it with no keyword named."""
    assert schema_errors(schema, value)
    text = json.dumps(value, ensure_ascii=False).encode()
    spec = spec_of(schema).for_generation()
    assert accepts_bytes(get_backend(backend).compile(spec, byte_vocab()), text).accepted  # the bare grammar
    compiled = compile_for(backend, spec, byte_vocab())[0]
    assert isinstance(compiled, CheckedCompiled)
    assert not accepts_bytes(compiled, text).accepted


@pytest.mark.parametrize(
    "schema, value",
    [
        ({"type": "string", "pattern": "^\\S+$"}, "a\x1fb"),
        (
            {"properties": {"e": {"pattern": "^[^\\s@]+@[^\\s@]+$"}}, "required": ["e"], "additionalProperties": False},
            {"e": "a\x1c@b"},
        ),
    ],
)
def test_llguidance_reads_not_whitespace_wider_than_jsonschema(schema, value):
    """Python's `\\s` holds U+001C-U+001F, Rust's (Unicode White_Space) does not, so llguidance's `\\S` and
    `[^\\s]` take them: `sgcli masks`/`test` accepted `{"e": "a\\u001c@b"}` under a closed object (found by a
    held-out tour, 2026-12-07). Generation writes no `\\u` escape there; a dry run reads every spelling."""
    assert schema_errors(schema, value)
    text = json.dumps(value).encode()  # the control character as `\\u001f`: the one spelling JSON has
    spec = spec_of(schema)  # as masks and test read it
    assert accepts_bytes(get_backend("llguidance").compile(spec, byte_vocab()), text).accepted  # the bare grammar
    compiled = compile_for("llguidance", spec, byte_vocab())[0]
    assert isinstance(compiled, CheckedCompiled)
    assert not accepts_bytes(compiled, text).accepted


DRAFT4 = "http://json-schema.org/draft-04/schema#"
ID_REF = {
    "$id": "http://x.test/r",
    "$defs": {"B": {"type": "string"}},
    "properties": {
        "c": {"$id": "http://x.test/c", "$defs": {"B": {"type": "integer"}}, "properties": {"p": {"$ref": "#/$defs/B"}}}
    },
}


@pytest.mark.parametrize(
    ("backend", "schema", "text"),
    [
        # numbers an enum/const lists that a grammar writes as another number (an enum or const of such
        # numbers alone is refused: test_an_enum_of_numbers_no_grammar_writes_exactly_is_enforced_by_nothing)
        ("llguidance", {"enum": [123456789.12345679, 1]}, b"123456789.1234568"),
        # exclusive bounds compared in decimal (0.99999999999999999 is 1.0 to jsonschema)
        ("llguidance", {"type": "number", "exclusiveMaximum": 1}, b"0.99999999999999999"),
        (
            "llguidance",
            {"$schema": DRAFT4, "type": "number", "maximum": 1, "exclusiveMaximum": True},
            b"0.99999999999999999",
        ),
        # a hostname past 253 characters
        (
            "llguidance",
            {"type": "string", "format": "hostname"},
            json.dumps(".".join(["a" * 63] * 3 + ["a" * 62])).encode(),
        ),
        # `#/...` inside a subschema with its own $id, resolved against the root
        ("xgrammar", ID_REF, b'{"c":{"p":"s"}}'),
        ("outlines_core", ID_REF, b'{"c":{"p":"s"}}'),
    ],
)
def test_values_a_grammar_reads_otherwise_than_jsonschema_are_left_to_the_checker(backend, schema, text):
    """Found 2026-12-06 by random walks checked with jsonschema: the bare grammar took each text, which breaks
    the schema, with no keyword named."""
    assert schema_errors(schema, json.loads(text))
    compiled = compile_for(backend, spec_of(schema).for_generation(), byte_vocab())[0]
    assert isinstance(compiled, CheckedCompiled)
    assert not accepts_bytes(compiled, text).accepted


D7 = "http://json-schema.org/draft-07/schema#"
D4 = "http://json-schema.org/draft-04/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"
D7_TUPLE = {"type": "array", "items": [{"type": "integer"}, {"type": "string"}], "additionalItems": False}


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        # draft 7 knows no prefixItems: `items` applies to every element ([1] is invalid there)
        (
            {"$schema": D7, "type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "string"}},
            ["a"],
            [1],
        ),
        # 2020-12 knows no additionalItems: prefixItems applies (llguidance dropped it beside additionalItems)
        ({"type": "array", "prefixItems": [{"type": "integer"}], "additionalItems": False}, [1], ["x"]),
        # up to draft 7 a $ref's siblings are ignored (refused as unsatisfiable; outlines-core took the sibling)
        (
            {"$schema": D7, "$ref": "#/definitions/a", "type": "string", "definitions": {"a": {"type": "integer"}}},
            3,
            "x",
        ),
        (
            {
                "$schema": D4,
                "properties": {"p": {"$ref": "#/definitions/a", "enum": [7]}},
                "definitions": {"a": {"type": "integer", "maximum": 5}},
            },
            {"p": 3},
            {"p": 7},
        ),
        # a companion without its keyword, and draft 4 knows no const
        ({"$schema": D7, "type": "string", "then": {"type": "integer"}}, "x", None),
        ({"$schema": D4, "type": "integer", "const": 1}, 2, None),
        # up to 2019-09 a list `items` is a tuple, `additionalItems` the rest (xgrammar refused the list)
        ({"$schema": D7, **D7_TUPLE}, [1, "a"], [1, "a", 3]),
        (
            {"$schema": D2019, "type": "array", "items": [{"type": "integer"}], "additionalItems": {"type": "string"}},
            [1],
            [1, 2],
        ),
        ({"$schema": D4, **D7_TUPLE}, [1, "a"], ["a", 1]),
    ],
    ids=[
        "d7-prefixItems",
        "2020-additionalItems",
        "d7-ref-sibling",
        "d4-ref-enum",
        "then-alone",
        "d4-const",
        "d7-tuple",
        "2019-tuple-rest",
        "d4-tuple",
    ],
)
@pytest.mark.parametrize("backend", ["llguidance", "xgrammar", "outlines_core"])
def test_each_backend_reads_a_schema_as_its_draft_does(backend, schema, valid, invalid):
    """The libraries read every draft's keywords wherever they meet them; jsonschema reads the schema's
    own draft. Each gets the schema without what its draft ignores (`draft_reading`), so a valid value
    is taken and an invalid one refused, by grammar and checker together, as generation compiles it."""
    validator = jsonschema.validators.validator_for(schema)(schema)
    assert validator.is_valid(valid) and (invalid is None or not validator.is_valid(invalid))
    compiled = compile_for(backend, spec_of(schema).for_generation(), byte_vocab())[0]
    assert takes(compiled, valid)
    if invalid is not None:
        assert not takes(compiled, invalid), compiled_gaps(compiled)


def test_the_first_byte_of_a_character_no_pattern_can_take_is_refused():
    """`^\\d$` after "3": the checker took a token ending in the first byte of a character (0xD9 leads
    Arabic-Indic digits, which `re` reads as digits) and outlines-core's generation backtracked out of
    that dead end until it gave up, 15 outputs in 16. A lead byte whose characters are few is tried."""
    import regex

    from sgcli.backends.json_strings import StringRules, string_dead

    rules = StringRules(patterns=[regex.compile(r"^\d$")], ascii_closed=[False])
    assert string_dead(rules, "3", b"\xd9")  # U+0640..U+067F: none fits after a whole match
    assert string_dead(rules, "", b"\xd9") is None  # U+0660 is a digit: still possible
    assert string_dead(rules, "", b"\xe4") is None  # 4,096 candidates: not tried, never refused


@pytest.mark.parametrize("backend", ["outlines_core", "llguidance", "xgrammar"])
def test_an_integer_past_its_bound_that_can_only_grow_is_a_dead_end_at_once(backend):
    """outlines-core leaves `maximum` to the checker, which refused every token that ends `404` and none
    that adds a digit: the integer grew to --max-tokens (15 of 32 outputs). Where the grammar offers no
    fraction or exponent, a number past its bound allows nothing, and decoding backtracks."""
    from sgcli.backends.base import allowed_ids
    from sgcli.backends.matching import new_bitmask

    schema = {"type": "object", "properties": {"age": {"type": "integer", "minimum": 0, "maximum": 99}}}
    compiled = compile_for(backend, spec_of(schema).for_generation(), byte_vocab())[0]
    matcher, vocab = compiled.matcher(), compiled.vocab
    assert all(matcher.accept(t) for t in vocab.encode('{"age":40'))
    bitmask = new_bitmask(len(vocab))
    matcher.fill_mask(bitmask)
    assert allowed_ids(bitmask, len(vocab)).size  # `40` is within bounds: it may end or take a digit
    if isinstance(compiled, CheckedCompiled):
        assert matcher.accept(vocab.encode("4")[0])
        matcher.fill_mask(bitmask)
        assert not allowed_ids(bitmask, len(vocab)).size and "past `maximum` 99" in matcher.error
    else:  # the grammar enforces the bound itself
        assert not matcher.accept(vocab.encode("4")[0])


def test_a_number_past_its_bound_is_read_at_any_length_and_only_where_a_bound_applies():
    """int() of 4,301 digits raised ValueError inside fill_mask (exit 3) while a runaway integer grew."""
    from sgcli.backends.schema_plan import CheckPlan

    schema = {"type": "object", "properties": {"a": {"type": "integer", "maximum": 99}, "b": {"type": "integer"}}}
    plan = CheckPlan(schema, ["/properties/a", "/properties/b"], byte_vocab())
    assert "past `maximum` 99" in plan.digits_refused(("/properties/a",), b"1" * 5000)
    assert plan.digits_refused(("/properties/b",), b"1" * 5000) is None
    assert plan.digits_refused(("/properties/b", "/properties/a"), b"100") == "past `maximum` 99 at /properties/a"


def test_draft_reading_keeps_draft_3s_required_beside_a_ref_and_sees_escaped_keys():
    from sgcli.backends.draft_reading import as_its_draft_reads

    d3 = {
        "$schema": "http://json-schema.org/draft-03/schema#",
        "properties": {"a": {"$ref": "#/definitions/x", "required": True}},
        "definitions": {"x": {"type": "integer"}},
    }
    assert as_its_draft_reads(d3) is d3  # `required: true` is the parent's properties', not the $ref's sibling
    text = '{"$schema": "' + D7 + '", "type": "array", "pr\\u0065fixItems": [{}], "items": {"type": "string"}}'
    assert "prefixItems" not in as_its_draft_reads(json.loads(text), text)


def test_a_tuple_of_drafts_before_2020_is_respelled_nested_and_where_a_ref_points_into_it():
    from sgcli.backends.draft_reading import tuples_as_prefix_items

    nested = {"items": [{"items": [{"type": "integer"}], "additionalItems": False}], "additionalItems": {"items": [{}]}}
    schema = {
        "$schema": D7,
        "properties": {"n": nested, "a": {"$ref": "#/properties/n/items/0/items/0"}, "b": {"$ref": "#/definitions/x"}},
        "definitions": {"x": {"$ref": "#/properties/n/additionalItems/items/0"}},
    }
    text = json.dumps(schema)
    read = tuples_as_prefix_items(schema, text)
    assert read["properties"]["n"] == {
        "prefixItems": [{"prefixItems": [{"type": "integer"}], "items": False}],
        "items": {"prefixItems": [{}]},
    }
    assert read["properties"]["a"] == {"$ref": "#/properties/n/prefixItems/0/prefixItems/0"}
    assert read["definitions"]["x"] == {"$ref": "#/properties/n/items/prefixItems/0"}
    assert read["properties"]["b"] == {"$ref": "#/definitions/x"} and json.loads(text) == schema  # a copy
    for untouched in ({"$schema": D7, "items": {"type": "integer"}}, {"prefixItems": [{}], "items": False}):
        assert tuples_as_prefix_items(untouched, json.dumps(untouched)) is untouched


NAME_PATTERNS = [
    {"type": "object", "properties": {"a": {"type": "integer"}}, "patternProperties": {"^x-": {}}},
    {"type": "object", "patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
    {"patternProperties": {"^x": {"type": "integer"}, "y$": {"type": "string"}}, "additionalProperties": False},
]


@pytest.mark.parametrize("generate", [False, True], ids=["dry run", "generate"])
@pytest.mark.parametrize("schema", NAME_PATTERNS)
def test_xgrammar_takes_every_name_patternproperties_admits(schema, generate):
    """xgrammar matched a name against the whole pattern (`^x-` took only `x-`) and dropped the
    `additionalProperties` beside it: `{"a": 1, "x-foo": 2}` was refused, with no warning (2026-12-06).
    Its grammar is now open there, and the checker enforces the rest as jsonschema reads it."""
    closed = dict(schema, additionalProperties=schema.get("additionalProperties", False))
    spec = spec_of(closed)
    compiled = compile_for("xgrammar", spec.for_generation() if generate else spec, byte_vocab())[0]
    assert isinstance(compiled, CheckedCompiled)
    for value in (
        {"a": 1, "x-foo": 2},
        {"x-foo": 2},
        {"xy": 1},
        {"xy": "s"},
        {"ab": 1},
        {"ab": "s"},
        {"a": 1},
        {"zy": "s"},
        {"zy": 1},
        {"xy": 1, "ab": "s"},
    ):
        assert takes(compiled, value) == (not schema_errors(closed, value)), value


def test_patternproperties_alone_still_takes_every_type_on_xgrammar_and_warns():
    """Opening the object with `additionalProperties: true` where nothing else said "object" made xgrammar
    refuse every other type, which a schema of patternProperties alone allows (the suite's "ignores arrays")."""
    schema = {"patternProperties": {"^x": {"type": "integer"}}}
    compiled = compile_for("xgrammar", spec_of(schema), byte_vocab())[0]
    for value in ([1], "s", 3, None, {"xa": 1}, {"b": "s"}, {"xa": "s"}):
        assert takes(compiled, value) == (not schema_errors(schema, value)), value
    assert [w.pointer for w in compiled.warnings if "patternProperties" in w.message] == ["/patternProperties"]


@pytest.mark.parametrize("backend", ["llguidance", "xgrammar"])
@pytest.mark.parametrize(
    "schema, generating_gap",
    [
        ({"type": "object", "properties": {"a": {"type": "integer"}}}, False),
        # a const only `\u0001` writes keeps every escape on llguidance, even to generate from
        ({"type": "object", "properties": {"a": {"type": "integer"}, "sep": {"const": "\u0001"}}}, True),
        ({"type": "object", "patternProperties": {"^x-": {"type": "integer"}}}, False),
    ],
)
def test_a_name_written_with_an_escape_is_the_name_it_spells(backend, schema, generating_gap):
    """`{"\\u0061": "x"}` beside `properties: {"a": integer}` was an additional property to the grammars
    (matched as raw text) and property `a` to jsonschema: accepted by `sgcli test` and `masks` on
    llguidance and xgrammar, and by generation on llguidance where the schema keeps every escape."""
    vocab = byte_vocab()
    name = "a" if "properties" in schema else "x-a"
    spelled = json.dumps(name, ensure_ascii=False).replace(name[0], f"\\u{ord(name[0]):04x}", 1)
    invalid = ("{" + spelled + ': "x"}').encode()
    assert schema_errors(schema, json.loads(invalid))  # jsonschema reads the name it spells
    dry = compile_for(backend, spec_of(schema), vocab)[0]
    assert not accepts_bytes(dry, invalid).accepted
    assert accepts_bytes(dry, ("{" + spelled + ": 1}").encode()).accepted  # the spelling itself is JSON
    generating = gen_spec_of(schema)
    escaped = [g.pointer for g in schema_gaps(generating, backend) if "JSON escape" in g.reason]
    assert bool(escaped) == (generating_gap and backend == "llguidance")
    keyword = "properties" if "properties" in schema else "patternProperties"
    assert any(g.keyword == keyword for g in schema_gaps(spec_of(schema), backend))  # the checker reads it
    assert not accepts_bytes(compile_for(backend, generating, vocab)[0], invalid).accepted


@pytest.mark.parametrize("backend", ["llguidance", "xgrammar"])
def test_a_lookahead_pattern_does_not_close_a_prefix_that_can_still_match(backend):
    """`regex`'s partial matching read the end of "ab" as the end of the text inside `(?!ab$)`: the checker
    masked "c" after "ab", so `"abc"` (valid) could never be written; the completion check stays."""
    schema = {"type": "object", "properties": {"u": {"type": "string", "pattern": "^(?!ab$)[a-z]+$"}}}
    compiled = compile_for(backend, gen_spec_of(schema), byte_vocab())[0]
    assert accepts_bytes(compiled, b'{"u":"abc"}').accepted and not schema_errors(schema, {"u": "abc"})
    assert not accepts_bytes(compiled, b'{"u":"ab"}').accepted  # the pattern, where the value ends


def test_an_integer_whose_digits_can_no_longer_reach_its_bounds_is_a_dead_end():
    """outlines-core's integer takes any digits and leaves `minimum`/`maximum` to the checker: "3" under
    [500, 510] can only become 3, 30-39, 300-399 or past 510, and the model wrote "3046" after 64 backtracks."""
    from sgcli.backends.number_prefix import digits_reach

    vocab = byte_vocab()
    schema = {"type": "integer", "minimum": 500, "maximum": 510}
    compiled = compile_for("outlines_core", gen_spec_of(schema), vocab)[0]
    assert feed(compiled, vocab.encode("505"), check_mask=True).accepted
    for dead in ("3", "-5", "52"):
        result = feed(compiled, vocab.encode(dead + "0"), check_mask=True)
        # the mask after `dead` is empty (the checker's verdict; the matcher's own accept() is the grammar's)
        masked = any("the mask forbids it" in n for n in result.notes)
        assert not result.accepted and (masked or result.taken <= len(dead)), (dead, result)
    assert [digits_reach(d, 500, 510) for d in (3, 5, 50, 51, 511)] == [False, True, True, True, False]
    assert digits_reach(7, None, 5) is False and digits_reach(1, 10**9, None) is True


def test_xgrammar_strict_mode_leaves_an_object_that_must_hold_more_than_it_lists_open():
    """Generating, xgrammar's strict mode closes unlisted properties: `{"type": "object", "minProperties": 1}`
    was refused ("1 > 0", no pointer) though the schema forbids no property."""
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 20}, "metadata": {"type": "object", "minProperties": 1}},
        "required": ["name", "metadata"],
    }
    compiled = compile_for("xgrammar", gen_spec_of(schema), byte_vocab())[0]
    assert accepts_bytes(compiled, b'{"name":"a","metadata":{"k":1}}').accepted
    assert not accepts_bytes(compiled, b'{"name":"a","metadata":{}}').accepted


@pytest.mark.parametrize("backend", ["llguidance", "xgrammar", "outlines_core"])
def test_an_enum_of_numbers_no_grammar_writes_exactly_is_enforced_by_nothing(backend):
    """`enum: [12345678901234567890]`: each grammar wrote only the rounded number, which the checker refused, and
    every generation backtracked to its limit (exit 1). Now it is refused before the model loads; an enum that
    also lists an exact value still goes to the checker."""
    only = {"type": "object", "properties": {"e": {"enum": [12345678901234567890]}}, "required": ["e"]}
    also = {"type": "object", "properties": {"e": {"enum": [1, 12345678901234567890]}}, "required": ["e"]}
    for schema, keyword in ((only, "enum"), ({"const": 9007199254740993}, "const"), ({"const": 1e23}, "const")):
        (gap,) = [g for g in schema_gaps(gen_spec_of(schema), backend) if g.keyword == keyword]
        assert gap.checker is False and "rounded" in gap.why_not_checked, schema
    (gap,) = [g for g in schema_gaps(gen_spec_of(also), backend) if g.keyword == "enum"]
    assert gap.checker is True


def test_outlines_core_follows_every_ref_of_nested_models():
    """Five nested pydantic models (`L1` -> ... -> `L5`, each a `$ref` into `$defs`): outlines-core's default
    recursion depth, 3, wrote the innermost ones as `{}` only, so no valid instance could be generated (the
    checker refused each, and generation backtracked to its limit; found by a tour). An acyclic schema now
    gets the depth of its longest chain of references; a cycle keeps the default."""
    from sgcli.backends.outlines_backend import OUTLINES_REF_DEPTH, ref_depth

    defs = {
        f"L{i}": {"type": "object", "properties": {f"l{i + 1}": {"$ref": f"#/$defs/L{i + 1}"}}} for i in range(1, 5)
    }
    defs["L5"] = {"type": "object", "properties": {"leaf": {"type": "integer", "minimum": 0, "maximum": 5}}}
    for sub in defs.values():
        sub["required"] = list(sub["properties"])
    schema = {"type": "object", "properties": {"l1": {"$ref": "#/$defs/L1"}}, "required": ["l1"], "$defs": defs}
    value = {"l1": {"l2": {"l3": {"l4": {"l5": {"leaf": 3}}}}}}
    assert not schema_errors(schema, value)
    compiled = compile_for("outlines_core", spec_of(schema).for_generation(), byte_vocab())[0]
    assert accepts_bytes(compiled, json.dumps(value, separators=(",", ":")).encode()).accepted
    assert ref_depth(schema) == 5
    linked = {"$defs": {"N": {"properties": {"next": {"$ref": "#/$defs/N"}}}}, "$ref": "#/$defs/N"}
    assert ref_depth(linked) == OUTLINES_REF_DEPTH


@pytest.mark.parametrize(
    ("bounds", "empty"),
    [
        ({"minimum": 1e-7, "maximum": 2e-7}, True),
        ({"minimum": 1.0000001, "maximum": 1.0000002}, True),
        ({"exclusiveMinimum": 1e-6, "exclusiveMaximum": 2e-6}, True),
        ({"minimum": -2e-7, "maximum": -1e-7}, True),
        ({"minimum": 1e-6, "exclusiveMaximum": 2e-6}, False),  # 0.000001
        ({"minimum": 5e-7, "maximum": 1.5e-6}, False),
        ({"minimum": 1e-7}, False),  # one bound: numbers of every size above it
    ],
)
def test_a_range_xgrammar_writes_no_number_in_is_refused_not_left_to_the_checker(bounds, empty):
    """Between two bounds xgrammar writes numbers of at most 6 decimal places: `[1e-7, 2e-7]` left its
    grammar only the empty text, which `sgcli test` accepted and compile called ok (a tour). Each premise
    is checked on xgrammar's own grammar, so a release that writes more places fails this test."""
    schema = {"type": "number", **bounds}
    spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), "n.json")
    vocab = byte_vocab()
    compiled = compile_for("xgrammar", spec, vocab)[0]
    grammar = compiled.inner if isinstance(compiled, CheckedCompiled) else compiled
    assert accepts_bytes(grammar, b"").accepted is empty
    gaps = [g for g in schema_gaps(spec, "xgrammar") if g.keyword in bounds]
    if not empty:
        assert gaps == []
        return
    assert {g.keyword for g in gaps} == set(bounds) and not any(g.checker for g in gaps)
    with pytest.raises(UserError, match="the grammar takes no number in the range"):
        guarantee(compiled)
    assert ranked(spec)[0][0] == "llguidance"
