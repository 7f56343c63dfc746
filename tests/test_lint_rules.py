"""One deliberately broken file per lint rule (tests/lint_cases/): each yields exactly its
rule's code, at the right line and column, and nothing else. And one near miss per rule
(tests/lint_cases/clean/): the same shape with the mistake fixed, which must not trigger it."""

from __future__ import annotations

from pathlib import Path

import pytest

from sgcli.backends import get_backend
from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
from sgcli.errors import UserError
from sgcli.lint import Linter, LintOptions, Selection
from sgcli.lint.runner import byte_vocab

CASES = Path(__file__).resolve().parent / "lint_cases"
COMPACT = JsonOptions(whitespace="compact")

# file -> (LintOptions overrides, [(code, line, col, backend)]). Schema cases run with a compact
# layout so that W002 (runaway whitespace) stays out of cases about other rules.
EXPECTED = {
    "s001_compile_error.gbnf": ({}, [("S001", 2, 10, "llguidance"), ("S001", 2, 11, "xgrammar")]),  # `[z-a]`
    # (J004, the checker taking the weakened keyword over, would absorb the backend's own warning)
    "s002_backend_warning.json": (
        {"backend": "xgrammar", "json_options": COMPACT, "selection": Selection.parse(None, ["J004"])},
        [("S002", 2, 3, "xgrammar")],
    ),
    "s003_invalid_schema.json": ({}, [("S003", 3, 14, None)]),  # "minimum": "5"
    "s004_unreadable_structure.regex": ({}, [("S004", 1, 2, None)]),  # POSIX class, which backends accept
    "g001_undefined_rule.gbnf": ({}, [("G001", 2, 19, None)]),
    "g001_undefined_rule.lark": ({}, [("G001", 1, 8, None)]),
    "g002_unused_rule.gbnf": ({}, [("G002", 3, 1, None)]),
    "g003_duplicate_rule.gbnf": ({}, [("G003", 3, 1, None)]),
    "g004_left_recursion.gbnf": ({}, [("G004", 2, 10, None)]),
    "g005_nullable_root.gbnf": ({}, [("G005", 1, 1, None)]),
    "g006_nested_repetition.gbnf": ({}, [("G006", 1, 10, None)]),
    "g007_missing_root.gbnf": ({}, [("G007", 1, 1, None)]),
    "g008_unbounded_free_text.lark": ({}, [("G008", 2, 23, None)]),
    "g009_continued_rule.gbnf": ({}, [("G009", 3, 3, None)]),
    "g010_cut_token_budget.lark": ({}, [("G010", 2, 1, None)]),
    "g010_zero_budget.lark": ({"backend": "llguidance"}, [("G010", 2, 1, None)]),  # xgrammar: S001 too
    "g011_rule_never_ends.gbnf": ({}, [("G011", 2, 1, None)]),  # `item` has no base case
    "g011_rule_never_ends.lark": ({}, [("G011", 1, 1, None)]),  # the root: no text at all
    "g011_empty_class.gbnf": ({}, [("G011", 2, 1, None)]),  # the class holds no character
    "g011_empty_class.lark": ({}, [("G011", 1, 1, None)]),  # a regex terminal whose class holds nothing
    "g012_greedy_lexeme.lark": ({}, [("G012", 1, 19, None)]),  # `0.`: llguidance reads the `.` into NUMBER
    "w001_unbounded_whitespace.gbnf": ({}, [("W001", 2, 8, None)]),
    "w001_ignore_whitespace.lark": ({}, [("W001", 2, 1, None)]),
    "w001_imported_whitespace.lark": ({}, [("W001", 3, 1, None)]),  # `%ignore WS` of lark's common.WS
    "w001_recursive_whitespace.gbnf": ({}, [("W001", 2, 1, None)]),  # llama.cpp's old `ws ::= ([ \t\n] ws)?`
    "j001_minimum.json": ({"json_options": COMPACT}, [("J001", 3, 3, "outlines_core")]),
    "j002_rejected_keyword.json": (
        {"backend": "outlines_core", "json_options": COMPACT},
        [("J002", 3, 3, "outlines_core")],
    ),
    "j003_unprobed_schema.json": (  # (xgrammar leaves pattern beside format to the checker: J004, not this)
        {"backend": "xgrammar", "json_options": COMPACT, "selection": Selection.parse(None, ["J004"])},
        [("J003", 1, 1, None)],
    ),
    "j004_checker_enforced_keyword.json": (
        {"backend": "xgrammar", "json_options": COMPACT},
        [("J004", 4, 3, "xgrammar")],  # uniqueItems: its J001 (xgrammar's matcher takes [1, 1]) folds into it
    ),
    "j005_unenforceable_keyword.json": (
        {"backend": "xgrammar", "json_options": COMPACT},
        [("J005", 3, 3, "xgrammar")],  # format x-made-up: neither xgrammar nor jsonschema checks it
    ),
    # name is unbounded; born is a date, which outlines-core's grammar does not enforce and llguidance's
    # only approximates (2023-02-29): its checker takes it
    "j006_unbounded_string.json": (
        {"json_options": COMPACT},
        [("J006", 4, 14, None), ("J001", 5, 32, "outlines_core"), ("J004", 5, 32, "llguidance")],
    ),
    # https:// for draft-07's http://: read as draft-07 by sgcli, as 2020-12 by jsonschema alone, refused by llguidance
    "j007_unknown_dialect.json": ({"json_options": COMPACT}, [("J007", 2, 3, None)]),
    "j008_unbounded_array.json": ({"json_options": COMPACT}, [("J008", 4, 20, None)]),
    "r001_lookahead.regex": ({}, [("R001", 1, 2, None)]),
    "t001_special_token.gbnf": ({"tokenizer": "default"}, [("T001", 1, 16, None)]),
    "l001_max_tokens.gbnf": ({"tokenizer": "default", "max_tokens": 10}, [("L001", 1, 1, None)]),
}


