"""G006 through Lark terminals, for a backend without a lexer (xgrammar): there a terminal is a rule of
characters, so `(WORD ","?)+` splits `ab` into one word or two, as its GBNF form does. A lexer
(llguidance) takes the terminal whole, so `Structure.repetitions` stops at terminals; lark's
csv.lark took 316 ms a mask on xgrammar (found by a hunt)."""

from __future__ import annotations

from sgcli.dialects.grammar_model import Rep, walk
from sgcli.lint.diagnostic import Diagnostic, at_offset, short
from sgcli.lint.structure import Structure


def lexerless_repetitions(structure: Structure, backends: list[str]) -> list[Diagnostic]:
    """G006 for each unbounded repetition in a parser rule that only the terminals' own repetitions make
    nested, as `backends` (those judging the file that have no lexer) read it."""
    out = []
    for rule in [] if not backends or structure.g.syntax != "lark" else structure.g.rules:
        for node in [] if rule.terminal else walk(rule.body):
            if not isinstance(node, Rep) or node.max is not None or structure.whitespace_kind(node.body) == "ws":
                continue
            if structure.is_loop(node.body, False) or not structure.is_loop(node.body, True):
                continue  # G006 already, or no terminal's repetition within
            src = short(structure.text[node.pos : node.end])
            message = (
                f"`{src}` repeats something that is itself an unbounded repetition once its terminals are read "
                f"as rules, as {', '.join(backends)} reads them (no lexer): the same text splits into iterations "
                "in exponentially many ways"
            )
            hint = 'make what separates iterations required (`WORD ("," WORD)*`), or bound the terminal'
            out.append(at_offset("G006", structure.text, structure.path, node.pos, node.end, message, hint=hint))
    return out
