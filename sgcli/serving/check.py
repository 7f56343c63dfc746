"""An independent check of a server's output for grammar constraints.

JSON Schema, regex and choice outputs are re-checked by `sgcli.constraints.validate` with
jsonschema / Python's re / string comparison. A grammar (GBNF, Lark, structural tags) has no
such library, so its output is fed byte by byte to a *local* backend's matcher, compiled here
from the same text: the server's grammar engine never vouches for its own output.
"""

from __future__ import annotations

from sgcli.constraints.spec import ConstraintSpec, Kind

GRAMMAR_KINDS = frozenset({Kind.EBNF, Kind.LARK, Kind.STRUCTURAL_TAG, Kind.LLGUIDANCE})


class GrammarCheck:
    """Compiles `spec` once with the first local backend that takes it; checks outputs against it."""

    def __init__(self, spec: ConstraintSpec, tokenizer_ref: str | None):
        self.spec = spec
        self.tokenizer_ref = tokenizer_ref
        self._compiled = None
        self.backend: str | None = None
        self.problem: str | None = None

    def prepare(self) -> None:
        """Compile now (before any request is sent), so a grammar the local backends reject fails early."""
        if self.spec.kind not in GRAMMAR_KINDS or self._compiled is not None:
            return
        from sgcli.backends import get_backend
        from sgcli.grammar_dev.matching import backends_for
        from sgcli.tokenizers import load_tokenizer

        names = [n for n in backends_for(self.spec) if get_backend(n).available() is None]
        if not names:
            self.problem = f"no installed local backend can check {self.spec.kind.label} output"
            return
        vocab = load_tokenizer(self.tokenizer_ref).vocab
        self.backend = names[0]
        self._compiled = get_backend(names[0]).compile(self.spec, vocab)

    def complete(self, output: str) -> tuple[bool, str | None]:
        """(is `output` a complete sentence of the grammar, why not)."""
        if self.spec.kind not in GRAMMAR_KINDS:
            return True, None  # validate() checks these kinds itself
        self.prepare()
        if self._compiled is None:
            return False, self.problem
        from sgcli.grammar_dev.matching import accepts_bytes

        feed = accepts_bytes(self._compiled, output.encode("utf-8"))
        return feed.accepted, None if feed.accepted else f"local {self.backend} check: {feed.problem}"
