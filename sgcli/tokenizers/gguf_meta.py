"""A GGUF file's metadata (key -> value) and tensor directory, read with the standard library alone.

Enough to build the file's tokenizer without transformers or the `gguf` package, and to find each
tensor's bytes for `sgcli.engine.gguf_recipe`: the header, the key-value section and the tensor
infos are parsed from a memory map, tensor data is never touched (a 100 MB model reads in
milliseconds). The layout: `sgcli.gguf_layout`.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

from sgcli.gguf_layout import ARRAY as _ARRAY
from sgcli.gguf_layout import MAGIC, VERSIONS
from sgcli.gguf_layout import SCALAR as _SCALAR
from sgcli.gguf_layout import STRING as _STRING


class GGUFError(ValueError):
    """The file is not a GGUF file this reader understands (a ValueError: `load_tokenizer` names the file)."""


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of the directory. `shape` is outermost first (numpy's and torch's order, the reverse
    of the file's); `offset` counts from the start of the file."""

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int


def read_metadata(path: Path) -> dict[str, object]:
    """Every metadata key of the GGUF file at `path`: scalars as Python numbers and bools, strings as
    str, arrays as lists."""
    return _read(path, tensors=False)[0]


def read_tensor_index(path: Path) -> list[TensorInfo]:
    """The file's tensor directory, in file order (names, shapes, ggml types, absolute offsets)."""
    return _read(path, tensors=True)[1]


def _read(path: Path, *, tensors: bool) -> tuple[dict[str, object], list[TensorInfo]]:
    with Path(path).open("rb") as f:
        try:
            blob = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except ValueError:  # an empty file cannot be mapped
            raise GGUFError(f"{path} is empty, not a GGUF file") from None
        with blob:
            reader = _Reader(blob, path)
            metadata = reader.metadata()
            return metadata, reader.tensors(metadata) if tensors else []


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
        self.count, count = self._unpack("<QQ")
        out: dict[str, object] = {}
        for _ in range(count):
            key = self._string()
            (kind,) = self._unpack("<I")
            out[key] = self._value(kind)
        return out

    def tensors(self, metadata: dict[str, object]) -> list[TensorInfo]:
        """The tensor infos after the metadata (call `metadata()` first)."""
        found = []
        for _ in range(self.count):
            name = self._string()
            (dims,) = self._unpack("<I")
            shape = tuple(reversed(self._unpack(f"<{dims}Q")))
            kind, offset = self._unpack("<IQ")
            found.append((name, shape, kind, offset))
        alignment = metadata.get("general.alignment", 32)
        if not isinstance(alignment, int) or alignment <= 0:
            raise GGUFError(f"{self.path}: general.alignment is {alignment!r}, not a positive number")
        start = -(-self.pos // alignment) * alignment
        return [TensorInfo(name, shape, kind, start + offset) for name, shape, kind, offset in found]

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
