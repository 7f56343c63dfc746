"""The lint rules that predict certain failure, run by `generate` before the slow model load.

Two stages, so a mistake costs as little as possible:
- `structure_errors(spec)` needs only the text (no grammar library, no tokenizer): a
  reference to an undefined rule or a missing root rule fails every backend;
- `certain_failures(...)` needs the compiled grammar and the model's own tokenizer (both
  load in a moment; the model is the slow part): a grammar whose matcher fails at its first
  step or that accepts no text at all (errors), and L001, a `--max-tokens` too small for the shortest output (a warning:
  the run would only produce a cut-off, invalid output).
"""

from __future__ import annotations

from sgcli.backends.matching import accepts_nothing, first_mask_error
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.errors import Location, UserError
from sgcli.lint.diagnostic import Diagnostic
from sgcli.lint.inputs import read_grammar
from sgcli.lint.length_check import shortest_sentence, too_long
from sgcli.lint.structure import Structure

FATAL_STRUCTURE = ("G001", "G007", "G011")  # every backend rejects these grammars, or never ends them


def structure_errors(spec: ConstraintSpec, codes: tuple[str, ...] = FATAL_STRUCTURE) -> None:
    """Raise the first fatal structure finding (of `codes`) as a positioned UserError (exit 2)."""
    if spec.kind not in (Kind.EBNF, Kind.LARK):
        return

    grammar, _, _ = read_grammar(spec)
    if grammar is None:  # sgcli's reader gave up: the backend's compile will say what is wrong
        return
    fatal = [d for d in Structure(grammar, spec.text, spec.name).run() if d.code in codes]
    if fatal:
        d = min(fatal, key=Diagnostic.sort_key)
        raise UserError(f"{d.message} ({d.code})", location=Location(spec.name, d.line, d.col), hint=d.hint)


def certain_failures(spec: ConstraintSpec, compiled, max_tokens: int, tokenizer_name: str) -> list[Diagnostic]:
    """L001 findings for `compiled` (against its own vocabulary); exit 2 if it accepts no text at all."""

    failed = first_mask_error(compiled)
    if failed is not None:
        raise UserError(
            f"the {compiled.backend} matcher fails at the first step on this {spec.kind.label}: {failed}",
            location=Location(spec.origin) if spec.origin else None,
            hint="see `sgcli lint --tokenizer` and `sgcli masks`; another --backend may read it",
        )
    if accepts_nothing(compiled):
        raise UserError(
            f"the {spec.kind.label} accepts no text at all; every generation would fail",
            location=Location(spec.origin) if spec.origin else None,
            hint="check the constraint with `sgcli masks`",
        )
    grammar = read_grammar(spec)[0] if spec.kind in (Kind.EBNF, Kind.LARK, Kind.REGEX) else None
    schema = spec.schema() if spec.kind is Kind.JSON_SCHEMA else None
    sentence = shortest_sentence(grammar, schema, spec.kind is Kind.JSON_SCHEMA)
    if sentence is None:
        return []
    root = grammar.definitions().get(grammar.root) if grammar is not None and grammar.syntax != "regex" else None
    span = (root.pos, root.pos + len(root.name)) if root is not None else None
    return too_long(spec, sentence, compiled.vocab, [compiled], max_tokens, tokenizer_name, span)