def lint(name: str, **overrides):
    return Linter(LintOptions(**overrides)).lint(str(CASES / name)).diagnostics


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_case_yields_exactly_its_rule(name):
    overrides, expected = EXPECTED[name]
    found = [(d.code, d.line, d.col, d.backend) for d in lint(name, **overrides)]
    assert found == expected


def test_every_rule_has_a_case():
    from sgcli.lint.rules import RULES

    covered = {code for _, expected in EXPECTED.values() for code, *_ in expected}
    missing = set(RULES) - covered - {"W002"}  # W002 is backend-wide: test_w002_* below
    assert not missing, f"no lint_cases file for {sorted(missing)}"
    assert {p.name for p in CASES.iterdir() if p.is_file()} == set(EXPECTED) | {"w002_json_whitespace.json"}


CLEAN = CASES / "clean"


def _options_for(code: str) -> dict:
    """The broken case's options (backend, tokenizer, layout), so the near miss runs the same checks."""
    return next(o for name, (o, _) in EXPECTED.items() if name.startswith(code.lower() + "_"))


@pytest.mark.parametrize("name", sorted(p.name for p in CLEAN.iterdir()))
def test_near_miss_does_not_trigger_its_rule(name):
    code = name.split("_")[0].upper()
    found = [(d.code, d.line, d.col, d.backend, d.message) for d in lint(f"clean/{name}", **_options_for(code))]
    assert code not in {f[0] for f in found}, found


def test_every_rule_has_a_near_miss():
    from sgcli.lint.rules import RULES

    covered = {p.name.split("_")[0].upper() for p in CLEAN.iterdir()}
    assert set(RULES) - {"W002"} <= covered  # W002's negative: test_w002_* below (bounded whitespace)


def test_w002_reported_for_each_backend_with_flexible_whitespace_and_not_when_bounded():
    from sgcli.backends.matching import backends_for
    from sgcli.constraints.sources import from_file

    path = CASES / "w002_json_whitespace.json"
    asked = JsonOptions(whitespace="flexible")
    flexible = [(d.code, d.line, d.col, d.backend) for d in lint(path.name, json_options=asked)]
    assert flexible == [("W002", 1, 1, b) for b in sorted(backends_for(from_file(str(path))))]
    assert "64 spaces" in lint(path.name, json_options=asked)[0].message
    assert lint(path.name, json_options=JsonOptions(whitespace_pattern="[ ]*"))  # unbounded, asked for
    assert lint(path.name, json_options=JsonOptions(max_whitespace=4)) == []
    assert lint(path.name) == []  # the default: the layout generate compiles (compact)


