"""One vocabulary type that every backend is fed from.

Backends disagree about how to read a tokenizer (decoded text, byte-level unicode,
`<0x41>` byte-fallback pieces). sgcli resolves that once: a `Vocab` holds the exact
bytes each token id produces, which ids are special, and which ids stop generation.
Adapters build their own tokenizer objects from these bytes and never from
`get_vocab()` keyed by decoded text, where distinct ids collapse.
"""

from __future__ import annotations

import codecs
import functools
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace

BYTE_LEVEL = "byte_level"  # GPT-2 style: bytes mapped to printable unicode
BYTE_FALLBACK = "byte_fallback"  # SentencePiece: '▁' for space, <0xNN> byte pieces
RAW = "raw"  # pieces are the bytes themselves (tiktoken, Tekken)


@dataclass(eq=False)
class Vocab:
    """The bytes of every token id, plus what a grammar matcher must know about ids."""

    tokens: list[bytes]  # index = token id; a special token holds its text's bytes
    special_ids: frozenset[int]
    stop_ids: tuple[int, ...]
    vocab_type: str
    source: str
    eos_id: int | None = None
    bos_id: int | None = None
    add_prefix_space: bool = False
    # Tokenizes text into ids the way the model's tokenizer does, as a continuation: the
    # ids' bytes are exactly the text (no SentencePiece dummy prefix, no special tokens).
    # Needed by llguidance and the dry-run tools; None where only the vocabulary is known.
    encode: Callable[[str], list[int]] | None = field(default=None, repr=False)
    # What a reader of `sgcli tokenizer inspect` should know about how this vocabulary
    # was built (e.g. an EOS guessed from a token's name).
    notes: tuple[str, ...] = ()
    # How many of the last ids `padded` added: a model's logit rows past its tokenizer, never sampled.
    padding: int = 0

    def __post_init__(self) -> None:
        if self.encode is not None and not getattr(self.encode, "spells_text", False):
            self.encode = _spelling_exactly(self, self.encode)

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def size(self) -> int:
        return len(self.tokens)

    def padded(self, size: int) -> Vocab:
        """The same vocabulary widened to a model's logits width (extra ids are special and empty)."""
        if size <= len(self.tokens):
            return self
        extra = range(len(self.tokens), size)
        tokens, special = self.tokens + [b""] * len(extra), self.special_ids | frozenset(extra)
        return replace(self, tokens=tokens, special_ids=special, padding=self.padding + len(extra))

    def piece(self, token_id: int) -> bytes:
        return self.tokens[token_id]

    @functools.cached_property
    def piece_ids(self) -> dict[bytes, int]:
        """Bytes -> the lowest ordinary id with exactly those bytes (built on first use)."""
        by_bytes: dict[bytes, int] = {}
        for i in self.ordinary_ids():
            piece = self.tokens[i]
            if piece and piece not in by_bytes:
                by_bytes[piece] = i
        return by_bytes

    @functools.cached_property
    def _longest_piece(self) -> int:
        return max((len(p) for p in self.piece_ids), default=1)

    def longest_match(self, data: bytes) -> list[int] | None:
        """Greedy left-to-right longest ordinary piece: the tokenization of a vocabulary loaded
        without its encoder, and the segmentation a decoder preferring long tokens tends to
        produce. None if some byte has no token."""
        by_bytes, longest = self.piece_ids, self._longest_piece
        ids, pos = [], 0
        while pos < len(data):
            for length in range(min(longest, len(data) - pos), 0, -1):
                token = by_bytes.get(data[pos : pos + length])
                if token is not None:
                    ids.append(token)
                    pos += length
                    break
            else:
                return None
        return ids

    def ordinary_ids(self) -> list[int]:
        return [i for i in range(len(self.tokens)) if i not in self.special_ids]

    def byte_collisions(self) -> dict[bytes, list[int]]:
        """Ordinary ids sharing identical bytes (each group is one ambiguity for a backend)."""
        groups: dict[bytes, list[int]] = defaultdict(list)
        for i in self.ordinary_ids():
            groups[self.tokens[i]].append(i)
        return {b: ids for b, ids in groups.items() if len(ids) > 1}

    def text_collisions(self) -> dict[str, list[int]]:
        """Ids sharing one decoded text: what a vocabulary keyed by `get_vocab()`-style text loses.

        Pieces that are not valid UTF-8 on their own (partial characters) all decode
        to replacement characters, so distinct byte pieces collapse here.
        """
        groups: dict[str, list[int]] = defaultdict(list)
        for i, piece in enumerate(self.tokens):
            groups[piece.decode("utf-8", errors="replace")].append(i)
        return {t: ids for t, ids in groups.items() if len(ids) > 1}

    def reachable_bytes(self) -> set[int]:
        """Byte values that some single-byte ordinary token produces."""
        return {self.tokens[i][0] for i in self.ordinary_ids() if len(self.tokens[i]) == 1}


class IncrementalDetokenizer:
    """Turns a token stream into text without ever splitting a UTF-8 character.

    Bytes of a character cut across tokens are held back until the character is
    whole, so a stream never shows a replacement character for valid UTF-8.
    """

    def __init__(self, vocab: Vocab):
        self._vocab = vocab
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, token_id: int) -> str:
        if token_id in self._vocab.special_ids or token_id >= len(self._vocab.tokens):
            return ""
        return self._decoder.decode(self._vocab.tokens[token_id])

    def flush(self) -> str:
        return self._decoder.decode(b"", final=True)

    def state(self) -> tuple:
        """The bytes of an unfinished character it holds, for `restore` (undoing tokens fed since)."""
        return self._decoder.getstate()

    def restore(self, state: tuple) -> None:
        self._decoder.setstate(state)


def text_encoder(tok, special_ids: frozenset[int], lock: threading.Lock) -> Callable[[str], list[int]]:
    """`tok.encode` (a `tokenizers.Tokenizer`) of text as text: where it reads a special token's spelling
    (`<start_of_turn>` written in the text) as that token, the text is encoded again with the library's
    `encode_special_tokens` on, the tokenizer's own spelling of those characters (transformers'
    `split_special_tokens`). Longest-match had spelled all of such a text in byte-fallback pieces. The
    flag is the object's: `lock` guards it from every other use of `tok` (the prompt encoder may share it)."""

    def encode(text: str) -> list[int]:
        with lock:
            ids = tok.encode(text, add_special_tokens=False).ids
            if not any(i in special_ids for i in ids):
                return ids
            tok.encode_special_tokens = True
            try:
                return tok.encode(text, add_special_tokens=False).ids
            finally:
                tok.encode_special_tokens = False

    return encode


def _spelling_exactly(vocab: Vocab, encode: Callable[[str], list[int]]) -> Callable[[str], list[int]]:
    """`encode`, where its ids spell the text's own bytes with ordinary tokens; else the longest-match
    tokenization that does (where every byte has a token). A tokenizer turns `<|im_end|>` written as
    text into the special id, and a normalizer writes `ﬁ` as `fi` or SentencePiece's `▁` as a space:
    llguidance, handed those ids for text its grammar forces, put them in the mask and then refused
    them ("Parser Error: token ... doesn't satisfy the grammar")."""

    def exact(text: str) -> list[int]:
        ids = encode(text)
        data = text.encode("utf-8")
        tokens, special = vocab.tokens, vocab.special_ids
        if not any(i in special for i in ids) and b"".join(tokens[i] for i in ids) == data:
            return ids
        spelled = vocab.longest_match(data)
        return ids if spelled is None else spelled

    exact.spells_text = True  # type: ignore[attr-defined]
    return exact
