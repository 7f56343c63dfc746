"""What `%import common.X` brings into a Lark grammar: the lark library's own common.lark terminals,
as sgcli's grammar model, for the analyses that look into definitions (`sgcli lint`'s W001 and G006).

The backends resolve these imports themselves (each has its own common.lark); sgcli's reader only
noted the name as external, so `%import common.WS` / `%ignore WS`, Lark's most common idiom, linted
clean where the same `WS` defined in the file was W001 (found by a hunt). `sgcli convert` prints them
into the converted grammar (GBNF has no imports). The text is lark 1.x's common.lark (MIT licence), the
definitions a model can hold; ESCAPED_STRING, which lark writes with a lazy `.*?` and a lookbehind, is
its meaning respelled as one regex (`lark_backends.EXACT_ESCAPED_STRING`, what the backends are given).
"""

from __future__ import annotations

from sgcli.dialects.grammar_model import Ref, Rule, walk
from sgcli.dialects.lark import parse_lark
from sgcli.dialects.lark_backends import EXACT_ESCAPED_STRING

COMMON_LARK = (
    r"""
DIGIT: "0".."9"
HEXDIGIT: "a".."f"|"A".."F"|DIGIT
INT: DIGIT+
SIGNED_INT: ["+"|"-"] INT
DECIMAL: INT "." INT? | "." INT
_EXP: ("e"|"E") SIGNED_INT
FLOAT: INT _EXP | DECIMAL _EXP?
SIGNED_FLOAT: ["+"|"-"] FLOAT
NUMBER: FLOAT | INT
SIGNED_NUMBER: ["+"|"-"] NUMBER
LCASE_LETTER: "a".."z"
UCASE_LETTER: "A".."Z"
LETTER: UCASE_LETTER | LCASE_LETTER
WORD: LETTER+
CNAME: ("_"|LETTER) ("_"|LETTER|DIGIT)*
WS_INLINE: (" "|/\t/)+
WS: /[ \t\f\r\n]/+
CR : /\r/
LF : /\n/
NEWLINE: (CR? LF)+
SH_COMMENT: /#[^\n]*/
CPP_COMMENT: /\/\/[^\n]*/
C_COMMENT: "/*" /(.|\n)*?/ "*/"
SQL_COMMENT: /--[^\n]*/
"""
    + f"ESCAPED_STRING: {EXACT_ESCAPED_STRING}\n"
)

PREFIX = "common."  # the names imported definitions refer to each other by: no name in a file has a dot


def imported_definitions(imports: dict[str, str]) -> dict[str, Rule]:
    """Definitions for the names `imports` (local -> "common.X") brings in from common.lark, each under
    its local name, and whatever they use under `common.NAME`; names from elsewhere are left out.
    Positions are common.lark's: these feed analyses, never a diagnostic's place."""
    wanted = {local: source.removeprefix(PREFIX) for local, source in imports.items() if source.startswith(PREFIX)}
    if not wanted:
        return {}
    common = parse_lark(COMMON_LARK + "start: DIGIT\n").definitions()  # fresh nodes: renamed below
    out: dict[str, Rule] = {}
    for name, rule in common.items():
        for node in walk(rule.body):
            if isinstance(node, Ref):
                node.name = PREFIX + node.name
        out[PREFIX + name] = rule
    out.pop(PREFIX + "start")
    for local, name in wanted.items():
        if PREFIX + name in out:
            out[local] = out[PREFIX + name]
    return out
