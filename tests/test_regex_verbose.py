"""A regex's verbose mode (`x`) and its `$`, read as Rust reads them by every reader of Rust's dialect.

llguidance's regex-to-Lark step wrote a raw line break as `\\n`, which verbose mode keeps: `(?x)(yes\\n|no)`
(a regex written over two lines) made `generate` write "yes\\n", judged invalid. The independent check kept
whitespace and `#` inside classes (Python's verbose mode), and read `a$` as taking "a\\n" (Python's `$`).
outlines-core's reading (Rust's regex-syntax itself) is the reference each case is checked against.
"""

from __future__ import annotations

import pytest

from sgcli.backends import get_backend
from sgcli.backends.matching import accepts_bytes, backends_for
from sgcli.constraints.regex_dialects import ECMA, RUST, fullmatch, without_verbose
from sgcli.constraints.spec import ConstraintSpec, Kind

CASES = [
    ("(?x)a\n|b", ["a", "b"], ["a\n", "ab"]),
    ("(?x)\n  yes   # agreeing\n| no  # not\n", ["yes", "no"], ["yes ", " no", "yes#"]),
    ("(?x)[ a]+", ["a", "aa"], [" ", "a a"]),  # whitespace inside a class is ignored too
    ("(?x)a\\ b", ["a b"], ["ab"]),  # an escaped space is kept
    ("(?x:a b)c d", ["abc d"], ["abcd", "ab c d"]),  # the flag within its group only
    ("(?x)a(?-x) b", ["a b"], ["ab"]),  # and off again
    ("(?x)\ta\t", ["a"], ["\ta\t"]),
    ("a$", ["a"], ["a\n"]),
    ("a\n", ["a\n"], ["a"]),  # without the flag a line break is the character
]


def test_verbose_whitespace_and_comments_are_left_out_where_the_flag_is_on():
    assert without_verbose("(?x)a # c\n| b") == "(?x)a|b"
    assert without_verbose("(?x)a\\ b[ c]") == "(?x)a\\x20b[c]"
    assert without_verbose("(?x:a b)c d") == "(?x:ab)c d"
    assert without_verbose("a b # c") == "a b # c"  # no flag: nothing changes


@pytest.mark.parametrize(("pattern", "taken", "refused"), CASES)
def test_the_check_reads_as_rust_does(pattern, taken, refused):
    assert all(fullmatch(pattern, t, RUST) for t in taken)
    assert not any(fullmatch(pattern, t, RUST) for t in refused)


@pytest.mark.parametrize(("pattern", "taken", "refused"), CASES)
def test_every_backend_of_rusts_reading_takes_what_rust_does(smol_tokenizer, pattern, taken, refused):
    spec = ConstraintSpec(Kind.REGEX, pattern, "r.regex")
    names = [b for b in backends_for(spec) if get_backend(b).capabilities.regex_dialect == RUST]
    assert "outlines_core" in names or "llguidance" in names
    for name in names:
        compiled = get_backend(name).compile(spec, smol_tokenizer.vocab)
        for text in taken:
            assert accepts_bytes(compiled, text.encode()).accepted, (name, text)
        for text in refused:
            assert not accepts_bytes(compiled, text.encode()).accepted, (name, text)


def test_an_ecmascript_dollar_is_the_end_of_the_text_too():
    assert fullmatch("a$", "a", ECMA) and not fullmatch("a$", "a\n", ECMA)
    assert fullmatch("(?m)a$", "a", RUST)
