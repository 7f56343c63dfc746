"""Real grammars from other projects: each lints clean, or gets exactly the diagnostics
listed here, each of which is true (the comment says why)."""

from __future__ import annotations

import corpora
import pytest

from sgcli.lint import Linter, LintOptions

GBNF = ("gbnf", "grammars", "*.gbnf")
LARK = ("llguidance", "sample_parser/data", "*.lark")

# file -> [(code, line, col, backend)], every backend that supports the kind running.
EXPECTED = {
    # `ws ::= [ \t\n]*`, used between every token: unbounded whitespace.
    "arithmetic.gbnf": [("W001", 6, 11, None)],
    # `root ::= (declaration)*` accepts the empty program; `ws ::= ([ \t\n]+)` is unbounded;
    # `"//" [^\n]* "\n"`: a line comment only the model can end, and the newline must follow.
    "c.gbnf": [("G005", 1, 1, None), ("G008", 39, 28, None), ("W001", 42, 9, None)],
    "chess.gbnf": [],
    "english.gbnf": [],
    "japanese.gbnf": [],
    # `ws ::= | " " | ...`: an empty first alternative, which llama.cpp and llguidance take and xgrammar's
    # EBNF parser rejects ("Expect element, but got |"): sgcli writes `""` there for it (gbnf_for_xgrammar).
    "json.gbnf": [],
    "json_arr.gbnf": [],
    "list.gbnf": [],
    "vllm-sql.gbnf": [],
    # Lark's grammar of Lark: `start: (_item? _NL)* _item?` accepts the empty file; `_NL:
    # /(\r?\n)+\s*/` repeats newlines and then whitespace without bound; `WS_INLINE: (" "|/\t/)+`
    # (which is %ignored) too; `COMMENT: /\s*/ "//" ... | /\s*/ "#" ...` starts with `\s*` twice;
    # `_STRING_INNER: /.*?/` is free text that a required closing quote follows.
    "lark.lark": [
        ("G005", 5, 1, None),
        ("G006", 5, 8, None),  # `(_item? _NL)*` with _NL's newlines read as a rule (xgrammar: no lexer)
        # REGEXP (`/\/(\\\/|\\\\|[^\/])+?\/[imslux]*/`) goes on past `/\\/`: llguidance refuses `/\\/,`
        ("G012", 5, 9, None),
        ("W001", 54, 7, None),
        ("W001", 54, 15, None),
        ("G008", 56, 17, None),
        ("W001", 61, 12, None),
        ("W001", 66, 11, None),
        ("W001", 66, 33, None),
    ],
    # `(text | element...)+` where text's terminal is itself a repetition: unambiguous for llguidance's
    # lexer, exponentially ambiguous for xgrammar, which reads terminals as rules (LintOptions: all backends)
    "rfc.lark": [
        ("G006", 31, 180, None),
        ("G006", 33, 72, None),
        ("G006", 36, 300, None),
        ("G006", 49, 88, None),
        ("G006", 50, 232, None),
        ("G006", 51, 232, None),
        ("G006", 53, 118, None),
        ("G006", 54, 32, None),
        ("G006", 59, 36, None),
        ("G006", 60, 33, None),
        ("G006", 61, 33, None),
        ("G006", 62, 32, None),
        ("G006", 65, 38, None),
        ("G006", 66, 39, None),
        ("G006", 70, 87, None),
        ("G006", 71, 31, None),
        ("G006", 72, 40, None),
        ("G006", 74, 40, None),
        ("G006", 82, 289, None),
        ("G006", 83, 289, None),
    ],
}


def corpus_files() -> list:
    return corpora.files(*GBNF) + corpora.files(*LARK)


def test_the_table_covers_every_corpus_grammar():
    corpora.require(GBNF[0]), corpora.require(LARK[0])
    assert [p.name for p in corpus_files()] == sorted(n for n in EXPECTED if n.endswith(".gbnf")) + sorted(
        n for n in EXPECTED if n.endswith(".lark")
    )


@pytest.fixture(scope="module")
def linter():
    return Linter(LintOptions())


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: getattr(p, "name", None))
def test_corpus_grammar_lints_as_expected(linter, path):
    path = corpora.resolve(path)
    found = [(d.code, d.line, d.col, d.backend) for d in linter.lint(str(path)).diagnostics]
    assert found == EXPECTED[path.name]


def test_corpus_grammars_compile_where_no_compile_error_is_expected():
    """The S001 entries above are the only compile failures: every other (file, backend) compiles."""
    from sgcli.backends.matching import backends_for
    from sgcli.constraints.sources import from_file
    from sgcli.lint.backend_checks import compile_with
    from sgcli.lint.runner import byte_vocab

    corpora.require(GBNF[0]), corpora.require(LARK[0])
    for path in corpus_files():
        spec = from_file(str(path))
        failing = {b for code, *_, b in EXPECTED[path.name] if code == "S001"}
        for name in backends_for(spec):
            run = compile_with(name, spec, byte_vocab())
            assert (run.error is not None) == (name in failing), (path.name, name, run.error)
