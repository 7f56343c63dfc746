"""A model's files checked before anything loads (standard library only): its safetensors files, its
config.json, and its embedding table against the tokenizer's text.

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


def text_tokens(vocab) -> int:
    """How many embedding rows the tokenizer's text needs: one past its highest id that is not a special
    token. Special tokens may lie past the table: Gemma 3's tokenizer adds `<image_soft_token>` as id
    262144 to text models of 262,144 rows. The grammar is compiled on the model's rows, so they are
    never generated."""
    special = vocab.special_ids
    return next((i + 1 for i in range(len(vocab.tokens) - 1, -1, -1) if i not in special), 0)


def check_tokenizer_fits(ref, tokens: int) -> None:
    """Before the weights load: a model folder's config.json declaring fewer embedding rows than the
    tokenizer's text needs (`text_tokens`) is exit 2 (ids past the table would fail inside the forward
    pass). Cheap; a hub id or .gguf is checked once loaded (`check_logits_fit`)."""
    if ref.kind != "dir" or not (ref.path / "config.json").is_file():
        return
    config = read_config(ref.path / "config.json")
    text = config.get("text_config")
    rows = config.get("vocab_size") or (text.get("vocab_size") if isinstance(text, dict) else None)
    if isinstance(rows, int) and not isinstance(rows, bool) and 0 < rows < tokens:
        raise _tokenizer_too_big(f"{ref.path / 'config.json'} declares vocab_size {rows}", tokens)


def check_logits_fit(lm, tokens: int) -> None:
    """The loaded model's logits width against the tokenizer's size: fewer logits is exit 2."""
    if lm.logits_width < tokens:
        raise _tokenizer_too_big(f"the model {lm.ref.display} has {lm.logits_width} logits", tokens)


def _tokenizer_too_big(model_side: str, tokens: int) -> UserError:
    # Ids past the model's embedding table have no embedding and no logit: a tokenizer of another model.
    return UserError(
        f"{model_side}, fewer than the {tokens} tokens its tokenizer writes text with: it is another model's tokenizer",
        hint="use the tokenizer files the model was trained with (or fix config.json's vocab_size)",
    )


def read_config(path: Path) -> dict:
    """A model folder's config.json as a dict, or exit 2 naming it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(
            f"cannot read the model config {path}: {exc}", hint="the folder needs a valid config.json"
        ) from None
    if not isinstance(data, dict):
        raise UserError(f"the model config {path} is not a JSON object", hint="the folder needs a valid config.json")
    return data
