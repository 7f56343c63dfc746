"""Tokenizers embedded in GGUF files: converted once into a tokenizer folder, then cached.

transformers converts them where it is installed; the light core (no transformers) builds the
same folder from the file's metadata with the `tokenizers` library (`gguf_light`). Like the model
conversion, the folder is staged uniquely, published with one rename and checked
against its manifest on every use (`sgcli.cache.conversions`)."""

from __future__ import annotations

import importlib.util
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from sgcli.cache import conversions
from sgcli.cache.paths import converted_dir
from sgcli.errors import UserError

ProgressFn = Callable[[str], None]
# Raise when a converter writes a different folder: earlier caches are then left unread. 2: the file's
# end-of-generation tokens in generation_config.json. 3: its named templates in additional_chat_templates/.
FOLDER_FORMAT = 3
# Control tokens that end a turn in the chat templates of the families llama.cpp knows (its EOG set
# beyond eos/eot/eom): a .gguf carries no generation_config.json to list them.
END_OF_TURN_TEXTS = frozenset(
    {
        "<|eot_id|>",
        "<|im_end|>",
        "<|end|>",
        "<end_of_turn>",
        "<|endoftext|>",
        "<|eom_id|>",
        "<EOT>",
        "<|return|>",
        "<|call|>",
    }
)
_CONTROL = 3  # tokenizer.ggml.token_type of a control token


class _ArchitectureUnknown(Exception):
    """transformers' converter refuses the file's architecture (mpt, gpt-neox, command-r, baichuan...)."""


def cached_tokenizer_dir(gguf: Path, progress: ProgressFn | None = None) -> Path:
    """A folder holding tokenizer.json for `gguf`, converting it on first use (~10 s with transformers,
    under a second without). The cache folder is keyed by the transformers version ("none" without it,
    `converted_dir`) and the light converter's folder by its format, so a folder is only ever read by
    the converter that wrote it. An architecture transformers does not convert goes to the light
    converter, which reads the vocabulary from the metadata whatever the model (found by a tour: the
    light install read five llama.cpp vocabularies the full one refused)."""
    if _transformers_converts() and not conversions.usable(_folder(gguf, light=True), f"tokenizer of {gguf.name}"):
        # (a light folder under transformers' key: it refused this file before, and would again, slowly)
        try:
            return _cached_dir(gguf, progress, light=False)
        except _ArchitectureUnknown as exc:
            refused = str(exc)
        from sgcli.extras import MissingExtra

        try:
            return _cached_dir(gguf, progress, light=True)
        except MissingExtra as exc:
            raise UserError(
                f"cannot read the tokenizer of {gguf.name}: transformers' converter says {refused!r}, and "
                f"sgcli's own cannot rebuild it either ({exc.message})",
                hint="pass the model's tokenizer.json (--tokenizer FILE), or a folder holding one",
            ) from None
    return _cached_dir(gguf, progress, light=True)


def _folder(gguf: Path, light: bool) -> Path:
    return converted_dir(gguf) / (f"tokenizer-light{FOLDER_FORMAT}" if light else f"tokenizer{FOLDER_FORMAT}")


def _cached_dir(gguf: Path, progress: ProgressFn | None, light: bool) -> Path:
    out = _folder(gguf, light)
    if conversions.usable(out, f"tokenizer of {gguf.name}"):
        return out
    # before converting: transformers' own reader fails on a truncated file with a bare struct.error, and
    # on a special id beyond the vocabulary with an IndexError
    check_special_ids(gguf, read_gguf_metadata(gguf))
    staged = conversions.staging(out)  # exit 2 now if the cache is read-only
    try:
        if progress:
            progress("converting the GGUF tokenizer (once; cached afterwards)")
        with conversions.disk_full_is_exit_2(staged, f"converting the tokenizer of {gguf.name}"):
            if light:
                convert_light(gguf, staged)
            else:
                _convert_with_transformers(gguf, staged)
            return conversions.publish(staged, out, gguf)
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def _transformers_converts() -> bool:
    """Whether transformers' GGUF converter can run: it needs torch and the gguf package beside it (a
    venv with transformers alone, as xgrammar's requirements bring it, gets the light converter)."""
    return not _missing_for_transformers()


