"""G008 (unbounded free text followed by required grammar): where it fires and where it must not."""

from __future__ import annotations

import pytest

from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.lint import Linter, LintOptions, Selection


def g008(kind: Kind, text: str) -> list[tuple[int, int]]:
    options = LintOptions(selection=Selection.parse(["G008"], None))
    found = Linter(options).lint_spec(ConstraintSpec(kind, text, "t")).diagnostics
    return [(d.line, d.col) for d in found if d.code == "G008"]


@pytest.mark.parametrize(
    "kind, text, where",
    [
        (Kind.LARK, 'start: "R: " /.+/ "\\nJSON: " X\nX: "{}"\n', (1, 15)),
        (Kind.LARK, 'start: "R: " REASON "\\n" "ok"\nREASON: /[^\\n]+/\n', (2, 10)),
        (Kind.LARK, 'start: head "!"\nhead: "a" tail\ntail: /[^\\n]*/\n', (3, 8)),  # through two rules
        (Kind.EBNF, 'root ::= "R: " .* "\\nA: " [0-9]\n', (1, 16)),
        (Kind.EBNF, 'root ::= "R: " free "\\nA: " [0-9]\nfree ::= [^\\n]+\n', (2, 10)),
    ],
    ids=["lark-regex", "lark-terminal", "through-rules", "gbnf-dot", "gbnf-rule"],
)
def test_flags_free_text_before_required_grammar(kind, text, where):
    assert g008(kind, text) == [where]


@pytest.mark.parametrize(
    "kind, text",
    [
        (Kind.LARK, 'start: "R: " reason "\\nJSON: " X\nreason[max_tokens=64]: /[^\\n]+/\nX: "{}"\n'),
        (Kind.LARK, 'start: "R: " /[^\\n]{1,200}/ "\\nJSON: " X\nX: "{}"\n'),  # bounded repetition
        (Kind.LARK, 'start: "Answer: " /.+/\n'),  # free text at the end: the model may stop
        (Kind.LARK, 'start: "R: " /.+/ "\\n"?\n'),  # only optional grammar follows
        (Kind.EBNF, 'root ::= "\\"" [^"]* "\\"" ","\n'),  # a delimited string is not free text
        (Kind.EBNF, 'root ::= [a-z]+ "=" [0-9]+\n'),  # identifiers are not free text
    ],
    ids=["max-tokens", "bounded", "at-the-end", "optional-after", "quoted-string", "identifier"],
)
def test_does_not_flag_bounded_or_final_or_delimited_text(kind, text):
    assert g008(kind, text) == []


def test_the_composite_example_is_bounded():
    from pathlib import Path

    lark = Path(__file__).resolve().parent.parent / "examples" / "reasoning_json.lark"
    assert g008(Kind.LARK, lark.read_text()) == []
    assert "max_tokens=" in lark.read_text()


def g008_message(kind: Kind, text: str) -> str:
    options = LintOptions(selection=Selection.parse(["G008"], None))
    (found,) = Linter(options).lint_spec(ConstraintSpec(kind, text, "t")).diagnostics
    return found.message


@pytest.mark.parametrize(
    "kind, text, follower",
    [
        # the rest of the line after the follower (`/ | "--"`) is not what must follow
        (Kind.LARK, 'start: NOTE "x"\nNOTE: /#[^\\n]*\\n/ | "--"\n', "and `\\n` must follow"),
        (Kind.LARK, 'start: /a.*(\\n[\\t ]*)+/ | "b"\n', "and `(\\n[\\t ]*)+` must follow"),
        (Kind.LARK, 'start: RAW "x"\nRAW: /`.*?`/\n', "and `` ` `` must follow"),
        (Kind.EBNF, 'root ::= "R: " .* "\\nA: " [0-9] | "z"\n', 'and `"\\nA: "` must follow'),
        # the follower stands where the terminal is used, not on the terminal's line: it says where
        (Kind.LARK, 'start: "(" C ")" "y"\nC: /\\/\\/[^\\n]*/\n', 'and `")"` (at 1:14) must follow'),
    ],
    ids=["regex-then-alternative", "group", "backtick", "gbnf", "other-line"],
)
def test_quotes_the_element_that_follows_not_the_rest_of_the_line(kind, text, follower):
    assert follower in g008_message(kind, text)
