"""The one protocol every grammar backend implements.

Three nouns, one per stage (as in xgrammar): a `Backend` compiles a `ConstraintSpec`
against a `Vocab` into a `Compiled` grammar, which makes fresh `Matcher`s, one per
sequence. Matcher errors are state (`error`), not exceptions (as in llguidance), so
the decode loop can report them. Masks are numpy int32 bitmasks, bit i of word i//32
set when token i is allowed, so no backend needs torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol

from sgcli.constraints.spec import ConstraintSpec, Kind
from sgcli.dialects.lark_backends import for_backends

if TYPE_CHECKING:  # imported where used, so the registry (and DEFAULT_BACKEND) load fast
    import numpy as np

    from sgcli.tokenizers.vocab import Vocab


BITS_PER_WORD = 32  # the mask layout: token i is bit i % 32 (least significant first) of int32 word i // 32


def bitmask_words(vocab_size: int) -> int:
    return (vocab_size + BITS_PER_WORD - 1) // BITS_PER_WORD


def new_bitmask(vocab_size: int) -> np.ndarray:
    import numpy as np

    return np.full(bitmask_words(vocab_size), -1, dtype=np.int32)


def allow_every_token(bitmask: np.ndarray, vocab: Vocab) -> None:
    """Fill `bitmask` allowing every id of `vocab`'s tokenizer and none past it: a model's logit rows
    that `Vocab.padded` added have no token, no text (grammar backends refuse them as special ids), so an
    unconstrained step (the none backend, a reasoning model's thinking) must not sample them either."""
    bitmask.fill(-1)
    word, bit = divmod(len(vocab) - vocab.padding, BITS_PER_WORD)
    if word < bitmask.size:
        bitmask[word] &= (1 << bit) - 1  # the low `bit` ids of that word
        bitmask[word + 1 :] = 0


def allowed(bitmask: np.ndarray, token_id: int) -> bool:
    """Whether `token_id`'s bit is set: bit i%32 of word i//32."""
    word, bit = divmod(token_id, BITS_PER_WORD)
    return bool((int(bitmask[word]) >> bit) & 1)


def unpack_bits(bitmask: np.ndarray, n: int | None = None) -> np.ndarray:
    """The mask as one 0/1 byte per token id (the first `n` ids): the one host-side unpacking of the
    layout, for the engine's masks and the mask walks alike (a little-endian host's int32 words)."""
    import numpy as np

    bits = np.unpackbits(bitmask.view(np.uint8), bitorder="little")
    return bits if n is None else bits[:n]


def allowed_ids(bitmask: np.ndarray, vocab_size: int) -> np.ndarray:
    """Token ids whose bit is set."""
    import numpy as np

    return np.flatnonzero(unpack_bits(bitmask, vocab_size))


@dataclass(frozen=True)
class SchemaKeywords:
    """Which JSON Schema keywords a backend's grammar enforces where they stand, as measured
    (benchmarks/keyword_positions.py, the JSON-Schema-Test-Suite). Anything not listed counts as
    not enforced: sgcli's schema checker then enforces it while decoding (keyword_coverage.py)."""

    enforced: frozenset[str]  # constraint keywords it enforces
    through: frozenset[str]  # applicators whose subschemas keep their own status (properties, $ref, anyOf...)
    formats: frozenset[str] = frozenset()  # `format` values its grammar knows (and drops siblings beside)
    # of those, the ones its grammar only approximates: the checker enforces them (random walks and the
    # edges found `2023-02-30`, second 60, `01.1.1.1` taken as date, time, ipv4: benchmarks/format_edges.py)
    approximate_formats: frozenset[str] = frozenset()
    typed: frozenset[str] = frozenset()  # enforced only beside a `type` naming the JSON type they constrain
    lone_all_of: bool = False  # allOf is enforced only with one subschema and no sibling constraint
    drops_beside: frozenset[str] = frozenset()  # beside these it drops every sibling keyword (xgrammar: anyOf)
    # beside these it compiles the listed values alone (xgrammar: `{"type": "string", "enum": ["a", null]}`
    # took null): a sibling is a gap only where some value breaks it (`type` beside an enum of its type is not)
    drops_beside_values: frozenset[str] = frozenset()
    disjoint_one_of: bool = False  # oneOf whose branches each admit one distinct JSON type is enforced (as anyOf)
    escaped_names: bool = True  # property names that need JSON escapes (quotes, control characters) work
    # a property name written with a JSON escape (`{"\\u0061": "x"}`) is matched as its raw text, so it is
    # another name to the grammar than the one jsonschema reads (llguidance, xgrammar; found 2026-12-07):
    # "" never; "dry-run" except in a grammar compiled to generate from, whose strings are narrowed to one
    # spelling per character (json_layout.UNIQUE_ESCAPES); "dry-run-or-control" also where the schema names
    # a character only `\\uXXXX` writes, which keeps every escape (json_layout.one_spelling_fits)
    raw_escaped_names: str = ""
    # property names beyond ASCII are matched (False, xgrammar: `{"é": "x"}` under `properties: {"é":
    # integer}` and `additionalProperties: string` was read as an additional property; 2026-12-06)
    ascii_names: bool = True
    # `enum`/`const` values are written as JSON (False, outlines-core: a value's control characters and
    # quotes written raw, and an empty `enum` written as no value at all, `{"x":}`; found 2026-12-06)
    escaped_values: bool = True
    # groups of keywords of which it enforces none where several stand in one subschema (xgrammar: pattern
    # beside format, pattern beside minLength/maxLength)
    exclusive_groups: tuple[frozenset[str], ...] = ()
    required_listed: bool = False  # `required` is enforced only for names `properties` lists beside it
    # min/maxProperties are enforced only where every name `properties` lists is also required: elsewhere
    # llguidance counts only the properties it does not list (`maxProperties: 1` took {"x": "a", "y": 1})
    counts_all_required: bool = False
    # (keyword, siblings): it drops the keyword where any of those stands beside it (xgrammar: a length
    # beside `format`, `multipleOf` beside a bound; its compile warnings say so, found by the Snowplow schemas)
    dropped_beside: tuple[tuple[str, frozenset[str]], ...] = ()
    integer_only: frozenset[str] = frozenset()  # enforced only beside "type": "integer", with an integer value
    first_branch: bool = False  # each subschema honours only its first recognised keyword (outlines-core)
    # `pattern`s its grammar cannot take as written (pattern_gaps.py), each left to sgcli's checker:
    # "literal": one that spells a character JSON escapes, matched against the raw JSON text (xgrammar);
    # "any": one with any part that admits such a character (outlines-core); "": it escapes them itself
    raw_patterns: str = ""
    unmatchable: frozenset[str] = frozenset()  # regex features its grammar cannot match: relaxed (llguidance)
    # it reads `\A`, `\Z`, `\z` in a `pattern` as letters (xgrammar warns "matching the character literally"),
    # where jsonschema and sgcli's checker (Python's re) anchor: such a pattern is left to the checker
    letter_anchors: bool = False
    # it reads a `pattern`'s classes as Rust's regex crate does: `[[:upper:]]`, `[a-z&&[^aeiou]]`, nested
    # `[`, `--` and `~~` are set syntax there and literal characters to jsonschema (Python's re, ECMAScript)
    rust_classes: bool = False
    # a negated class that leaves out `"` or `\` still takes it written as an escape (llguidance 1.9:
    # `^[^"]*$` took `"\""`, which jsonschema refuses; 2026-12-06)
    negated_escapes: bool = False
    # shorthand classes (`\\d \\D \\w \\W \\s \\S`; inside a negated class, the other case) it reads wider
    # than Python's re, which jsonschema uses: llguidance and xgrammar read `\\w`/`\\d` as ASCII, so `\\W`
    # took "ۿ" and `\\D` took "٠"; xgrammar's `\\s` takes U+FEFF; outlines-core's `\\w` combining marks
    # and its `\\d` digits newer than Python's Unicode tables (measured on 1,900 code points, 2026-12-06)
    wide_shorthands: frozenset[str] = frozenset()
    # an optional group holding an unbounded repetition takes that repetition alone (xgrammar: `^(a+b)?$`
    # took "a", `^[0-9]+(-[a-z]+)?$` took "1a"; about 50 of 2,136 real-world patterns)
    optional_repeats: bool = False
    # it compares numbers in decimal, jsonschema in floats: an exclusive bound took a value that rounds onto
    # it (llguidance: `exclusiveMaximum: 1` took 0.99999999999999999, which is 1.0 to jsonschema)
    decimal_bounds: bool = False
    # between two bounds it writes a number with at most this many decimal places (xgrammar: 6), so a range
    # holding no such number leaves the grammar only the empty text there (`[1e-7, 2e-7]`: a tour, 2026-12-07)
    bounded_places: int | None = None
    # it resolves a `#/...` reference against the document's root, not the `$id` of the subschema around
    # it (xgrammar, outlines-core: `#/$defs/B` inside `"$id": ".../c"` took the root's `B`; 2026-12-06)
    root_fragments: bool = False


PRIORITIES_LEFT_OUT = "rule and terminal priorities (`NAME.N:`) left out"  # lint places it at the first


def lark_priority_warnings(spec: ConstraintSpec) -> list[CompileWarning]:
    """The warning of a backend that compiled a Lark grammar without its priorities (`dialects.lark.for_backends`)."""
    dropped = for_backends(spec.text)[1] if spec.kind is Kind.LARK else 0
    if not dropped:
        return []
    message = f"{dropped} {PRIORITIES_LEFT_OUT}: they choose among the parses of a text"
    return [CompileWarning(message + " and change no text the grammar accepts")]


@dataclass(frozen=True)
class Capabilities:
    """What a backend accepts (constraint kinds, JSON layout options) and which optional parts it has.

    The flags replace probing for methods: callers ask `caps.cacheable`, never `getattr`.
    """

    kinds: frozenset[Kind]
    # "compact", "whitespace_pattern", "indent", "max_whitespace", "strict_properties"
    json_options: frozenset[str] = frozenset()
    notes: str = ""
    enforces: bool = True  # its masks restrict tokens (False only for the unconstrained A/B backend)
    cacheable: bool = False  # Compiled.serialize / Backend.deserialize round-trip for the on-disk cache
    # Its compile work grows with the constraint's size (no automaton that can blow up; measured), so a
    # small constraint compiles in this process under the time limit, with no forked child (bounded.py).
    compiles_in_process: bool = False
    # Serializing is cheap next to compiling: a forked child's compile is sent back, not compiled again.
    ships_compiled: bool = False
    # The matcher's `jump_forward()` reports the bytes the grammar forces next, so the engine
    # can append them in one forward pass. False: it always returns b"" (the engine then skips it).
    jump_forward: bool = False
    # It prints a JSON Schema as grammar text (`Backend.schema_grammar`), which `sgcli convert` reads.
    prints_schema: bool = False
    # Its lexer is greedy over Lark's multi-character literals and terminals (`x: "a" | "ab"` before
    # `"bc"` refuses `abc`), so a Lark print may mean less there than its GBNF source.
    lexes_lark_greedily: bool = False
    # Importing the library imports torch (seconds): `sgcli lint` by default skips such a backend
    # unless no other one supports the file.
    imports_torch: bool = False
    regex_dialect: str = "rust"  # how it reads regexes: "rust" or "ecma"; validation reads them the same way
    # which JSON Schema keywords its grammar enforces, and where (None: none; see keyword_coverage.py)
    schema_keywords: SchemaKeywords | None = None


@dataclass(frozen=True)
class CompileWarning:
    """Something the backend weakened or ignored while compiling (e.g. an unenforced keyword)."""

    message: str
    pointer: str | None = None  # JSON pointer into the schema, where known

    def __str__(self) -> str:
        """As records list it: `pointer: message`, or the message alone."""
        return self.message if not self.pointer else f"{self.pointer}: {self.message}"


def warning_lines(warnings: list[CompileWarning]) -> list[str]:
    """One line a message, naming every place it is about: a warning is one a pointer, and
    `Unknown format: path (2 times)` was shown twice, each time with one of its two places."""
    places: dict[str, list[str]] = {}
    for w in warnings:
        places.setdefault(w.message, [])
        if w.pointer:
            places[w.message].append(w.pointer)
    return [message + _at(pointers) for message, pointers in places.items()]


def _at(pointers: list[str]) -> str:
    if not pointers:
        return ""
    head = ", ".join(pointers[:-1])
    return f" (at {head + ' and ' if head else ''}{pointers[-1]})"


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


@dataclass(frozen=True)
class FirstStep:
    """What a fresh matcher says before any token: its mask, its error, whether it may stop there."""

    mask: bytes  # the bitmask's int32 words (numpy-free: `sgcli lint` does not load numpy)
    error: str | None
    can_stop: bool


@dataclass(eq=False)
class Compiled:
    """A grammar compiled for one vocabulary by one backend.

    Each adapter subclasses it with its own typed handle (xgrammar's CompiledGrammar,
    llguidance's LLMatcher prototype, outlines-core's Index) and makes its matchers.
    """

    backend: str
    spec: ConstraintSpec
    vocab: Vocab
    compile_s: float
    warnings: list[CompileWarning] = field(default_factory=list)
    normalized: str | None = None  # the grammar text the backend actually compiled, where it has one
    _first: FirstStep | None = field(default=None, init=False, repr=False)
    # whether a mask may leave nothing allowed (sgcli's own checks on top of a grammar): decoding then
    # backtracks; a bare backend's masks do not dead-end
    may_dead_end: ClassVar[bool] = False

    def matcher(self) -> Matcher:
        raise NotImplementedError

    def first_step(self) -> FirstStep:
        """A fresh matcher's first mask, filled once. The bounded compile fills it (`bounded.py`), so a
        grammar whose first mask never ends (llguidance on `start: /a+/ "a"` grew to GBs) is a compile
        past its limit, not a hang in whichever command asks next; the commands read it here."""
        if self._first is None:
            matcher = self.matcher()
            mask = self._mask_bytes(matcher)
            self._first = FirstStep(mask, matcher.error, matcher.can_stop())
        return self._first

    def _mask_bytes(self, matcher: Matcher) -> bytes:
        """`matcher`'s next mask as bytes; an adapter whose library gives them without numpy says so."""
        mask = new_bitmask(len(self.vocab))
        matcher.fill_mask(mask)
        return mask.tobytes()

    def serialize(self) -> bytes | None:
        """The grammar as bytes for the on-disk cache; None when it cannot be stored
        (always None unless the backend's capabilities say `cacheable`)."""
        return None

    def size_info(self) -> dict[str, int]:
        """Backend-specific size figures for `sgcli compile`, e.g. {"memory_size_bytes": n}."""
        return {}


class Backend(Protocol):
    name: ClassVar[str]
    description: ClassVar[str]
    capabilities: ClassVar[Capabilities]

    def unavailable_reason(self) -> str | None:
        """Why this backend cannot be used here (e.g. its package is missing), or None when it can."""

    def version(self) -> str: ...

    def compile(self, spec: ConstraintSpec, vocab: Vocab) -> Compiled:
        """Compile or raise a positioned UserError; unsupported kinds never reach here."""

    def deserialize(self, data: bytes, spec: ConstraintSpec, vocab: Vocab) -> Compiled | None:
        """Inverse of `Compiled.serialize` for the same backend version and vocabulary; None when
        `data` is stale or unreadable (the cache then recompiles). Only called when
        `capabilities.cacheable`."""

    def schema_grammar(self, spec: ConstraintSpec) -> tuple[str, list[CompileWarning]]:
        """The grammar text this backend compiles for a JSON Schema spec, and the warnings `compile` would
        give for it (what the text leaves out: `keyword_coverage.warned_gaps`); only where
        `capabilities.prints_schema`."""
        ...

    def forget_compiles(self) -> None:
        """Drop any in-memory cache of compiled grammars the library keeps (a no-op where none), so the
        next compile is a real one: `sgcli bench`'s cold column, where a repeated schema was a hit."""

    def prepare(self, vocab: Vocab) -> None:
        """Build the per-vocabulary state now (a no-op where there is none), so that a bounded
        compile's forked child (`sgcli.backends.bounded`) inherits it instead of building it for nothing."""


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

    def unavailable_reason(self) -> str | None:
        try:
            __import__(self.module)  # the import statement's path (importlib's skips -X importtime)
        except ImportError as exc:
            from sgcli.extras import install_hint

            # the module that failed: xgrammar installed without torch (README's CPU recipe) needs torch
            missing = getattr(exc, "name", None) or self.module
            return f"cannot import {self.module} ({exc}); {install_hint(missing)}"
        return self.too_old()

    def too_old(self) -> str | None:
        """Why the installed library is below sgcli's floor for it (None when it is not)."""
        import importlib.metadata

        from sgcli.extras import too_old

        try:
            return too_old(self.distribution, self.version())
        except importlib.metadata.PackageNotFoundError:  # importable but not installed as a distribution
            return None

    def version(self) -> str:
        """The installed distribution's version, read once (importlib.metadata takes ~0.7 ms, more than
        a small llguidance compile; every compile's cache key asks)."""
        known = getattr(self, "_version", None)
        if known is None:
            import importlib.metadata

            known = self._version = importlib.metadata.version(self.distribution)
        return known

    def per_vocab(self, vocab: Vocab, build):
        entry = self._per_vocab.get(id(vocab))
        if entry is None or entry[0] is not vocab:
            entry = (vocab, build())
            self._per_vocab[id(vocab)] = entry
        return entry[1]

    def deserialize(self, data: bytes, spec: ConstraintSpec, vocab: Vocab) -> Compiled | None:
        return None

    def schema_grammar(self, spec: ConstraintSpec) -> tuple[str, list[CompileWarning]]:
        raise NotImplementedError(f"{self.module} prints no grammar for a JSON Schema (capabilities.prints_schema)")

    def forget_compiles(self) -> None:
        pass

    def prepare(self, vocab: Vocab) -> None:
        pass