def _missing_for_transformers() -> list[str]:
    return [m for m in ("transformers", "torch", "gguf") if importlib.util.find_spec(m) is None]


def _convert_with_transformers(gguf: Path, folder: Path) -> None:
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    try:
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    except ValueError as exc:
        if "is not supported yet" in str(exc):  # "GGUF model with architecture mpt is not supported yet."
            raise _ArchitectureUnknown(str(exc)) from None
        if "GGMLQuantizationType" not in str(exc):
            raise
        # gguf-py reads every tensor's header: a type it does not know fails the tokenizer too
        raise UserError(
            f"{gguf} holds a tensor of a type the installed gguf package cannot read ({exc})",
            hint="upgrade gguf (pip install -U gguf), or use a .gguf converted with a current llama.cpp",
        ) from None
    tok.save_pretrained(str(folder))
    metadata = read_gguf_metadata(gguf)
    write_end_ids(metadata, folder)
    write_named_templates(gguf, metadata, folder)


def convert_light(gguf: Path, folder: Path) -> None:
    """The tokenizer folder of `gguf` without transformers; a tokenizer only transformers rebuilds is exit 2
    naming the extra that brings it."""
    from sgcli.extras import MissingExtra
    from sgcli.tokenizers.gguf_light import Unsupported, write_folder

    try:
        metadata = read_gguf_metadata(gguf)
        write_folder(metadata, folder)
        write_end_ids(metadata, folder)
        write_named_templates(gguf, metadata, folder)
    except Unsupported as exc:
        missing = (_missing_for_transformers() or ["transformers"])[0]
        raise MissingExtra(missing, "generate", f"the tokenizer of {gguf.name} ({exc})") from None


# the special ids both converters look up in tokenizer.ggml.tokens
SPECIAL_ID_KEYS = tuple(f"tokenizer.ggml.{k}_token_id" for k in ("bos", "eos", "unknown", "padding"))


def check_special_ids(gguf: Path, metadata: dict) -> None:
    """A bos/eos/unk/pad id that is not a token of the file is exit 2 naming the file and key: transformers'
    converter failed on it with a bare IndexError (exit 3), after seconds of work."""
    tokens = metadata.get("tokenizer.ggml.tokens")
    size = len(tokens) if isinstance(tokens, list) else 0
    for key in SPECIAL_ID_KEYS:
        value = metadata.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < size:
            what = f"{value!r}, not a token id" if not isinstance(value, int) or isinstance(value, bool) else value
            raise UserError(
                f"{gguf}: metadata key {key} is {what}: its vocabulary (tokenizer.ggml.tokens) has ids 0 to "
                f"{size - 1:,}",
                hint=f"set {key} to the id of the right token (gguf-py's gguf_set_metadata.py), or pass the "
                "model's tokenizer.json (--tokenizer FILE)",
            )


def end_ids(metadata: dict) -> list[int]:
    """The ids that end generation: eos, the file's eot and eom tokens, and its control tokens that end a
    turn (`END_OF_TURN_TEXTS`). A Qwen2.5 .gguf names `<|im_end|>` its eos; its base text ends with
    `<|endoftext|>`, and a Llama 3 file may name `<|end_of_text|>` while its chat turns end `<|eot_id|>`."""
    found = [metadata.get(f"tokenizer.ggml.{k}_token_id") for k in ("eos", "eot", "eom")]
    tokens, types = metadata.get("tokenizer.ggml.tokens"), metadata.get("tokenizer.ggml.token_type")
    if isinstance(tokens, list) and isinstance(types, list) and len(types) == len(tokens):
        ends = END_OF_TURN_TEXTS
        if {"<|return|>", "<|call|>"} <= set(tokens):  # harmony (gpt-oss): `<|end|>` only closes one channel
            ends = ends - {"<|end|>"}
        found += [i for i, (t, kind) in enumerate(zip(tokens, types)) if kind == _CONTROL and t in ends]
    size = len(tokens) if isinstance(tokens, list) else 0
    return [i for i in dict.fromkeys(found) if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < size]


