"""Tokenizers embedded in GGUF files: converted once with transformers, then cached."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sgcli.cache.paths import converted_dir

ProgressFn = Callable[[str], None]


def cached_tokenizer_dir(gguf: Path, progress: ProgressFn | None = None) -> Path:
    """A folder holding tokenizer.json for `gguf`, converting it on first use (~10 s)."""
    out = converted_dir(gguf) / "tokenizer"
    if (out / "tokenizer.json").is_file():
        return out
    if progress:
        progress("converting the GGUF tokenizer (once; cached afterwards)")
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tmp = out.with_name("tokenizer.partial")
    tmp.mkdir(parents=True, exist_ok=True)
    tok.save_pretrained(str(tmp))
    tmp.replace(out)  # atomic: a half-written cache is never read
    return out
