"""A GGUF file's metadata (key -> value), read with the standard library alone.

Enough to build the file's tokenizer without transformers or the `gguf` package: the header and
the key-value section are parsed from a memory map, tensor data is never touched (a 100 MB model
reads in milliseconds). Layout (GGUF v2 and v3, little-endian): magic `GGUF`, u32 version, u64
tensor count, u64 key count, then per key a string, a u32 value type and the value; strings are
a u64 length and UTF-8 bytes, arrays a u32 element type, a u64 count and the elements.
"""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

MAGIC = b"GGUF"
VERSIONS = (2, 3)  # v1 counted in 32 bits; llama.cpp has not written it since 2023
_STRING, _ARRAY = 8, 9
# value type -> struct format of the fixed-size scalars: u8 i8 u16 i16 u32 i32 f32 bool u64 i64 f64
_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


class GGUFError(ValueError):
    """The file is not a GGUF file this reader understands (a ValueError: `load_tokenizer` names the file)."""


def read_metadata(path: Path) -> dict[str, object]:
    """Every metadata key of the GGUF file at `path`: scalars as Python numbers and bools, strings as
    str, arrays as lists."""
    with Path(path).open("rb") as f:
        try:
            blob = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file cannot be mapped
            raise GGUFError(f"{path} is empty, not a GGUF file") from None
        with blob:
            return _Reader(blob, path).metadata()


class _Reader:
    def __init__(self, blob: mmap.mmap, path: Path):
        self.blob, self.path, self.pos = blob, path, 0

    def metadata(self) -> dict[str, object]:
        if self.blob[:4] != MAGIC:
            raise GGUFError(f"{self.path} does not start with the GGUF magic bytes")
        self.pos = len(MAGIC)
        (version,) = self._unpack("<I")
        if version not in VERSIONS:
            raise GGUFError(f"{self.path} is GGUF version {version}; sgcli reads versions 2 and 3")
        _tensors, count = self._unpack("<QQ")
        out: dict[str, object] = {}
        for _ in range(count):
            key = self._string()
            (kind,) = self._unpack("<I")
            out[key] = self._value(kind)
        return out

    def _unpack(self, fmt: str) -> tuple:
        try:
            values = struct.unpack_from(fmt, self.blob, self.pos)
        except struct.error:
            raise GGUFError(f"{self.path} ends inside its metadata (truncated file?)") from None
        self.pos += struct.calcsize(fmt)
        return values

    def _string(self) -> str:
        (length,) = self._unpack("<Q")
        end = self.pos + length
        if end > len(self.blob):
            raise GGUFError(f"{self.path} ends inside its metadata (truncated file?)")
        raw, self.pos = self.blob[self.pos : end], end
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise GGUFError(f"{self.path}: a metadata string is not UTF-8 ({exc})") from None

    def _value(self, kind: int):
        if kind in _SCALAR:
            return self._unpack("<" + _SCALAR[kind])[0]
        if kind == _STRING:
            return self._string()
        if kind == _ARRAY:
            element, count = self._unpack("<IQ")
            if element in _SCALAR:
                return list(self._unpack(f"<{count}{_SCALAR[element]}"))
            if element == _STRING:
                return [self._string() for _ in range(count)]
            if element == _ARRAY:
                return [self._value(_ARRAY) for _ in range(count)]
        raise GGUFError(f"{self.path}: metadata value of unknown type {kind}")