def write_end_ids(metadata: dict, folder: Path) -> None:
    """generation_config.json's `eos_token_id` list, which the tokenizer folder's reader takes as stop ids."""
    import json

    ids = end_ids(metadata)
    if ids:
        (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": ids}) + "\n", encoding="utf-8")


TEMPLATE_KEY = "tokenizer.chat_template"
_TEMPLATE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")


def template_key(name: str) -> str:
    """The metadata key a GGUF keeps the chat template `name` under (llama.cpp's converter's)."""
    return TEMPLATE_KEY if name == "default" else f"{TEMPLATE_KEY}.{name}"


def write_named_templates(gguf: Path, metadata: dict, folder: Path) -> None:
    """llama.cpp's named templates (`tokenizer.chat_template.tool_use`, ...) as the folder form keeps them,
    `additional_chat_templates/NAME.jinja`: neither converter read them, so `--template-name tool_use` was
    refused and a file with named templates only was said to have no chat template."""
    named = {k.removeprefix(f"{TEMPLATE_KEY}."): v for k, v in metadata.items() if k.startswith(f"{TEMPLATE_KEY}.")}
    for name, text in named.items():
        if not _TEMPLATE_NAME.fullmatch(name) or name == "default" or not isinstance(text, str):
            what = "a string" if isinstance(text, str) else type(text).__name__
            raise UserError(
                f"{gguf}: metadata key {TEMPLATE_KEY}.{name[:80]} holds {what}, not a named chat template sgcli "
                "reads (a name of letters, digits, '_', '.', '-', and the template's text)",
                hint="rename or remove that key, or pass the model's tokenizer folder (--tokenizer DIR)",
            )
        extra = folder / "additional_chat_templates"
        extra.mkdir(exist_ok=True)
        (extra / f"{name}.jinja").write_text(text, encoding="utf-8")


def read_gguf_metadata(gguf: Path) -> dict[str, object]:
    """The metadata of `gguf` by sgcli's own reader; a file it cannot read is exit 2 naming the file."""
    from sgcli.tokenizers.gguf_meta import GGUFError, read_metadata

    try:
        return read_metadata(gguf)
    except GGUFError as exc:
        reason = str(exc).removeprefix(f"{gguf}").removeprefix(":").strip()
        raise UserError(
            f"{gguf} is truncated or not a GGUF file: {reason}",
            hint="download the .gguf again, or pass another tokenizer",
        ) from None


def _named_by_the_file(tokenizer, gguf: Path):
    """`tokenizer` whose template errors name the .gguf (and its key, `sgcli.tokenizers.templates`), not the
    cache copy: "fix the template in <cache>/chat_template.jinja" sent the user to edit the cache."""
    files = getattr(tokenizer, "template_files", None)
    if isinstance(files, dict):
        tokenizer.template_files = dict.fromkeys(files, gguf)
    return tokenizer


def load_converted(gguf: Path, load_folder: Callable[[Path], object], progress: ProgressFn | None = None):
    """`load_folder` of the cached tokenizer conversion; one that cannot be read is a cache problem:
    reported, converted again once, and only a fresh conversion that fails blames the .gguf file."""
    for attempt in (1, 2):
        folder = cached_tokenizer_dir(gguf, progress)
        try:
            return _named_by_the_file(load_folder(folder), gguf)
        except (UserError, OSError, ValueError, RuntimeError, KeyError) as exc:
            found = exc.message if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
            if attempt == 2:
                raise UserError(
                    f"the tokenizer converted from {gguf} cannot be read even when freshly converted: {found}",
                    hint="the .gguf file itself may be damaged: download it again",
                ) from None
            conversions.discard(folder, f"the cached tokenizer in {folder} cannot be read ({found}): converting again")
