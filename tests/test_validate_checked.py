""" "valid" means an independent check passed: what checked it, and null (never true) where nothing could.

The checkers are other implementations than the generating backend: jsonschema, the lark
library's Earley parser (GBNF through the project's converter), the `regex` package in the
backend's dialect, and a structural-tag scanner. These tests feed them outputs on both sides
of each constraint, and run the random model through `--backend none` with a grammar.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import WEATHER_TAGS, patch_everywhere

from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.validation.validate import validate

UNIQ = json.dumps({"type": "array", "items": {"type": "string"}, "uniqueItems": True})
WRAP = 'start: "tags: " @tags\n'
GBNF = 'root ::= "answer: " ("yes" | "no") "."\n'


def verdict(spec, output, **kw):
    return validate(spec, output, finish_reason="stop", grammar_complete=True, **kw)


def composite() -> ConstraintSpec:
    sub = ConstraintSpec(Kind.JSON_SCHEMA, UNIQ, "uniq.json")
    return ConstraintSpec(Kind.LARK, WRAP, "wrap.lark", subgrammars=(("tags", sub),))


# ---- regex: the regex package, in the dialect the backend read the pattern in ----


@pytest.mark.parametrize(
    "pattern, text, dialect, expected",
    [
        (r"\d{2}", "١٢", "rust", True),  # Rust's \d is Unicode
        (r"\d{2}", "١٢", "ecma", False),  # ECMAScript's (xgrammar, JSON Schema) is [0-9]
        (r"\d{2}", "12", "ecma", True),
        (r"[\w]+", "é", "ecma", False),
        (r"[\w]+", "é", "rust", True),
        (r"a.b", "a\nb", "rust", False),  # `.` never matches a newline
        (r"a.b", "axb", "rust", True),
        (r"ab\z", "ab", "rust", True),  # Rust's end-of-text, unknown to Python's re
        (r"\p{Lu}+", "ÀB", "rust", True),  # Unicode classes, unknown to Python's re
        (r"\p{Lu}+", "Àb", "rust", False),
        (r"[]a]+", "]a", "ecma", True),
        (r"a.b", "a\rb", "ecma", False),  # ECMAScript's `.` stops at every line terminator
        (r"a.b", "a\rb", "rust", True),
        (r"\s", "\ufeff", "ecma", True),  # ECMAScript's \s is its WhiteSpace: U+FEFF in
        (r"\s", "\x85", "ecma", False),  # and U+0085 out
        (r"[\s]", "\x85", "rust", True),
        # braced hex escapes, unknown to the regex package, once fell back to the backend's matcher
        (r"[\u{3b1}-\u{3c9}]{2}x", "αβx", "rust", True),
        (r"[\u{3b1}-\u{3c9}]{2}x", "abx", "rust", False),
        (r"\x{1F600}\U{41}\x41\u0041\U00000041", "😀AAAA", "rust", True),
        (r"\u{3b1}", "α", "ecma", True),
        (r"\\x{2}", "\\xx", "rust", True),  # an escaped backslash, then x{2}
        # Rust nests classes (llguidance, outlines-core took `axxxx`); ECMAScript (xgrammar) does not
        (r"[[a-c]x]{1,5}", "axxxx", "rust", True),
        (r"[[a-c]x]{1,5}", "ax]", "rust", False),
        (r"[[a-c]x]{1,5}", "ax]", "ecma", True),
        (r"[a-z&&[^aeiou]]+", "bcd", "rust", True),  # Rust's class set operations
        (r"[a-z&&[^aeiou]]+", "bad", "rust", False),
        (r"[a||b]", "|", "rust", True),  # `|` is a literal in a Rust class, never a union
        (r"[[:alpha:]x]+", "ax", "rust", True),
        (r"(?i)ß", "SS", "rust", False),  # Rust folds case simply
        (r"a(?i)b", "Ab", "rust", False),  # an inline flag holds from where it stands
    ],
)
def test_regex_dialects(pattern, text, dialect, expected):
    v = verdict(ConstraintSpec(Kind.REGEX, pattern, "--regex"), text, dialect=dialect)
    assert (v.valid, v.validated_by) == (expected, "regex")


def test_unreadable_regex_is_unchecked_not_valid():
    v = verdict(ConstraintSpec(Kind.REGEX, "(?<=a", "--regex"), "x")
    assert v.valid is None and v.validated_by is None and "cannot read" in v.unchecked


def test_braced_escape_that_rust_refuses_is_unchecked():
    v = verdict(ConstraintSpec(Kind.REGEX, r"\x{110000}", "--regex"), "x")
    assert v.valid is None and "cannot read" in v.unchecked


def test_backend_matcher_is_a_last_resort_and_says_so():
    spec = ConstraintSpec(Kind.REGEX, "(?<=a", "--regex")
    no = verdict(spec, "x", matcher_check=lambda text: False, backend="llguidance")
    yes = verdict(spec, "x", matcher_check=lambda text: True, backend="llguidance")
    assert no.valid is False and no.validated_by.startswith("llguidance matcher (last resort")
    # the backend agreeing with itself is no independent check: null, with its opinion as information
    assert yes.valid is None and yes.validated_by is None
    assert "cannot read" in yes.unchecked and "llguidance's own matcher accepts" in yes.unchecked


def test_choices():
    spec = ConstraintSpec(Kind.CHOICE, choices=("yes", "no"))
    assert (verdict(spec, "no").valid, verdict(spec, "maybe").valid) == (True, False)
    assert verdict(spec, "no").validated_by == "choices"


# ---- Lark / GBNF: re-parsed by the lark library ----


def test_lark_reparse_both_ways():
    spec = ConstraintSpec(Kind.LARK, 'start: WORD "b"\nWORD: /[a-z]+/\n', "x.lark")
    assert (verdict(spec, "aab").valid, verdict(spec, "aa1").valid) == (True, False)
    assert verdict(spec, "aab").validated_by == "lark"


def test_a_start_that_inlines_to_one_terminal_is_checked():
    """`?start: value` with `?value: ... | ESCAPED_STRING` (outlines' json.lark) parses `"abc"` to a
    bare token: the sub-grammar walk crashed on it (AttributeError, found running outlines' grammars)."""
    text = '?start: value\n?value: "[" value "]" | STRING\nSTRING: /"[a-z]*"/\n'
    spec = ConstraintSpec(Kind.LARK, text, "j.lark")
    assert [verdict(spec, s).valid for s in ('"abc"', '["abc"]', '"abc')] == [True, True, False]


def test_gbnf_goes_through_the_converter():
    spec = ConstraintSpec(Kind.EBNF, GBNF, "g.gbnf")
    assert verdict(spec, "answer: yes.").valid is True
    bad = verdict(spec, "answer: maybe.")
    assert bad.valid is False and bad.validated_by == "lark" and "line 1 column 9" in bad.errors[0]


def test_grammar_the_lark_library_cannot_read_is_unchecked():
    spec = ConstraintSpec(Kind.LARK, "start: /[a-z]+/ & ~/(.|\\n)*q(.|\\n)*/\n", "llg.lark")
    v = verdict(spec, "abc")
    assert v.valid is None and "lark library cannot read" in v.unchecked


def test_llguidance_grammar_json_with_one_schema_or_lark_is_checked():
    schema = ConstraintSpec(Kind.LLGUIDANCE, '{"grammars": [{"json_schema": {"type": "integer"}}]}', "s.llg.json")
    lark = ConstraintSpec(Kind.LLGUIDANCE, json.dumps({"grammars": [{"lark_grammar": 'start: "a"+\n'}]}), "l.llg.json")
    assert [verdict(schema, o).valid for o in ("3", '"x"')] == [True, False]
    assert [verdict(lark, o).valid for o in ("aa", "ab")] == [True, False]
    assert (verdict(schema, "3").validated_by, verdict(lark, "aa").validated_by) == ("jsonschema", "lark")


def test_unchecked_grammar_the_matcher_calls_incomplete_is_invalid():
    spec = ConstraintSpec(Kind.LLGUIDANCE, '{"grammars": []}', "g.llg.json")
    assert verdict(spec, "x").valid is None
    v = validate(spec, "x", finish_reason="stop", grammar_complete=False)
    assert v.valid is False


def test_subgrammar_json_is_validated_against_its_schema():
    assert verdict(composite(), 'tags: ["a", "b"]').valid is True
    dup = verdict(composite(), 'tags: ["a", "a"]')
    assert dup.valid is False and "@tags" in dup.errors[0] and "non-unique" in dup.errors[0]


def test_inline_json_schema_is_validated():
    spec = ConstraintSpec(Kind.LARK, 'start: "n=" %json {"type": "integer", "minimum": 3}\n', "j.lark")
    assert verdict(spec, "n=5").valid is True
    low = verdict(spec, "n=2")
    assert low.valid is False and "%json #1" in low.errors[0]


def test_lark_subgrammar_is_imported_under_its_own_names():
    sub = ConstraintSpec(Kind.LARK, 'start: item ("," item)*\nitem: /[a-z]+/\n', "list.lark")
    spec = ConstraintSpec(Kind.LARK, 'start: "x=" @l "!"\n', "top.lark", subgrammars=(("l", sub),))
    assert (verdict(spec, "x=ab,cd!").valid, verdict(spec, "x=ab,!").valid) == (True, False)


def test_subgrammar_ignore_is_never_a_false_invalid():
    """llguidance applies a sub-grammar's %ignore after each of its lexemes (`x:ab, cd.`, `x:ab,cd .` taken,
    `x: ab,cd.` refused); lark's %import drops it, and the check called honest outputs invalid."""
    sub = ConstraintSpec(Kind.LARK, 'start: WORD ("," WORD)*\nWORD: /[a-z]{1,6}/\n%ignore " "\n', "inw.lark")
    spec = ConstraintSpec(Kind.LARK, 'start: "x:" @inw "."\n', "top.lark", subgrammars=(("inw", sub),))
    assert verdict(spec, "x:ab,cd.").valid is True
    spaced = verdict(spec, "x:ab, cd.")
    assert spaced.valid is None and "%ignore" in spaced.unchecked


def test_remote_ref_is_unchecked_not_a_crash():
    spec = ConstraintSpec(Kind.JSON_SCHEMA, '{"$ref": "https://example.com/s.json"}', "s.json")
    v = verdict(spec, "1")
    assert v.valid is None and "jsonschema cannot apply" in v.unchecked


def test_output_nested_too_deeply_to_check_is_unchecked_not_a_crash():
    spec = ConstraintSpec(Kind.JSON_SCHEMA, '{"type": "array"}', "s.json")
    v = verdict(spec, "[" * 100000 + "]" * 100000)
    assert v.valid is None and "nested too deeply" in v.unchecked


@pytest.mark.parametrize(
    "schema, output, valid",
    [
        ('{"type": "object"}', "[" * 50000 + "]" * 50000, False),  # passed as unchecked, exit 0, from a server
        ('{"type": ["string", "null"]}', '{"a":' * 50000 + "1" + "}" * 50000, False),
        ('{"type": "integer"}', " " + "[" * 50000 + "]" * 50000, False),
        ('{"type": "array"}', "[" * 50000 + "]" * 50000, None),  # the top is right: what is inside, unknown
        ('{"items": {"type": "string"}}', "[" * 50000 + "]" * 50000, None),  # no `type` at the root
    ],
)
def test_an_output_nested_past_the_checker_is_still_judged_by_its_top(schema, output, valid):
    v = verdict(ConstraintSpec(Kind.JSON_SCHEMA, schema, "s.json"), output)
    assert v.valid is valid, (v.errors, v.unchecked)
    if valid is False:
        assert "at the top, where the schema's `type` is" in v.errors[0] and "`type` at the root" in v.validated_by


def test_formats_are_checked():
    spec = ConstraintSpec(Kind.JSON_SCHEMA, '{"type": "string", "format": "date"}', "s.json")
    assert (verdict(spec, '"2024-01-02"').valid, verdict(spec, '"2024-13-45"').valid) == (True, False)


# ---- structural tags: contents checked against their schemas ----


@pytest.mark.parametrize(
    "output, expected",
    [
        ("just text", True),
        ('call <function=weather>{"city": "Paris"}</function> done', True),
        ('call <function=weather>{"town": "Paris"}</function>', False),  # content breaks its schema
        ('<function=weather>{"city": 3}</function>', False),
        ("<function=time>{}</function>", False),  # a trigger that continues into no tag
        ('<function=weather>{"city": "Paris"}', False),  # never ends
    ],
)
def test_structural_tag_contents(output, expected):
    spec = ConstraintSpec(Kind.STRUCTURAL_TAG, json.dumps(WEATHER_TAGS), "tags.json")
    v = verdict(spec, output)
    assert (v.valid, v.validated_by) == (expected, "structural_tags")


def test_structural_tag_at_least_one_and_stop_after_first():
    tag = {"begin": "<a>", "content": {"type": "const_string", "value": "x"}, "end": "</a>"}
    fmt = {"type": "triggered_tags", "triggers": ["<a>"], "tags": [tag], "at_least_one": True, "stop_after_first": True}
    spec = ConstraintSpec(Kind.STRUCTURAL_TAG, json.dumps({"type": "structural_tag", "format": fmt}), "t.json")
    assert [verdict(spec, o).valid for o in ("<a>x</a>", "hi <a>x</a>", "<a>x</a> more", "", "<a>y</a>")] == [
        True,
        False,
        False,
        False,
        False,
    ]


# ---- the random model with --backend none: the verdict is the independent check's alone ----


def test_backend_none_with_gbnf_never_claims_valid_unchecked(tiny_lm, smol_tokenizer):
    from sgcli.validation import lark_check
    from tests.helpers import generate_with

    spec = ConstraintSpec(Kind.EBNF, GBNF, "g.gbnf")
    for seed in range(4):
        record = generate_with(tiny_lm, smol_tokenizer, spec, "none", seed=seed, max_tokens=12)
        assert record["validated_by"] == "lark"
        independent = not lark_check.check(spec, record["output"]) and record["finish_reason"] == "stop"
        assert record["valid"] is independent, record
        assert record["valid"] is False  # random text is not "answer: yes."


def test_cli_subgrammar_breaking_its_schema_exits_1(run_cli, tmp_path, monkeypatch, tiny_lm):
    """`--lark wrap.lark --sub tags=uniq.json`: xgrammar's grammar leaves uniqueItems unenforced there (generate
    refuses that unless --allow-unenforced); a repeated item is then valid false, exit 1."""
    import sgcli.engine.loader as loader
    import sgcli.engine.session as session
    from sgcli.engine.decode import Finished

    (tmp_path / "wrap.lark").write_text(WRAP)
    (tmp_path / "uniq.json").write_text(UNIQ)

    def fake_decode(lm, ids, compiled, **kw):  # what an unsound backend could emit
        yield Finished("stop", 'tags: ["a", "a"]', [1, 2], len(ids), 0.01, 0.02, grammar_complete=True)

    patch_everywhere(monkeypatch, loader, "load_model", lambda *a, **k: tiny_lm)
    patch_everywhere(monkeypatch, session, "decode", fake_decode)
    args = ["generate", "--lark", tmp_path / "wrap.lark", "--sub", f"tags={tmp_path / 'uniq.json'}"]
    refused = run_cli(*args, "-b", "xgrammar", "--json", "hi")
    assert refused.exit_code == 2 and "`uniqueItems` at /uniqueItems in @tags" in refused.output, refused.output
    result = run_cli(*args, "-b", "xgrammar", "--json", "--allow-unenforced", "hi")
    record = json.loads(result.stdout)
    assert result.exit_code == 1
    assert (record["valid"], record["validated_by"]) == (False, "lark+jsonschema")
    assert "non-unique" in " ".join(record["errors"])
    gap = {"pointer": "/uniqueItems", "keyword": "uniqueItems", "backend": "xgrammar", "within": "@tags"}
    assert record["unenforced"] == [gap]


def test_terminal_that_may_be_empty_is_still_checked():
    """llguidance takes `T: /X{0,n}/`; lark's dynamic Earley lexer refuses empty terminals, so the
    check reads it as an optional non-empty terminal rather than giving up."""
    spec = ConstraintSpec(Kind.LARK, 'start: "<" REASON ">"\nREASON: /[a-z]{0,3}/\n', "e.lark")
    assert [verdict(spec, o).valid for o in ("<>", "<ab>", "<abcd>", "<A>")] == [True, True, False, False]


@pytest.mark.parametrize(
    ("grammar", "good", "bad"),
    [
        ('start: A "." B\nA: /[a-z]{2,6}?/\nB: /[0-9]+?/ "!"\n', ["abcd.12!", "ab.1!"], ["a.1!", "abcdefg.1!"]),
        ("start: A\nA: /[?]+?/\n", ["??"], ["?a"]),  # a `?` in a class, and one escaped, stay
        ("start: A\nA: /\\?+?x??/\n", ["??x", "?"], ["x"]),
        ("start: A\nA: /\\/\\*(.|\\n)*?\\*\\//\n", ["/*a*/b*/", "/*a*/"], ["/*a"]),
        # lark's own C_COMMENT stays shortest: both backends' built-in one ends at the first `*/` too
        ("start: C_COMMENT\n%import common.C_COMMENT\n", ["/*a*/"], ["/*a*/b*/"]),
    ],
)
def test_lazy_terminal_is_read_as_the_backends_read_it(grammar, good, bad):
    """Both backends read a terminal as a whole-token language, lazy or not; the lark library's lexer
    took a lazy terminal's shortest match only, and called `abcd.12!` invalid."""
    spec = ConstraintSpec(Kind.LARK, grammar, "lazy.lark")
    assert [verdict(spec, o).valid for o in good + bad] == [True] * len(good) + [False] * len(bad)


# a grammar with a `[lazy]` rule, texts llguidance takes, texts it refuses (the rule ends at its first match)
LAZY_RULES = [
    ('start: "<t>" body "</t>"\nbody[lazy]: /.+/\n', ["<t>a</t>"], ["<t>ab</t>", "<t>a</t>b</t>"]),
    ('start: "<t>" body "</t>"\nbody[lazy]: "a" /b+/\n', ["<t>ab</t>"], ["<t>abb</t>"]),
    ("start: body+\nbody[lazy]: /x+/\n", ["xxx"], []),  # lark's longest match first; one x each is a reading
    ('start: body ("," body)*\n?body[lazy]: /[a-z]+/\n', ["a,b"], ["ab,c"]),  # inlined: judged as a token
    ('start: _body "c"\n_body[lazy]: X "!"\nX: /[a-z]+/\n', ["ab!c"], []),  # a body naming a terminal
    ('start: word "."\nword[lazy, max_tokens=8]: /[a-z]+/\n', ["a."], ["abc."]),
]


@pytest.mark.parametrize(("grammar", "good", "bad"), LAZY_RULES)
def test_lazy_rule_ends_at_its_first_match_as_llguidance_reads_it(grammar, good, bad):
    """The check dropped `[lazy]` and read the wider language: `<t>ab</t>` was valid under
    `body[lazy]: /.+/`, which llguidance ends after one character (a tour found it)."""
    from test_lint_greedy_lexemes import accepted

    spec = ConstraintSpec(Kind.LARK, grammar, "lazy.lark")
    texts = good + bad
    expected = [True] * len(good) + [False] * len(bad)
    assert [accepted("llguidance", grammar, t) for t in texts] == expected
    assert [verdict(spec, t).valid for t in texts] == expected


def test_lazy_rule_error_names_where_it_ends():
    spec = ConstraintSpec(Kind.LARK, 'start: "<t>" body "</t>"\nbody[lazy]: /.+/\n', "lazy.lark")
    assert verdict(spec, "<t>ab</t>").errors == [
        'rule `body` is [lazy]: llguidance ends it at its first match, "a" (line 1 column 5); the output goes on '
        'to "ab"'
    ]


def test_regex_subgrammar_nests_classes_as_rust_does():
    sub = ConstraintSpec(Kind.REGEX, "[[a-c]x]{1,5}", "--sub")
    spec = ConstraintSpec(Kind.LARK, 'start: "x=" @w "!"\n', "top.lark", subgrammars=(("w", sub),))
    assert (verdict(spec, "x=axx!").valid, verdict(spec, "x=ax]!").valid) == (True, False)


def test_lazy_regex_subgrammar_is_read_greedy():
    sub = ConstraintSpec(Kind.REGEX, "[a-z]+?", "--sub")
    spec = ConstraintSpec(Kind.LARK, 'start: "x=" @w "!"\n', "top.lark", subgrammars=(("w", sub),))
    assert (verdict(spec, "x=abc!").valid, verdict(spec, "x=!").valid) == (True, False)


# ---- llguidance's extensions of Lark, read by the independent check ----


def test_readme_composite_example_is_validated_by_lark_and_jsonschema():
    """The README's `--lark examples/reasoning_json.lark --sub answer=examples/answer.schema.json`:
    `reason[max_tokens=64]` used to leave it `unchecked` (the lark library cannot read it)."""
    from sgcli.constraints.sources import from_flags, with_subgrammars

    examples = Path(__file__).resolve().parent.parent / "examples"
    spec = with_subgrammars(
        from_flags(lark=str(examples / "reasoning_json.lark")), [f"answer={examples / 'answer.schema.json'}"]
    )
    good = verdict(spec, 'Reasoning: Paris is a city in France.\nJSON: {"answer": "Yes"}')
    assert (good.valid, good.validated_by, good.unchecked) == (True, "lark+jsonschema", None)
    breaks_schema = verdict(spec, 'Reasoning: Paris is a city in France.\nJSON: {"answer": "Maybe"}')
    assert breaks_schema.valid is False and breaks_schema.validated_by == "lark+jsonschema"
    assert "@answer: schema violation at /answer:" in breaks_schema.errors[0]
    breaks_grammar = verdict(spec, 'Reasoning: two\nlines\nJSON: {"answer": "Yes"}')
    assert breaks_grammar.valid is False and "lark parser stops" in breaks_grammar.errors[0]


@pytest.mark.parametrize(
    ("grammar", "good", "bad"),
    [
        ('start: word "."\nword[max_tokens=8, temperature=0.2]: /[a-z]+/\n', "abc.", "ab1."),
        ('%llguidance {\n  "no_forcing": true\n}\nstart: "a" "b"\n', "ab", "ba"),
        ('start: "x"{2,3} "y"{2,}\n', "xxyyy", "xyy"),
        ('# a comment\nstart: two-words\ntwo-words: "a" " " "b"  # trailing\n', "a b", "ab"),
        ('start: ("ab" | "c"){0,2} "!"\n', "abc!", "abab c!"),
    ],
    ids=["attributes", "llguidance-options", "braces", "comments-and-dashes", "group-braces"],
)
def test_llguidance_lark_extensions_are_read(grammar, good, bad):
    spec = ConstraintSpec(Kind.LARK, grammar, "x.lark")
    assert (verdict(spec, good).valid, verdict(spec, bad).valid) == (True, False)
    assert verdict(spec, good).validated_by == "lark"


@pytest.mark.parametrize(
    ("grammar", "needle"),
    [
        ('start: line "!"\nline[stop="\\n"]: /.*/\n', "attribute `stop`"),
        ('start: <|im_end|> "a"\n', "special token"),
        ('start: %regex {"substring_words": "a b"}\n', "%regex"),
    ],
)
def test_extensions_that_change_the_text_are_unchecked(grammar, needle):
    v = verdict(ConstraintSpec(Kind.LARK, grammar, "x.lark"), "a!")
    assert v.valid is None and needle in v.unchecked, v


def test_grammar_past_the_rule_limit_is_unchecked_at_once():
    """lark's Earley parser is quadratic or worse in the rules: 10,000 did not finish in 5 minutes."""
    import time

    from sgcli.validation.lark_check import MAX_RULES

    rules = ["start: r0"] + [f'r{i}: r{(i + 1) % 10_000} "a" | "b"' for i in range(10_000)]
    t = time.perf_counter()
    v = verdict(ConstraintSpec(Kind.LARK, "\n".join(rules) + "\n", "chain.lark"), "baa")
    assert v.valid is None and f"past {MAX_RULES}" in v.unchecked and time.perf_counter() - t < 10


@pytest.mark.parametrize("output", ["a" * 60 + "!", "a" * 60])  # a wrong character; cut off (the partial match)
def test_a_backtracking_terminal_is_bounded_not_a_hang(monkeypatch, output):
    """`/(a|aa)+b/` backtracks exponentially on a run of a's without the b (36 took 32 s; 60 would
    take years): the check stops at its deadline with no verdict, before and inside `_ends_early`."""
    import threading

    from sgcli.validation import lark_check

    monkeypatch.setattr(lark_check, "CHECK_TIMEOUT_S", 0.5)
    spec = ConstraintSpec(Kind.LARK, 'start: X "c"\nX: /(a|aa)+b/\n', "x.lark")
    found = []
    worker = threading.Thread(target=lambda: found.append(verdict(spec, output)), daemon=True)
    worker.start()
    worker.join(60)
    assert found, "the lark check did not stop at its deadline"
    assert found[0].valid is None and "took longer than 0.5 s" in found[0].unchecked, found[0]
    assert verdict(spec, "a" * 60 + "bc").valid is True  # the same grammar still checks a sentence at once


@pytest.mark.parametrize(
    ("output", "why"),
    [
        ("NaN", "not JSON"),
        ("-Infinity", "not JSON"),
        ('"\\ud800"', "lone surrogate"),
        ('{"\\udc00": 1}', "lone surrogate"),
    ],
)
def test_an_output_json_does_not_hold_or_no_check_can_judge_is_never_valid(output, why):
    """A server answered `NaN` and sgcli said valid against `{"type": "number"}`; `"\\ud800"` crashed the
    record writer (exit 3, a whole batch lost); 548e+28668683 reached jsonschema as infinity (2026-12-06)."""
    from sgcli.validation.verdict import json_verdict

    verdict = json_verdict({"type": ["number", "string", "object"]}, output)
    assert verdict.parsed is None and any(why in e for e in verdict.errors), verdict
    assert json_verdict({"type": "string"}, '"\\ud83d\\ude00"').parsed == "😀"  # a whole pair is a character


def test_a_number_past_a_doubles_range_is_judged_but_kept_out_of_parsed():
    """`548e+28668683` is JSON; Python reads it as infinity, which jsonschema judges, and the record's
    `parsed` held `Infinity`, which no JSON reader takes (2026-12-06)."""
    from sgcli.validation.verdict import json_verdict

    verdict = json_verdict({"type": "number"}, "548e+28668683")
    assert verdict.errors == [] and verdict.parsed is None
    assert json_verdict({"type": "number", "maximum": 5}, "548e+28668683").errors


@pytest.mark.parametrize(
    ("pattern", "text", "verdict"),
    [
        ("a*+a", "aaa", True),  # Rust's `(a*)+a`; possessive to the regex package, which refused "aaa"
        ("a?+b", "aab", True),  # `(a?)+b`
        ("a++", "aa", True),
        ("a*?+b", "b", True),
        ("a+b", "b", False),
        ("(?R)a", "a", None),  # Rust's CRLF flag: recursion to the regex package (MemoryError, exit 3)
        ("a{2}*", "aaaa", None),
    ],
)
def test_the_rust_checks_reading_of_stacked_quantifiers_and_flags(pattern, text, verdict):
    from sgcli.constraints.regex_dialects import RUST, DialectError, fullmatch

    if verdict is None:
        with pytest.raises(DialectError):
            fullmatch(pattern, text, RUST)
    else:
        assert fullmatch(pattern, text, RUST) is verdict


def test_json_error_positions_are_worded_once():
    """json's message may end in "at" already: it read "Unterminated string starting at at line 1 column 47"."""
    from sgcli.validation.verdict import json_verdict

    unterminated = "output is not JSON: Unterminated string starting at line 1 column 7"
    assert json_verdict({}, '{"a": "b').errors == [unterminated]
    assert json_verdict({}, "").errors == ["output is not JSON: Expecting value at line 1 column 1"]


@pytest.mark.parametrize(
    ("output", "where"),
    [("answer: y", "line 1 column 10"), ("answ", "line 1 column 5"), ("answer: yes", "line 1 column 12"), ("", "")],
)
def test_a_cut_off_grammar_output_is_reported_as_ending_early(output, where):
    """`The answer` (cut off by --max-tokens) was "the lark parser stops at line 1 column 1": lark's
    dynamic lexer fails at the start of a terminal the text only begins; the text ends there."""
    errors = verdict(ConstraintSpec(Kind.EBNF, GBNF, "a.gbnf"), output).errors
    assert errors and "the text ends before the grammar is complete (at " + where in errors[0], errors
    wrong = verdict(ConstraintSpec(Kind.EBNF, GBNF, "a.gbnf"), "answer: maybe.").errors
    assert wrong == ["output is not a sentence of the grammar: the lark parser stops at line 1 column 9"]


@pytest.mark.parametrize(
    ("kind", "constraint", "output"),
    [
        (Kind.JSON_SCHEMA, '{"type": "integer", "minimum": 0}', "9" * 5000),
        (Kind.JSON_SCHEMA, '{"type": "array"}', "[1, -" + "9" * 5000 + "]"),
        (Kind.STRUCTURAL_TAG, json.dumps(WEATHER_TAGS), '<function=weather>{"city": ' + "9" * 5000 + "}</function>"),
        (Kind.LARK, 'start: "n=" %json {"type": "integer"}\n', "n=" + "9" * 5000),
    ],
    ids=["integer", "in-an-array", "in-a-tag", "in-a-lark-json"],
)
def test_an_integer_longer_than_python_reads_is_unchecked_not_a_crash(kind, constraint, output):
    """A server answered a 5,000-digit integer: json.loads raised Python's "Exceeds the limit (4300 digits)"
    ValueError, exit 3, and a batch stopped there (--resume hit the same line again). The output may well
    be valid; sgcli cannot read it, so no verdict, and the reason says why."""
    v = verdict(ConstraintSpec(kind, constraint, "c.json"), output)
    assert v.valid is None and v.parsed is None, v
    assert "5000 digits" in v.unchecked and "4300" in v.unchecked.replace(",", ""), v.unchecked


def test_alternative_subgrammars_are_judged_by_the_one_the_text_fits():
    """`"<tool_call>" (@time | @weather) "</tool_call>"`: lark's parse resolved any JSON object to the first
    alternative, so a valid weather call was `valid: false` against the time schema (exit 1; found by a tour).
    Every reading of the parse forest is tried; a text no alternative takes is still invalid."""
    import json as _json

    def tool(name: str, args: dict, required: list[str]) -> ConstraintSpec:
        schema = {
            "type": "object",
            "properties": {"name": {"const": name}, "arguments": {"type": "object", "properties": args}},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        schema["properties"]["arguments"]["required"] = required
        return ConstraintSpec(Kind.JSON_SCHEMA, _json.dumps(schema), f"{name}.json")

    time = tool("get_time", {"tz": {"type": "string", "pattern": "^[A-Z][a-z]+/[A-Z][a-z]+$"}}, ["tz"])
    weather = tool("get_weather", {"city": {"type": "string", "minLength": 1}}, ["city"])
    spec = ConstraintSpec(
        Kind.LARK,
        'start: "<tool_call>" (@time | @weather) "</tool_call>"\n',
        "tools.lark",
        subgrammars=(("time", time), ("weather", weather)),
    )
    for call in (
        {"name": "get_weather", "arguments": {"city": "Paris"}},
        {"name": "get_time", "arguments": {"tz": "Europe/Paris"}},
    ):
        got = verdict(spec, f"<tool_call>{_json.dumps(call)}</tool_call>")
        assert (got.valid, got.validated_by) == (True, "lark+jsonschema"), got
    wrong = verdict(spec, '<tool_call>{"name": "get_weather", "arguments": {"tz": "Europe/Paris"}}</tool_call>')
    assert wrong.valid is False and wrong.errors


def test_a_reasoning_rule_with_an_inline_regex_that_may_be_empty_is_checked():
    """`thought[max_tokens=40]: /[^<]*/`: lark's dynamic lexer refuses a zero-width regex, so the whole
    grammar went `unchecked` (the same regex as a named terminal was rewritten and checked)."""
    sub = ConstraintSpec(
        Kind.JSON_SCHEMA, '{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}', "w"
    )
    spec = ConstraintSpec(
        Kind.LARK,
        'start: "<think>" thought "</think>\\n" call\nthought[max_tokens=40]: /[^<]*/\n'
        'call: "<tool_call>" @weather "</tool_call>"\n',
        "think.lark",
        subgrammars=(("weather", sub),),
    )
    for thought in ("hmm", ""):
        got = verdict(spec, f'<think>{thought}</think>\n<tool_call>{{"city": "Rome"}}</tool_call>')
        assert (got.valid, got.validated_by, got.unchecked) == (True, "lark+jsonschema", None), got
    wrong = verdict(spec, '<think>x</think>\n<tool_call>{"town": "Rome"}</tool_call>')
    assert (wrong.valid, wrong.validated_by) == (False, "lark+jsonschema")


def test_an_inline_json_is_numbered_as_lint_numbers_it():
    """`%json #n` counts the inline schemas only: beside an `@s` sub-grammar, the first `%json` was called
    `%json #2` in a record's errors, where lint and the record's `unenforced` say `%json #1`."""
    sub = ConstraintSpec(Kind.JSON_SCHEMA, '{"type": "integer"}', "s.json")
    grammar = 'start: "a=" @s " b=" b\nb: %json {"type": "array", "uniqueItems": true}\n'
    spec = ConstraintSpec(Kind.LARK, grammar, "t.lark", subgrammars=(("s", sub),))
    got = verdict(spec, "a=1 b=[1,1]")
    assert got.valid is False and got.errors[0].startswith("%json #1: ")
