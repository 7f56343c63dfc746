"""Decoding tokenizer pieces into bytes, by vocabulary type rather than by model name."""

from __future__ import annotations

import re
from functools import lru_cache

_BYTE_PIECE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


@lru_cache(maxsize=1)
def byte_level_decoder() -> dict[str, int]:
    """Inverse of GPT-2's bytes_to_unicode: printable stand-in char -> byte value."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    mapping = {b: chr(b) for b in printable}
    shifted = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + shifted)
            shifted += 1
    return {ch: b for b, ch in mapping.items()}


@lru_cache(maxsize=1)
def _byte_level_table() -> dict[int, str]:
    """str.translate table: each stand-in char -> the latin-1 char of its byte; every other char up to
    U+00FF -> U+FFFF, so that a piece with a char outside the alphabet fails to encode as latin-1."""
    table = {code: "\uffff" for code in range(256)}
    table |= {ord(ch): chr(b) for ch, b in byte_level_decoder().items()}
    return table


def byte_level_piece(piece: str) -> bytes | None:
    """Bytes of a byte-level BPE piece; None if the piece uses chars outside the alphabet.
    (One str.translate in C: a 50k vocabulary decodes in milliseconds, not a Python loop per char.)"""
    try:
        return piece.translate(_byte_level_table()).encode("latin-1")
    except UnicodeEncodeError:
        return None


def byte_fallback_piece(piece: str) -> bytes:
    """Bytes of a SentencePiece piece: `<0x41>` is one raw byte, '▁' is a space."""
    m = _BYTE_PIECE.match(piece)
    if m:
        return bytes([int(m.group(1), 16)])
    return piece.replace("\u2581", " ").encode("utf-8")
