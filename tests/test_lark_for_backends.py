"""A Lark grammar as llguidance and xgrammar should read it (`dialects/lark.py: for_backends`).

- Priorities (`NAME.2:`): neither backend takes them, and they change no text a grammar accepts, so
  both compile the grammar without them and say so (syncode's Go, SQL, Prover9 and invariants grammars
  were refused by both for this alone).
- `%import common.ESCAPED_STRING`: both backends' own took a raw newline inside the string, which
  lark's (and so the lark check) refuses: a random walk of outlines' json.lark on llguidance found it.
"""

from __future__ import annotations

import itertools

import pytest

from sgcli.backends import get_backend
from sgcli.backends.matching import accepts_bytes, sample_strings
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.dialects.lark_backends import for_backends
from sgcli.validation import lark_check

GRAMMAR = """start: stmt (";" stmt)*
stmt.2: KEYWORD " " NAME | NAME "=" NUMBER
KEYWORD.3: "let" | "var"
NAME.-1 : /[a-z]+/
NUMBER: /[0-9]+/
NOTE: "x.2: y"
"""


def test_priorities_are_cut_out_and_counted():
    text, count = for_backends(GRAMMAR)
    assert count == 3
    assert "stmt:" in text and "KEYWORD:" in text and "NAME :" in text
    assert 'NOTE: "x.2: y"' in text  # the same spelling inside a string stays
    assert for_backends("start: /a/\n") == ("start: /a/\n", 0)


@pytest.mark.parametrize("backend", ["llguidance", "xgrammar"])
def test_a_grammar_with_priorities_compiles_and_says_what_it_left_out(smol_tokenizer, backend):
    spec = ConstraintSpec(Kind.LARK, GRAMMAR, "p.lark")
    compiled = get_backend(backend).compile(spec, smol_tokenizer.vocab)
    assert any("3 rule and terminal priorities" in w.message for w in compiled.warnings)
    assert accepts_bytes(compiled, b"let x;a=1").accepted
    assert not accepts_bytes(compiled, b"let 1").accepted
    for s in sample_strings(compiled, 6, seconds=3.0):
        assert lark_check.check(spec, s.decode()) == [], s  # the lark check reads the grammar with them


@pytest.mark.parametrize(
    "grammar",
    [
        "%import common.ESCAPED_STRING\nstart: ESCAPED_STRING\n",
        "%import common (WS, ESCAPED_STRING)\nstart: ESCAPED_STRING\n",
        "%import common.ESCAPED_STRING -> STR\nstart: STR\n",
    ],
)
def test_escaped_string_means_what_it_means_to_lark(smol_tokenizer, grammar):
    """Every string of `a`, `"`, `\\` and a newline up to four characters inside quotes: each backend
    takes exactly what the lark check takes."""
    spec = ConstraintSpec(Kind.LARK, grammar, "s.lark")
    compiled = [get_backend(b).compile(spec, smol_tokenizer.vocab) for b in ("llguidance", "xgrammar")]
    for k in range(5):
        for body in itertools.product('a"\\\n', repeat=k):
            text = '"' + "".join(body) + '"'
            wanted = lark_check.check(spec, text) == []
            assert [accepts_bytes(c, text.encode()).accepted for c in compiled] == [wanted, wanted], text


@pytest.mark.parametrize("backend", ["llguidance", "xgrammar"])
def test_a_control_character_written_raw_in_a_literal_is_read_as_itself(smol_tokenizer, backend):
    """lark reads `"a<TAB>b"`; both backends refused it ("lexer error", "invalid string literal")."""
    spec = ConstraintSpec(Kind.LARK, 'start: "a\tb" "c"\n', "tab.lark")
    compiled = get_backend(backend).compile(spec, smol_tokenizer.vocab)
    assert accepts_bytes(compiled, b"a\tbc").accepted
    assert not accepts_bytes(compiled, b"a bc").accepted


