"""Tokenizers embedded in GGUF files: converted once with transformers, then cached.

Like the model conversion, the folder is staged uniquely, published with one rename and checked
against its manifest on every use (`sgcli.cache.conversions`)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from sgcli.cache import conversions
from sgcli.cache.paths import converted_dir
from sgcli.errors import UserError

ProgressFn = Callable[[str], None]


def cached_tokenizer_dir(gguf: Path, progress: ProgressFn | None = None) -> Path:
    """A folder holding tokenizer.json for `gguf`, converting it on first use (~10 s)."""
    out = converted_dir(gguf) / "tokenizer"
    if conversions.usable(out, f"tokenizer of {gguf.name}"):
        return out
    staged = conversions.staging(out)  # exit 2 now if the cache is read-only
    try:
        if progress:
            progress("converting the GGUF tokenizer (once; cached afterwards)")
        from transformers import AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        with conversions.disk_full_is_exit_2(staged, f"converting the tokenizer of {gguf.name}"):
            tok.save_pretrained(str(staged))
            return conversions.publish(staged, out, gguf)
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def load_converted(gguf: Path, load_folder: Callable[[Path], object], progress: ProgressFn | None = None):
    """`load_folder` of the cached tokenizer conversion; one that cannot be read is a cache problem:
    reported, converted again once, and only a fresh conversion that fails blames the .gguf file."""
    for attempt in (1, 2):
        folder = cached_tokenizer_dir(gguf, progress)
        try:
            return load_folder(folder)
        except (UserError, OSError, ValueError, RuntimeError, KeyError) as exc:
            found = exc.message if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
            if attempt == 2:
                raise UserError(
                    f"the tokenizer converted from {gguf} cannot be read even when freshly converted: {found}",
                    hint="the .gguf file itself may be damaged: download it again",
                ) from None
            conversions.discard(folder, f"the cached tokenizer in {folder} cannot be read ({found}): converting again")
