"""The unconstrained backend: every token allowed. For A/B runs against a real grammar."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from sgcli.backends.base import Capabilities, Compiled, allow_every_token
from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.tokenizers.vocab import Vocab

if TYPE_CHECKING:
    import numpy as np


class NoneMatcher:
    error = None

    def __init__(self, vocab: Vocab):
        self._vocab = vocab
        self._stops = set(vocab.stop_ids)
        self._stopped = False
        self._history: list[int] = []

    def fill_mask(self, bitmask: np.ndarray) -> None:
        allow_every_token(bitmask, self._vocab)

    def accept(self, token_id: int) -> bool:
        self._history.append(token_id)
        self._stopped = token_id in self._stops
        return True

    def rollback(self, n: int) -> None:
        del self._history[len(self._history) - n :]
        self._stopped = bool(self._history) and self._history[-1] in self._stops

    def jump_forward(self) -> bytes:
        return b""

    def is_terminated(self) -> bool:
        return self._stopped

    def can_stop(self) -> bool:
        return True


class NoneCompiled(Compiled):
    def matcher(self) -> NoneMatcher:
        return NoneMatcher(self.vocab)


class NoneBackend:
    name = "none"
    description = "no constraint: every token allowed (for A/B runs)"
    capabilities = Capabilities(
        kinds=frozenset(Kind),
        json_options=frozenset({"compact", "whitespace_pattern", "indent", "max_whitespace", "strict_properties"}),
        notes="ignores the constraint while decoding; outputs are still validated against it",
        enforces=False,
    )

    def unavailable_reason(self) -> str | None:
        return None

    def version(self) -> str:
        from sgcli import __version__

        return __version__

    def compile(self, spec: ConstraintSpec, vocab: Vocab) -> Compiled:
        t = time.perf_counter()
        if spec.kind is Kind.JSON_SCHEMA:
            spec.schema()  # still reject malformed input
        return NoneCompiled(self.name, spec, vocab, time.perf_counter() - t)

    def deserialize(self, data: bytes, spec: ConstraintSpec, vocab: Vocab) -> Compiled | None:
        return None

    def schema_grammar(self, spec: ConstraintSpec) -> tuple[str, list]:
        raise NotImplementedError("the none backend prints no grammar (capabilities.prints_schema)")

    def forget_compiles(self) -> None:
        pass

    def prepare(self, vocab: Vocab) -> None:
        pass
