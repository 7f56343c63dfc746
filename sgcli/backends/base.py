"""The one protocol every grammar backend implements.

Three nouns, one per stage (as in xgrammar): a `Backend` compiles a `ConstraintSpec`
against a `Vocab` into a `Compiled` grammar, which makes fresh `Matcher`s, one per
sequence. Matcher errors are state (`error`), not exceptions (as in llguidance), so
the decode loop can report them. Masks are numpy int32 bitmasks, bit i of word i//32
set when token i is allowed, so no backend needs torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Protocol

import numpy as np

from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.tokenizers.vocab import Vocab


def bitmask_words(vocab_size: int) -> int:
    return (vocab_size + 31) // 32


def new_bitmask(vocab_size: int) -> np.ndarray:
    return np.full(bitmask_words(vocab_size), -1, dtype=np.int32)


def allowed_ids(bitmask: np.ndarray, vocab_size: int) -> np.ndarray:
    """Token ids whose bit is set."""
    bits = np.unpackbits(bitmask.view(np.uint8), bitorder="little")[:vocab_size]
    return np.flatnonzero(bits)


@dataclass(frozen=True)
class Capabilities:
    """What a backend accepts: constraint kinds and JSON layout options."""

    kinds: frozenset[Kind]
    json_options: frozenset[str] = (
        frozenset()
    )  # "compact", "whitespace_pattern", "indent", "max_whitespace", "strict_properties"
    notes: str = ""
    # The matcher's `jump_forward()` reports the bytes the grammar forces next, so the engine
    # can append them in one forward pass. False: it always returns b"" (the engine then skips it).
    jump_forward: bool = False
    # Importing the library imports torch (seconds): `sgcli lint` by default skips such a backend
    # unless no other one supports the file.
    imports_torch: bool = False
    regex_dialect: str = "rust"  # how it reads regexes: "rust" or "ecma"; validation reads them the same way
    # JSON Schema keywords it compiles without enforcing and without a warning of its own (measured)
    unenforced_keywords: frozenset[str] = frozenset()
    # keywords beside which it drops every sibling keyword, silently (xgrammar: anyOf/oneOf)
    ignores_beside: frozenset[str] = frozenset()


@dataclass(frozen=True)
class CompileWarning:
    """Something the backend weakened or ignored while compiling (e.g. an unenforced keyword)."""

    message: str
    pointer: str | None = None  # JSON pointer into the schema, where known


class Matcher(Protocol):
    """Per-sequence grammar state."""

    error: str | None

    def fill_mask(self, bitmask: np.ndarray) -> None:
        """Write the allowed next tokens into `bitmask` (int32 words over the vocab)."""

    def accept(self, token_id: int) -> bool:
        """Advance by one token; False (and `error` set) if the grammar forbids it."""

    def rollback(self, n: int) -> None: ...

    def jump_forward(self) -> bytes:
        """Bytes the grammar forces next, whatever the model would say (may be empty).
        Only backends whose `Capabilities.jump_forward` is set compute it; others return b""."""

    def is_terminated(self) -> bool:
        """No further token can be accepted (a stop token was accepted, or the grammar is done)."""

    def can_stop(self) -> bool:
        """The text so far is a complete match: a stop token would be allowed now."""


@dataclass(eq=False)
class Compiled:
    """A grammar compiled for one vocabulary by one backend."""

    backend: str
    spec: ConstraintSpec
    vocab: Vocab
    handle: object  # the backend's own compiled object
    compile_s: float
    warnings: list[CompileWarning] = field(default_factory=list)
    normalized: str | None = None  # the grammar text the backend actually compiled, where it has one

    def matcher(self) -> Matcher:
        from sgcli.backends import get_backend

        return get_backend(self.backend).matcher(self)


class Backend(Protocol):
    name: ClassVar[str]
    description: ClassVar[str]
    capabilities: ClassVar[Capabilities]

    def available(self) -> str | None:
        """None if importable, else why not (e.g. the package is missing)."""

    def version(self) -> str: ...

    def compile(self, spec: ConstraintSpec, vocab: Vocab) -> Compiled:
        """Compile or raise a positioned UserError; unsupported kinds never reach here."""

    def matcher(self, compiled: Compiled) -> Matcher: ...

    # Optional methods. A backend may leave any of them out: callers look them up with
    # getattr(backend, "serialize", None). Without serialize/deserialize a backend's
    # compiled grammars are simply not cached on disk (`sgcli compile` says "not cacheable").

    def serialize(self, compiled: Compiled) -> bytes | None:
        """Optional. The compiled grammar as bytes for the on-disk cache (`sgcli.cache.grammars`),
        or None when this particular grammar cannot be stored."""

    def deserialize(self, data: bytes, spec: ConstraintSpec, vocab: Vocab) -> Compiled | None:
        """Optional. Inverse of `serialize` for the same backend version and vocabulary; None when
        `data` is stale or unreadable (the cache then recompiles). `compile_s` is the load time."""

    def prepare(self, vocab: Vocab) -> None:
        """Optional. Build the per-vocabulary state now, so that a bounded compile's forked child
        (`sgcli.backends.bounded`) inherits it instead of building it for nothing."""

    def size_info(self, compiled: Compiled) -> dict[str, int]:
        """Optional. Backend-specific size figures for `sgcli compile`, e.g. {"memory_size_bytes": n}."""


class LibraryBackend:
    """Plumbing shared by adapters over an installed grammar library.

    Subclasses name the module to import and the distribution to report; `per_vocab`
    builds a library-side tokenizer object once per `Vocab` (keyed by identity, so a
    padded copy of a vocabulary gets its own).
    """

    module: ClassVar[str]
    distribution: ClassVar[str]

    def __init__(self) -> None:
        self._per_vocab: dict[int, tuple[Vocab, object]] = {}

    def available(self) -> str | None:
        try:
            __import__(self.module)  # the import statement's path (importlib's skips -X importtime)
        except ImportError as exc:
            from sgcli.extras import install_hint

            return f"cannot import {self.module} ({exc}); {install_hint(self.module)}"
        return None

    def version(self) -> str:
        import importlib.metadata

        return importlib.metadata.version(self.distribution)

    def per_vocab(self, vocab: Vocab, build):
        entry = self._per_vocab.get(id(vocab))
        if entry is None or entry[0] is not vocab:
            entry = (vocab, build())
            self._per_vocab[id(vocab)] = entry
        return entry[1]