@pytest.mark.parametrize(
    ("text", "taken", "refused"),
    [
        ("start: /a\\x2b/", ["a", "aaa"], ["a+"]),  # lark evaluates \x2b before compiling: `a+`
        ("start: /\\x5cd/", ["5"], ["\\d"]),  # a backslash, then d: `\d`
        ("start: /a\\x7cb/", ["a", "b"], ["a|b"]),
        ("start: /[a\\x5d]b/", ["a]b"], ["ab"]),  # `[a]` then `]b`
        ("start: /a\\\\x2b/", ["a\\x2b"], ["a+"]),  # an escaped backslash: nothing to evaluate
    ],
)
@pytest.mark.parametrize("backend", ["llguidance", "xgrammar"])
def test_a_numeric_escape_that_spells_regex_syntax_means_what_lark_makes_of_it(
    smol_tokenizer, backend, text, taken, refused
):
    """Both backends read `/a\\x2b/` as `a` then a plus sign; lark (and so the check) reads `a+`."""
    spec = ConstraintSpec(Kind.LARK, text, "g.lark")
    compiled = get_backend(backend).compile(spec, smol_tokenizer.vocab)
    for s in taken:
        assert accepts_bytes(compiled, s.encode()).accepted, s
        assert lark_check.checked(spec, s)[0] == [], s
    for s in refused:
        assert not accepts_bytes(compiled, s.encode()).accepted, s


@pytest.mark.parametrize("text", ['root ::= règle\nrègle ::= "a"\n'])
def test_a_message_xgrammar_cuts_in_two_is_an_error_not_a_crash(smol_tokenizer, text):
    """xgrammar's error for a rule name beyond ASCII cut a character in two: UnicodeDecodeError, exit 3."""
    from sgcli.errors import UserError

    with pytest.raises(UserError, match="beyond ASCII"):
        get_backend("xgrammar").compile(ConstraintSpec(Kind.EBNF, text, "g.gbnf"), smol_tokenizer.vocab)


def test_an_escape_past_the_last_code_point_is_left_for_the_backends_to_refuse():
    """`/\\U0011FFFF/` names no character: chr() raised ValueError (exit 3) while the escapes were spelled out."""
    assert for_backends("start: /\\U0011FFFF/\n")[0] == "start: /\\U0011FFFF/\n"
    assert for_backends("start: /a\\x2b/\n")[0] == "start: /a+/\n"  # one that names regex syntax is still spelled


@pytest.mark.parametrize(
    "low, high, texts",
    [
        ("^", "a", ["a", "^_", "b", "-"]),  # the lark library built [^-a]: everything but - and a
        ("!", "/", ["/", "-", "!", "0"]),
        ("[", "]", ["\\\\", "]", "a"]),
        ("a", "z", ["q", "A"]),
    ],
)
def test_a_range_literal_is_read_as_the_backends_read_it(smol_tokenizer, low, high, texts):
    """`C: "^".."a"` is the code points from ^ to a for llguidance and xgrammar; the lark library wrote
    `[^-a]`, so the lark check called `b` valid and `a` invalid (a dry-run tour)."""
    spec = ConstraintSpec(Kind.LARK, f'start: C+\nC: "{low}".."{high}"\n', "r.lark")
    compiled = get_backend("llguidance").compile(spec, smol_tokenizer.vocab)
    for text in texts:
        text = text.encode().decode("unicode_escape")
        taken = accepts_bytes(compiled, text.encode()).accepted
        assert (lark_check.check(spec, text) == []) == taken, (text, taken)


def test_lint_places_the_priorities_warning_at_the_first_one(run_cli, tmp_path):
    """The S002 was the only finding with no line:col."""
    path = tmp_path / "p.lark"
    path.write_text(GRAMMAR)
    result = run_cli("lint", path, "--backend", "llguidance", "--output-format", "json")
    import json

    (finding,) = [d for d in json.loads(result.stdout) if d["code"] == "S002"]
    assert (finding["line"], finding["col"]) == (2, 5)  # `stmt.2:`'s `.2`
