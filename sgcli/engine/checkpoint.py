"""A model folder's safetensors files, found and checked before anything loads (standard library only).

A shard index naming a file that is not there, or a file cut short or with a garbled header, made
the loaders fail deep inside (FileNotFoundError, KeyError, SafetensorError: exit 3). Reading each
file's header and size is cheap, so `check_weights` says which file is wrong, and what to do, first.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from sgcli.errors import UserError

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
_MAX_HEADER = 100_000_000  # the safetensors library's own limit on a header's size


def weight_files(folder: Path) -> list[Path]:
    """The safetensors files of a Hugging Face folder (one file, or the shards its index names); exit 2
    where the index cannot be read or has no weight_map of file names."""
    index = folder / INDEX
    if index.is_file():
        return [folder / name for name in _shard_names(index)]
    single = folder / SINGLE
    return [single] if single.is_file() else []


def _shard_names(index: Path) -> list[str]:
    hint = f"re-download {INDEX} (or remove it where the folder holds one {SINGLE})"
    try:
        data = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read the shard index {index}: {exc}", hint=hint) from None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise UserError(f"the shard index {index} has no weight_map of tensor names to files", hint=hint)
    return sorted(set(weight_map.values()))


def check_weights(folder: Path) -> None:
    """Every safetensors file `folder` names is there and whole (its header readable, its data as long as
    the header says), or exit 2 naming the file."""
    index = folder / INDEX
    for file in weight_files(folder):
        if not file.is_file():
            raise UserError(
                f"{index} names the shard {file.name}, which is not in {folder}",
                hint="download the missing shard (or the whole model) again",
            )
        problem = safetensors_problem(file)
        if problem is not None:
            raise damaged(file, problem)


def damaged(file: Path, problem: str) -> UserError:
    return UserError(f"{file} is damaged ({problem}): re-download it")


def safetensors_problem(file: Path) -> str | None:
    """What is wrong with `file` as a safetensors file (an 8-byte header length, a JSON header, then the
    tensors' bytes), or None."""
    try:
        size = file.stat().st_size
        with file.open("rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return f"{size} bytes, shorter than a header"
            (length,) = struct.unpack("<Q", head)
            if length > min(size - 8, _MAX_HEADER):
                return f"its header claims {length} bytes; the file has {size}"
            header = json.loads(f.read(length).decode("utf-8"))
    except OSError as exc:
        return f"cannot read it: {exc.strerror or exc}"
    except (UnicodeDecodeError, ValueError):
        return "its header is not JSON"
    if not isinstance(header, dict):
        return "its header is not a JSON object"
    ends = [
        entry["data_offsets"][1]
        for name, entry in header.items()
        if name != "__metadata__" and isinstance(entry, dict) and _offsets(entry.get("data_offsets"))
    ]
    if len(ends) != len(header) - ("__metadata__" in header):
        return "its header has a tensor without data offsets"
    needed = max(ends, default=0)
    if size - 8 - length < needed:
        return f"cut short: {size} bytes where its header needs {8 + length + needed}"
    return None


def _offsets(value) -> bool:
    return (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
        and value[0] <= value[1]
    )
