"""L001: the shortest output a grammar allows needs more tokens than `--max-tokens`.

Method (see also the rule's explanation): the shortest sentence comes from the grammar's
structure (`shortest.ShortestStrings`; for a schema, the minimal valid instance written
compactly), its fewest-token spelling from dynamic programming over the vocabulary
(`shortest.fewest_tokens`), and the finding is confirmed by walking those tokens through
each compiled backend's matcher. Where no backend confirms it, nothing is reported.
"""

from __future__ import annotations

import json

from sgcli.backends.matching import feed
from sgcli.dialects.shortest import ShortestStrings, fewest_tokens
from sgcli.lint.diagnostic import Diagnostic, at_offset
from sgcli.lone_surrogates import lone_surrogate


def shortest_sentence(grammar=None, schema=None, has_schema: bool = False) -> str | None:
    if grammar is not None:
        defs = grammar.definitions()
        root = defs.get(grammar.root)
        if root is None:
            return None
        return ShortestStrings(defs, grammar.external).rules.get(grammar.root)
    if has_schema:
        from sgcli.lint.schema_instances import Impossible, InstanceBuilder

        try:
            return json.dumps(InstanceBuilder(schema, full=False).build(), separators=(",", ":"), ensure_ascii=False)
        except Impossible:
            return None
    return None


def too_long(
    spec, sentence: str, vocab, compiled_runs, max_tokens: int, tokenizer_name: str, root_span: tuple[int, int] | None
) -> list[Diagnostic]:
    if lone_surrogate(sentence) is not None:  # a pattern naming half a UTF-16 pair: no output holds it
        return []
    ids = fewest_tokens(vocab, sentence.encode("utf-8"))
    if ids is None or len(ids) <= max_tokens:
        return []
    confirmed = [c.backend for c in compiled_runs if feed(c, ids).accepted]
    if not confirmed:
        return []
    shown = sentence if len(sentence) <= 60 else sentence[:59] + "…"
    message = (
        f"the shortest output allowed, {json.dumps(shown, ensure_ascii=False)} ({len(sentence.encode())} bytes), "
        f"takes {len(ids)} tokens of {tokenizer_name} at the fewest; --max-tokens {max_tokens} cuts every "
        f"output before the grammar can end"
    )
    hint = f"raise --max-tokens to at least {len(ids)}, or shorten what the grammar requires"
    note = "confirmed on the matcher of " + ", ".join(confirmed)
    if root_span is None:
        return [Diagnostic("L001", message, spec.name, 1, 1, hint=hint, notes=(note,))]
    d = at_offset("L001", spec.text, spec.name, root_span[0], root_span[1], message, hint=hint)
    return [d.with_note(note)]
