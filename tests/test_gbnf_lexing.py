"""GBNF means the same language on every backend: llguidance's greedy lexer must not shorten it.

GBNF has no lexer (llama.cpp and xgrammar match characters against the rules). llguidance lexes,
greedily, and its own GBNF converter made lexemes of literals and terminal-only rules, so a rule
ending in optional whitespace swallowed a required newline and the grammar below could never end
(transformers-CFG's arithmetic grammar has this shape: 0 of 30 xgrammar samples were accepted).
"""

from __future__ import annotations

import pytest

from sgcli.backends import get_backend
from sgcli.backends.matching import accepts_bytes, sample_strings
from sgcli.constraints.spec import ConstraintSpec, Kind

# a name and a number each take the whitespace after them, and a newline must end every line
LINES = r"""root ::= (name "=" ws num "\n")+
name ::= [a-z] [a-z0-9_]* ws
num  ::= [0-9]+ ws
ws   ::= [ \t\n]*
"""
# a literal that is a prefix of another, before a literal that starts with the longer one's rest
PREFIX = 'root ::= x y\nx ::= "a" | "ab"\ny ::= "bc" | "c"\n'
# a terminal-only rule whose repetition can run into the character that must follow it
DIGITS = 'root ::= "[" item ("," item)* "]"\nitem ::= [0-9]+ | [0-9]+ "," "5"\n'
# a keyword that an identifier also spells, each path needing what the other cannot take
KEYWORD = 'root ::= "if" "(" ")" "{" "}" | ident "(" ")" ";"\nident ::= [a-z] [a-z0-9]*\n'


def _compile(backend: str, text: str, vocab):
    return get_backend(backend).compile(ConstraintSpec(Kind.EBNF, text, "g.gbnf"), vocab)


@pytest.mark.parametrize(
    "text,accepted",
    [
        (LINES, ["a=1\n", "a = 1\n", "ab=12 \n", "a=1\nb=2\n", "a=1\n\n", "a\n=\n1\n\n"]),
        (PREFIX, ["abc", "abbc", "ac"]),
        (DIGITS, ["[1]", "[1,2]", "[12,5]", "[1,5,5]"]),
        (KEYWORD, ["if(){}", "if();", "ifx();", "i();"]),
    ],
    ids=["whitespace-before-newline", "literal-prefix", "digits-then-comma", "keyword-or-identifier"],
)
def test_llguidance_accepts_every_string_of_the_gbnf_language(smol_tokenizer, text, accepted):
    compiled = _compile("llguidance", text, smol_tokenizer.vocab)
    for data in accepted:
        fed = accepts_bytes(compiled, data.encode())
        assert fed.accepted, f"{data!r}: {fed.reason}"


@pytest.mark.parametrize("text", [LINES, PREFIX, DIGITS, KEYWORD], ids=["lines", "prefix", "digits", "keyword"])
def test_llguidance_and_xgrammar_read_one_gbnf_alike(smol_tokenizer, text):
    """Random walks of each backend's matcher are accepted by the other's (as `convert`'s round trip
    compares two grammars): xgrammar reads GBNF as llama.cpp does."""
    pytest.importorskip("xgrammar")
    vocab = smol_tokenizer.vocab
    llg, xg = _compile("llguidance", text, vocab), _compile("xgrammar", text, vocab)
    for walker, other in ((xg, llg), (llg, xg)):
        samples = sample_strings(walker, 25, seed=3)
        assert samples
        refused = [s for s in samples if not accepts_bytes(other, s).accepted]
        assert not refused, f"{other.backend} refuses {refused[:3]}"


def test_strings_outside_the_language_stay_rejected_by_the_gbnf_stay_rejected(smol_tokenizer):
    compiled = _compile("llguidance", LINES, smol_tokenizer.vocab)
    for data in ("a=1", "=1\n", "a=\n", "1=a\n", "a=1\nb\n"):
        assert not accepts_bytes(compiled, data.encode()).accepted, data


def test_an_error_in_the_gbnf_is_placed_in_the_users_file(smol_tokenizer):
    """llguidance reads sgcli's print of the GBNF; an error names a place in the user's file, not a line of
    text the user never saw. A reversed count is sgcli's reader's to refuse, at its braces (llguidance's
    own "range end must be >= start" named only the rule, before 2026-12-06)."""
    from sgcli.errors import UserError

    text = 'root ::= a\n\na ::= "x" b\nb ::= [a-z]{3,1}\n'
    with pytest.raises(UserError) as info:
        _compile("llguidance", text, smol_tokenizer.vocab)
    assert "maximum below its minimum" in info.value.message
    assert (info.value.location.path, info.value.location.line, info.value.location.col) == ("g.gbnf", 4, 12)


def test_past_its_item_limit_llguidance_says_why_in_gbnfs_terms(smol_tokenizer, monkeypatch):
    """One-character lexemes make more Earley items a step; GBNF gets a higher limit, and where even that
    runs out the error names the ambiguity and the backend that reads GBNF as written, not llguidance's
    advice to avoid short lexemes (which the user did not write)."""
    from sgcli.backends import llguidance_backend
    from sgcli.backends.base import new_bitmask

    monkeypatch.setattr(llguidance_backend, "GBNF_STEP_ITEMS", 30)
    compiled = _compile("llguidance", LINES, smol_tokenizer.vocab)
    matcher, mask = compiled.matcher(), new_bitmask(len(smol_tokenizer.vocab))
    for token in smol_tokenizer.vocab.encode("abc = 12\nxyz = 3\n"):
        matcher.fill_mask(mask)
        if matcher.error or not matcher.accept(token):
            break
    assert matcher.error is not None and "Too many items (limit 30" in matcher.error
    assert "--backend xgrammar" in matcher.error and "avoiding" not in matcher.error


def test_bounded_repetitions_are_printed_as_llguidance_spells_them():
    """`x ~ 0..3` is the lark library's spelling; llguidance 1.8 (pyproject's floor) refused it with
    "error parsing signed integer" (CI's floors stage), so llguidance's print uses `x{0,3}`."""
    from sgcli.dialects.convert import one_char_lexemes

    printed, positions = one_char_lexemes(ConstraintSpec(Kind.EBNF, 'root ::= a ("," a){0,3} a{2,}\na ::= "ab"\n', "g"))
    assert printed == 'start: a ("," a){0,3} a{2,}\na: "a" "b"\n'
    assert positions == [0, 30]  # each rule where its name is