def test_w002_judges_the_layout_generate_uses(run_cli):
    path = CASES / "w002_json_whitespace.json"
    clean = run_cli("lint", path, "-b", "llguidance")
    assert clean.exit_code == 0 and "W002" not in clean.stdout  # the default layout cannot run away
    flexible = run_cli("lint", path, "-b", "llguidance", "--json-whitespace", "flexible")
    assert flexible.exit_code == 1 and "W002" in flexible.stdout
    assert run_cli("lint", path, "-b", "llguidance", "--max-whitespace", "4").exit_code == 0  # a bound


def test_minimum_reported_exactly_for_the_backends_whose_matcher_accepts_a_smaller_value():
    """J001 must agree with each backend's actual matcher: walk `4` (below minimum 5)
    through every backend that compiles the schema, independently of sgcli lint."""
    from sgcli.backends import check_supports
    from sgcli.backends.matching import backends_for, feed
    from sgcli.constraints.sources import from_file

    spec = from_file(str(CASES / "j001_minimum.json"))
    vocab = byte_vocab()
    ignoring = set()
    for name in backends_for(spec):
        compiled = check_supports(name, spec).compile(spec, vocab)
        assert feed(compiled, vocab.encode("7")).accepted  # a valid value passes everywhere
        if feed(compiled, vocab.encode("4")).accepted:
            ignoring.add(name)
    reported = {d.backend for d in lint("j001_minimum.json", json_options=COMPACT) if d.code == "J001"}
    assert reported == ignoring
    assert ignoring, "some installed backend should ignore minimum (outlines-core does)"
    (d,) = lint("j001_minimum.json", json_options=COMPACT)
    assert d.message.startswith("`minimum` is silently ignored by outlines_core")


def test_r001_names_the_backends_that_reject_the_feature():
    (d,) = lint("r001_lookahead.regex")
    assert "lookahead `(?=b)`" in d.message
    for name in ("xgrammar", "llguidance", "outlines_core"):
        assert name in d.message  # each rejects lookahead; the S001 each would give is folded in


def test_backend_error_on_the_same_spot_is_folded_into_the_structure_finding():
    (d,) = lint("g003_duplicate_rule.gbnf", backend="xgrammar")
    assert d.code == "G003" and any("xgrammar" in n and "defined multiple times" in n for n in d.notes)
    (d,) = lint("g003_duplicate_rule.gbnf", selection=Selection.parse(["S"], None), backend="xgrammar")
    assert (d.code, d.line, d.col) == ("S001", 3, 1)  # without G003 selected, the backend's error stands


def test_a_lark_file_without_start_is_one_finding_and_llguidance_places_it(tmp_path, smol_tokenizer):
    g = tmp_path / "common.lark"
    g.write_text('DIGIT: "0".."9"\n')
    found = Linter(LintOptions(backend="llguidance")).lint(str(g)).diagnostics
    assert [(d.code, d.line, d.col) for d in found] == [("G007", 1, 1)]  # llguidance's S001 folded in
    assert any("no start rule found" in n for n in found[0].notes)
    with pytest.raises(UserError) as info:
        get_backend("llguidance").compile(ConstraintSpec(Kind.LARK, g.read_text(), str(g)), smol_tokenizer.vocab)
    assert (info.value.location.line, info.value.location.col) == (1, 1)


def test_unused_rule_hint_and_undefined_rule_suggestion(tmp_path):
    g = tmp_path / "typo.gbnf"
    g.write_text('root ::= greting\ngreeting ::= "hi"\n')
    codes = {(d.code, d.line, d.col): d for d in Linter(LintOptions(backend="xgrammar")).lint(str(g)).diagnostics}
    assert set(codes) == {("G001", 1, 10), ("G002", 2, 1)}
    assert "did you mean `greeting`" in codes[("G001", 1, 10)].hint


