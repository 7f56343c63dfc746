"""Lark priorities (`NAME.2:`): neither backend takes them, and they change no text a grammar accepts,
so both compile the grammar without them and say so (syncode's Go, SQL, Prover9 and invariants
grammars were refused by both for this alone)."""

from __future__ import annotations

import pytest

from sgcli.backends import get_backend
from sgcli.backends.matching import accepts_bytes, sample_strings
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.dialects.lark import without_priorities
from sgcli.validation import lark_check

GRAMMAR = """start: stmt (";" stmt)*
stmt.2: KEYWORD " " NAME | NAME "=" NUMBER
KEYWORD.3: "let" | "var"
NAME.-1 : /[a-z]+/
NUMBER: /[0-9]+/
NOTE: "x.2: y"
"""


def test_priorities_are_cut_out_and_counted():
    text, count = without_priorities(GRAMMAR)
    assert count == 3
    assert "stmt:" in text and "KEYWORD:" in text and "NAME :" in text
    assert 'NOTE: "x.2: y"' in text  # the same spelling inside a string stays
    assert without_priorities("start: /a/\n") == ("start: /a/\n", 0)


@pytest.mark.parametrize("backend", ["llguidance", "xgrammar"])
def test_a_grammar_with_priorities_compiles_and_says_what_it_left_out(smol_tokenizer, backend):
    spec = ConstraintSpec(Kind.LARK, GRAMMAR, "p.lark")
    compiled = get_backend(backend).compile(spec, smol_tokenizer.vocab)
    assert any("3 rule and terminal priorities" in w.message for w in compiled.warnings)
    assert accepts_bytes(compiled, b"let x;a=1").accepted
    assert not accepts_bytes(compiled, b"let 1").accepted
    for s in sample_strings(compiled, 6, seconds=3.0):
        assert lark_check.check(spec, s.decode()) == [], s  # the lark check reads the grammar with them
