"""G012 against llguidance's own matcher: each text the finding names is refused there and taken by
xgrammar (which reads terminals as rules of characters), and the near misses stay silent."""

from __future__ import annotations

import re

import pytest

from sgcli.backends import check_supports
from sgcli.backends.matching import feed
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.lint import Linter, LintOptions
from sgcli.lint.runner import byte_vocab


def g012(tmp_path, text: str, **options) -> list:
    path = tmp_path / "g.lark"
    path.write_text(text)
    return [d for d in Linter(LintOptions(**options)).lint(str(path)).diagnostics if d.code == "G012"]


def accepted(backend: str, grammar: str, text: str) -> bool:
    spec = ConstraintSpec(Kind.LARK, grammar, "g.lark")
    vocab = byte_vocab()
    return feed(check_supports(backend, spec).compile(spec, vocab), vocab.encode(text)).accepted


# grammar, (line, col), the example the message gives (None: the follower never comes), a whole text the
# grammar allows that llguidance refuses
FLAGGED = [
    ('start: NUMBER "."\nNUMBER: /[0-9]+(\\.[0-9]+)?/\n', (1, 8), "0.", "0."),
    ('start: NAME "x"\nNAME: /[a-z]+/\n', (1, 8), None, "ax"),
    ('start: ID "bc"\nID: "a" | "ab"\n', (1, 8), "abc", "abc"),  # llguidance's own example: two texts in step
    ("start: /[a-z]+/ /[a-z0-9]+/\n", (1, 9), "aa", "aa"),  # an inline regex is one lexeme
    ('start: a b\na: "x" TEXT?\nb: "</a>"\nTEXT: /.+/\n', (1, 8), None, "xy</a>"),  # across rules
    ('start: DIGITS "9"\nDIGITS: /[0-9]{2,4}/\n', (1, 8), "009", "009"),  # a bounded repetition, written out
    ('start: WORD "-" WORD\nWORD: LETTER+ ("-" LETTER+)?\nLETTER: /[a-z]/\n', (1, 8), "a-", "a-b"),  # terminals
]


@pytest.mark.parametrize(("grammar", "where", "example", "text"), FLAGGED)
def test_each_finding_names_a_text_llguidance_refuses(tmp_path, grammar, where, example, text):
    (d,) = g012(tmp_path, grammar)
    assert (d.line, d.col) == where
    assert "llguidance lexes greedily" in d.message
    shown = re.search(r"so `([^`]*)` cannot be read", d.message)
    assert (shown.group(1) if shown else None) == example
    assert ("never come right after it" in d.message) == (example is None)
    assert accepted("xgrammar", grammar, text)
    assert not accepted("llguidance", grammar, text)


def test_a_follower_that_can_never_come_is_said_so(tmp_path):
    (d,) = g012(tmp_path, 'start: "<a>" TEXT "</a>"\nTEXT: /[^\\n]+/\n')
    assert "never ends `TEXT` where `<` follows" in d.message and "never come right after it" in d.message
    assert 'text[stop="</a>"]' in d.hint
    (d,) = g012(tmp_path, 'start: "<a>" TEXT "</a>"\nTEXT: /[^\\n]*/\n')
    assert "only where it is empty" in d.message  # `<a></a>` is still taken
    assert accepted("llguidance", 'start: "<a>" TEXT "</a>"\nTEXT: /[^\\n]*/\n', "<a></a>")


CLEAN = [
    'start: "Year: " YEAR "1"\nYEAR: /[0-9]{4}/\n',  # four digits, then nothing goes on
    'start: NAME ":" VALUE\nNAME: /[a-z]+/\nVALUE: /[0-9]+/\n',  # disjoint
    'start: sentence+\nsentence: WORD+ "."\nWORD: /[a-z]+/\n%ignore " "\n',  # a word after a word: one word
    'start: NAME NAME\nNAME: /[a-z]+/\n%ignore " "\n',  # whitespace ends a word, as in any lexer
    'start: "<a>" text\ntext[stop="</a>"]: /[^\\n]*/\n',  # llguidance's stop ends the text
    'start: "a" t\nt[lazy]: /.*/ "END"\n',  # lazy: one lexeme, ended at the first END (llguidance took axyzEND)
]


@pytest.mark.parametrize("grammar", CLEAN)
def test_near_misses_stay_silent(tmp_path, grammar):
    assert g012(tmp_path, grammar) == []


def test_only_where_a_backend_that_lexes_greedily_judges(tmp_path):
    grammar = 'start: NAME "x"\nNAME: /[a-z]+/\n'
    assert g012(tmp_path, grammar, backend="llguidance")
    assert g012(tmp_path, grammar, backend="xgrammar") == []
    assert accepted("xgrammar", grammar, "abx")
