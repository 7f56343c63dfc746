"""A backend's compiled grammar and matcher with a check of sgcli's own on top: what the schema
checker (`schema_checker`) and the repeated-key guard (`repeated_keys`) share. The backend's name and
spec stay; each token the check refuses is masked, and a mask it leaves empty is a dead end that
decoding backtracks out of (`may_dead_end`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sgcli.backends.base import Compiled, Matcher


@dataclass(eq=False)
class OnTopCompiled(Compiled):
    inner: Compiled = field(kw_only=True)
    may_dead_end = True

    @classmethod
    def around(cls, inner: Compiled, **fields: Any):
        """This wrapper around `inner`: its backend, spec, vocabulary, time and warnings kept."""
        return cls(
            inner.backend,
            inner.spec,
            inner.vocab,
            inner.compile_s,
            list(inner.warnings),
            inner.normalized,
            inner=inner,
            **fields,
        )

    def size_info(self) -> dict[str, int]:
        return self.inner.size_info()


class OnTopMatcher:
    """The Matcher protocol's delegations; a subclass keeps one snapshot of its own state per accepted
    token in `_history` (`_restore` puts one back) and sets `_error` where its check refuses."""

    def __init__(self, inner: Matcher):
        self._inner = inner
        self._history: list[Any] = []
        self._error: str | None = None

    @property
    def error(self) -> str | None:
        return self._error or self._inner.error

    def _restore(self, snapshot: Any) -> None:
        raise NotImplementedError

    def rollback(self, n: int) -> None:
        if n <= 0:
            return
        self._inner.rollback(n)
        n = min(n, len(self._history))
        snapshot = self._history[-n]
        del self._history[-n:]
        self._restore(snapshot)
        self._error = None

    def jump_forward(self) -> bytes:
        return self._inner.jump_forward()  # a draft only: every drafted token still passes the mask

    def is_terminated(self) -> bool:
        return self._inner.is_terminated()