def test_llguidance_dialect_has_no_false_positives(tmp_path):
    g = tmp_path / "tool.lark"
    g.write_text(
        '%llguidance {"skip_repetition": "once"}\n'
        "start: TEXT | fun_call | pick\n"
        "TEXT: /[^{](.|\\n){0,200}/\n"
        'fun_call: <|im_start|> "call " args @schema <[2]>\n'
        'args[capture, lazy]: %json { "type": "object", "properties": {"a": {"type": "integer"}} }\n'
        'perm::_ : "" %if is_ones([0:2])\n'
        '        | "a" perm::set_bit(0) %if bit_clear(0)\n'
        "pick: perm::0x0\n"
        "%ignore /[ ]{0,4}/\n"
    )
    (tmp_path / "s.json").write_text('{"type": "integer"}')
    options = LintOptions(selection=Selection.parse(["G", "W", "R"], None), subs=(f"schema={tmp_path / 's.json'}",))
    found = Linter(options).lint(str(g)).diagnostics
    assert found == []  # nothing about %json, @schema, special tokens, attributes or parameters
    without_option = g.read_text().replace('{"skip_repetition": "once"}', "{}")
    g.write_text(without_option)  # now the bounded %ignore may repeat: a true W001
    found = Linter(options).lint(str(g)).diagnostics
    assert [(d.code, d.line, d.col) for d in found] == [("W001", 9, 1)]
    found = Linter(LintOptions(selection=Selection.parse(["G"], None))).lint(str(g)).diagnostics
    assert [(d.code, d.line, d.col) for d in found] == [("G001", 4, 37)]  # @schema with no --sub for it


@pytest.mark.parametrize(
    "backend, found",
    [("xgrammar", [("G006", 1, 12)]), ("llguidance", []), (("llguidance", "xgrammar"), [("G006", 1, 12)])],
)
def test_g006_reads_terminals_as_rules_where_the_backend_has_no_lexer(tmp_path, backend, found):
    """xgrammar has no lexer: `(WORD ","?)+` splits `ab` into one word or two there, as the GBNF form
    does (G006); llguidance's lexer takes WORD whole. lark's csv.lark took 316 ms a mask on xgrammar."""
    g = tmp_path / "header.lark"
    g.write_text('start: "#" (WORD ","?)+ "\\n"\n%import common.WORD\n')
    options = LintOptions(backend=backend, selection=Selection.parse(["G"], None))
    assert [(d.code, d.line, d.col) for d in Linter(options).lint(str(g)).diagnostics] == found


@pytest.mark.parametrize(
    "pattern,inside,outside",
    [
        ("[\\s\\S]{1,8}x", "\n a\u00e9", ""),  # any character
        ("^[\\S]+@[\\S]+\\.[\\S]{2,}$", "a@\u00e9", " \n\t"),
        ("^[^\\W\\.\\-][\\w\\.\\-]*$", "aZ0_", ".- \n"),
    ],
)
def test_negated_class_escapes_inside_a_class_are_read(tmp_path, pattern, inside, outside):
    """`[\\s\\S]` (any character) and `[^\\W]` stood in 6 of the JSON Schema Store's 942 patterns, and
    sgcli's reader refused them (S004: no G, W or R rule ran)."""
    from sgcli.dialects.grammar_model import Chars, walk
    from sgcli.dialects.regex_parse import parse_regex

    f = tmp_path / "p.regex"
    f.write_text(pattern)
    assert [d.code for d in Linter(LintOptions()).lint(str(f)).diagnostics if d.code == "S004"] == []
    first = next(n for n in walk(parse_regex(pattern).node) if isinstance(n, Chars))
    assert all(first.contains(ord(c)) for c in inside)
    assert not any(first.contains(ord(c)) for c in outside)


def test_an_escaped_non_ascii_digit_is_not_a_backreference():
    """`\\²` passed str.isdigit and was read as a backreference."""
    from sgcli.dialects.regex_parse import parse_regex

    assert [f.what for f in parse_regex("a\\²").features] == []
    assert [f.what for f in parse_regex("(a)\\1").features] == ["backreference"]


@pytest.mark.parametrize(
    ("ranges", "negated", "holds"),
    [
        ([(0, 0x10FFFF)], True, False),  # every character left out
        ([(0xD800, 0xDFFF)], False, False),  # surrogates: no UTF-8 text holds one
        ([(0, 0xD7FF), (0xE000, 0x10FFFF)], True, False),  # every scalar value left out, surrogates aside
        ([(0, 0xD7FF), (0xE000, 0x10FFFE)], True, True),  # U+10FFFF stays
        ([(0x61, 0x7A), (0x41, 0x5A), (0x60, 0x62)], False, True),
        ([], True, True),  # `.`
        ([], False, False),
    ],
)
def test_a_class_holds_text_where_some_scalar_value_is_in_it(ranges, negated, holds):
    from sgcli.dialects.grammar_model import Chars

    assert Chars(0, ranges, negated).holds_text() is holds
