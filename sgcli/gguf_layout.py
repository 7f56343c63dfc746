"""The GGUF file layout, in one place, low in the layers: the metadata reader
(`sgcli.tokenizers.gguf_meta`) decodes it, and the cache (`sgcli.cache.paths`) walks it to key a
conversion by every byte of its metadata without decoding it.

GGUF v2 and v3, little-endian: magic `GGUF`, u32 version, u64 tensor count, u64 key count, then per
key a string, a u32 value type and the value; strings are a u64 length and UTF-8 bytes, arrays a u32
element type, a u64 count and the elements. Then per tensor: its name, a u32 dimension count, u64
dimensions (innermost first), a u32 ggml type and a u64 offset into the data section, which starts at
the next multiple of `general.alignment` (32).
"""

from __future__ import annotations

import struct

MAGIC = b"GGUF"
VERSIONS = (2, 3)  # v1 counted in 32 bits; llama.cpp has not written it since 2023
STRING, ARRAY = 8, 9
# value type -> struct format of the fixed-size scalars: u8 i8 u16 i16 u32 i32 f32 bool u64 i64 f64
SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_SIZE = {kind: struct.calcsize("<" + fmt) for kind, fmt in SCALAR.items()}
_U64 = struct.Struct("<Q")


def header_end(blob) -> int | None:
    """Where a GGUF's tensor directory ends (its tensor data starts after padding): the bytes before it
    are every piece of metadata, walked, not decoded (a 150k vocabulary in ~0.1 s). None when `blob`
    is not a GGUF this walk can follow (the metadata reader then says what is wrong)."""
    if blob[:4] != MAGIC:
        return None
    size = len(blob)

    def string(pos: int) -> int:
        end = pos + 8 + _U64.unpack_from(blob, pos)[0]
        if end > size:
            raise struct.error("truncated")
        return end

    def value(kind: int, pos: int) -> int:
        if kind in _SIZE:
            return pos + _SIZE[kind]
        if kind == STRING:
            return string(pos)
        if kind != ARRAY:
            raise struct.error("unknown type")
        element, count = struct.unpack_from("<IQ", blob, pos)
        pos += 12
        if element in _SIZE:
            return pos + count * _SIZE[element]
        for _ in range(count):  # a vocabulary: the hot loop
            pos = string(pos) if element == STRING else value(element, pos)
        return pos

    try:
        tensors, keys = struct.unpack_from("<QQ", blob, 8)
        pos = 24
        for _ in range(keys):
            pos = string(pos)
            pos = value(struct.unpack_from("<I", blob, pos)[0], pos + 4)
        for _ in range(tensors):
            pos = string(pos)
            pos += 4 + 8 * struct.unpack_from("<I", blob, pos)[0] + 4 + 8
    except (struct.error, RecursionError):
        return None
    return pos if pos <= size else None
