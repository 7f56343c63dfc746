"""xgrammar reads what the user wrote with the meaning it has everywhere else (backends/xgrammar_regex.py).

Found by running every `pattern` of the JSON Schema Store's schemas through `--regex`: xgrammar's own
reading of `[\\^~]` is `[^~]`, of `\\x41B` is `Л`, and its `.` takes a newline. Each case is checked
on the compiled grammar (what its matcher takes) and, for a regex, against the independent check.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sgcli.backends import get_backend
from sgcli.backends.matching import accepts_bytes, sample_strings
from sgcli.backends.xgrammar_regex import escapes_for_xgrammar, for_xgrammar, gbnf_for_xgrammar, lark_for_xgrammar
from sgcli.constraints.regex_dialects import ECMA, fullmatch
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.errors import UserError


def _tag(pattern: str) -> str:
    return json.dumps({"type": "structural_tag", "format": {"type": "regex", "pattern": pattern}})


CASES = [
    # kind, text, taken, refused
    (Kind.REGEX, "[\\^~]+", ["^~", "~^"], ["a", "在"]),  # read as [^~]+ before
    (Kind.REGEX, "[\\^]", ["^"], ["b"]),  # read as "anything"
    (Kind.REGEX, "[\\^-a]", ["^", "_", "a"], ["b", "]"]),
    (Kind.REGEX, "[\\x5E]x", ["^x"], ["bx"]),
    (Kind.REGEX, "a.b", ["axb", "a.b"], ["a\nb", "a\rb", "a\u2028b"]),  # `.` took every line terminator
    (Kind.REGEX, "\\x41B", ["AB"], ["\u041b"]),  # read as U+041B
    (Kind.REGEX, "[\\x41B]+", ["AB", "BA"], ["\u041b"]),
    (Kind.REGEX, "[^\\^]", ["a"], ["^"]),  # already right: left alone
    (Kind.LARK, "start: /[\\^~]+/", ["^~"], ["a"]),
    (Kind.LARK, 'start: /\\x41B/ "\\x43"', ["ABC"], ["\u041bC"]),
    (Kind.LARK, "start: /a.b/", ["axb"], ["a\nb"]),  # Lark's `.` was right
    # the lark check's \\s (Unicode's White_Space), not ECMAScript's
    (Kind.LARK, 'start: /\\s/ "x" /[\\s,]/', [" x,", "\u0085x\u2028"], ["\ufeffx ", " x\ufeff", "\u001cx "]),
    # and its \\d, \\w (Unicode's), where xgrammar read ASCII's: `٣` is a digit, `é` a word character
    (Kind.LARK, "start: /\\d+/ /\\w+/", ["\u0663\U0001d7d7\u00e9_a", "1a"], ["\u00e9"]),
    (Kind.LARK, "start: /[^\\d]/ /\\W/", ["a!"], ["\u0663\u00e9", "a\u00e9"]),
    (Kind.LARK, "start: /[\\w-]+/", ["\u00e9-\u4e2d"], ["!"]),
    (Kind.EBNF, 'root ::= "\\x41B"', ["AB"], ["\u041b"]),  # GBNF: llama.cpp reads two digits too
    (Kind.EBNF, "root ::= [\\x41B]+", ["AB"], ["\u041b"]),
    # empty alternatives, which llama.cpp reads (its json.gbnf: `ws ::= | " " | ...`) and xgrammar refused
    (Kind.EBNF, 'root ::= "a" ws "b"\nws ::= | " " | "\\n"', ["ab", "a b", "a\nb"], ["a  b"]),
    (Kind.EBNF, 'root ::= "b" ( "a" | ) x\nx ::= "c" |  # a comment | with a bar\n', ["b", "bac", "bc"], ["ba b"]),
    # more llama.cpp GBNF that xgrammar refused: `.`, `{,n}`, a repetition repeated
    (Kind.EBNF, 'root ::= . "x"', ["ax", "\nx", "\u00e9x"], ["x", "abx"]),
    (Kind.EBNF, 'root ::= "a"{,2} "b"', ["b", "aab"], ["aaab"]),
    (Kind.EBNF, 'root ::= [a-z]{2,3}? "!"', ["!", "ab!", "abc!"], ["a!", "abcd!"]),
    (Kind.EBNF, 'root ::= "x" [0-9]{1,2}{2}', ["x12", "x1234", "x123"], ["x1", "x12345"]),
    (Kind.STRUCTURAL_TAG, _tag("[\\^~]x."), ["^xa", "~x~"], ["axa", "^x\n"]),  # its tags read regexes alike
    (Kind.STRUCTURAL_TAG, _tag("\\x41B"), ["AB"], ["\u041b"]),
]


@pytest.mark.parametrize("kind,text,taken,refused", CASES, ids=[f"{c[0].name}-{c[1]}" for c in CASES])
def test_xgrammar_takes_what_the_constraint_means(smol_tokenizer, kind, text, taken, refused):
    compiled = get_backend("xgrammar").compile(ConstraintSpec(kind, text, "c"), smol_tokenizer.vocab)
    for s in taken:
        assert accepts_bytes(compiled, s.encode()).accepted, (text, s)
        assert kind is not Kind.REGEX or fullmatch(text, s, ECMA)
    for s in refused:
        assert not accepts_bytes(compiled, s.encode()).accepted, (text, s)
        assert kind is not Kind.REGEX or not fullmatch(text, s, ECMA)


def test_the_rewrite_changes_only_what_xgrammar_misreads():
    assert for_xgrammar("[a-z]+\\.[0-9]{2,}") == "[a-z]+\\.[0-9]{2,}"
    assert for_xgrammar("[\\^~]") == "[~\\^]"
    assert for_xgrammar("[\\^\\^]") == "\\^"
    assert for_xgrammar("\\x41") == "\\x41"  # no hex digit follows: read right
    assert for_xgrammar("\\\\x41B") == "\\\\x41B"  # an escaped backslash, then letters
    assert for_xgrammar("a.b", lark=True) == "a.b"
    assert escapes_for_xgrammar('root ::= "\\x41B" # c:\\\nx ::= "\\\\x41B"') == (
        'root ::= "\\u0041B" # c:\\\nx ::= "\\\\x41B"'
    )
    assert gbnf_for_xgrammar('x ::= | "a" ( "b" | )\ny ::= "c" |\nz ::= "d" |\n  "e"') == (
        'x ::= "" | "a" ( "b" | "" )\ny ::= "c" | ""\nz ::= "d" |\n  "e"'
    )
    assert gbnf_for_xgrammar('r ::= "." [.] .{,2}?  # a . here') == 'r ::= "." [.] ([^]{0,2})?  # a . here'
    assert lark_for_xgrammar('start: /[\\^~]./ "[\\\\^" // [\\^') == 'start: /[~\\^]./ "[\\\\^" // [\\^'


@pytest.mark.parametrize(
    "kind,text,where,says",
    [
        (Kind.REGEX, "a\\s*^b", (1, 5), "`^` where text can come before it"),  # xgrammar took "ab"
        (Kind.REGEX, "x$y", (1, 2), "`$` where text can come after it"),
        (Kind.REGEX, "(^a)+", (1, 2), "`^` where text can come before it"),  # a second round comes after the first
        (Kind.REGEX, "x[\\p{L}]", (1, 3), "in a character class, which xgrammar reads as letters"),  # took "p"
        # cfn-lint's `^(vpc-)([a-z0-9]+)\\Z` took `vpc-exchangeZ`: a letter to ECMAScript, an anchor to Python
        (Kind.REGEX, "^(vpc-)([a-z0-9]+)\\Z", (1, 19), "`\\Z`, which xgrammar reads as the letter Z"),
        (Kind.LARK, "start: /\\A[0-9]+/", (1, 9), "`\\A`, which xgrammar reads as the letter A"),
        (Kind.REGEX, "a^+", (1, 3), "'+' has nothing to repeat"),  # xgrammar took "aaaa" (found by the property test)
        (Kind.LARK, 'start: "x"\nY: /a$b/', (2, 6), "`$` where text can come after it"),
        (Kind.STRUCTURAL_TAG, _tag("a$b"), (None, None), "(in the regex 'a$b')"),
        # email's `[\041-\176]+:` allowed only 1, 4, 6, 7 (and NUL); rich's ANSI `\033\[` forced "\u000033["
        (Kind.REGEX, "[\\041-\\176]+:", (1, 2), "`\\041`, a backreference or an octal escape to Python's re"),
        (Kind.REGEX, "(a)\\1", (1, 4), "`\\1`, a backreference"),  # read as the digit 1, with a warning
        # ECMAScript's `[^]` (any character) then `a]+`: xgrammar wrote "Ia]" where Rust and Python mean [^\]a]+
        (Kind.REGEX, "[^]a]+", (1, 1), "a class opening with `]`"),
        (Kind.REGEX, "x[]a]", (1, 2), "a class opening with `]`"),
        # a lone surrogate: xgrammar wrote its three bytes, which no UTF-8 text holds
        (Kind.REGEX, "[a-z]\\ud800", (1, 6), "half of a UTF-16 surrogate pair"),
        (Kind.REGEX, "x[\\uD83D-\\uDFFF]", (1, 3), "half of a UTF-16 surrogate pair"),
        (Kind.REGEX, "x\\u{d800}", (1, 2), "half of a UTF-16 surrogate pair"),
    ],
)
def test_what_no_spelling_fixes_is_refused_at_its_place(smol_tokenizer, kind, text, where, says):
    with pytest.raises(UserError) as info:
        get_backend("xgrammar").compile(ConstraintSpec(kind, text, "f"), smol_tokenizer.vocab)
    assert says in info.value.message
    assert (info.value.location.line, info.value.location.col) == where


@pytest.mark.parametrize("pattern", ["^a|^b", "(?:^a|b)c", "(a$)", "(^a)?b", "[$^]a", "\\^a\\$"])
def test_anchors_that_nothing_can_pass_are_left_to_xgrammar(smol_tokenizer, pattern):
    compiled = get_backend("xgrammar").compile(ConstraintSpec(Kind.REGEX, pattern, "r"), smol_tokenizer.vocab)
    for s in sample_strings(compiled, 4, seconds=2.0):
        assert fullmatch(pattern, s.decode(), ECMA), (pattern, s)


def test_an_error_in_a_rewritten_regex_is_placed_in_the_original(smol_tokenizer):
    with pytest.raises(UserError) as info:
        get_backend("xgrammar").compile(ConstraintSpec(Kind.REGEX, "a.b)c", "r.regex"), smol_tokenizer.vocab)
    assert "position 4" in info.value.message
    assert (info.value.location.line, info.value.location.col) == (1, 4)


ATOMS = ["a", "b", "^", "$", "~", ".", "\\^", "\\.", "\\x41", "\\x42", "1", "\\s", "\\d", "-", "(^a|b)"]
CLASS_MEMBERS = ["a", "b", "\\^", "~", "\\x41", "1", "\\-", "\\s", "_-a", "\\^-a", ".", "\\p{Lu}"]


@st.composite
def _regexes(draw):
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            members = draw(st.lists(st.sampled_from(CLASS_MEMBERS), min_size=1, max_size=3))
            negated = draw(st.integers(0, 3)) == 0
            piece = "[" + ("^" if negated else "") + "".join(members) + "]"
        else:
            piece = draw(st.sampled_from(ATOMS))
        parts.append(piece + draw(st.sampled_from(["", "", "+", "?", "{1,2}"])))
    return "".join(parts) or "a"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=_regexes())
def test_every_string_xgrammar_takes_matches_the_regex(smol_tokenizer, pattern):
    """Random walks over xgrammar's matcher (every token it allows is tried at random): each string it
    ends on must match the regex in ECMAScript's reading, as the independent check reads it."""
    try:
        compiled = get_backend("xgrammar").compile(ConstraintSpec(Kind.REGEX, pattern, "r"), smol_tokenizer.vocab)
    except UserError:
        return  # refused with a message: not a silent misreading
    for s in sample_strings(compiled, 6, seconds=2.0):
        text = s.decode("utf-8", "replace")
        assert fullmatch(pattern, text, ECMA), (pattern, text)


@pytest.mark.parametrize("kind,text", [(Kind.REGEX, "\\w+\\s\\d+"), (Kind.LARK, "start: /[a-z_]+/ /\\s/ /[0-9]+/")])
def test_xgrammar_mask_agrees_with_its_matcher_on_whitespace(smol_tokenizer, kind, text):
    # xgrammar 0.2.9 with U+2028/U+2029 in a class beside ASCII: after `ab` its mask allowed `_(`, `_)`
    # (the separators' last UTF-8 bytes less 0x80), which accept() refused: generation ended in an error
    from sgcli.backends.matching import feed

    vocab = smol_tokenizer.vocab
    compiled = get_backend("xgrammar").compile(ConstraintSpec(kind, text, "c"), vocab)
    for piece in ("_(", "_)"):
        result = feed(compiled, vocab.encode("ab") + [vocab.tokens.index(piece.encode())], check_mask=True)
        assert not result.accepted and not result.inconsistent, result
    for s in ("ab 1", "ab\u20281", "ab\u20291", "a_\t12"):
        assert accepts_bytes(compiled, s.encode()).accepted, s
    assert not accepts_bytes(compiled, b"ab_(1").accepted
