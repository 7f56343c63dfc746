"""Where sgcli keeps what is expensive to recompute (converted models, compiled grammars)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def cache_root() -> Path:
    """$SGCLI_CACHE_DIR, else $XDG_CACHE_HOME/sgcli, else ~/.cache/sgcli."""
    if os.environ.get("SGCLI_CACHE_DIR"):
        return Path(os.environ["SGCLI_CACHE_DIR"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "sgcli"
    return Path.home() / ".cache" / "sgcli"


def file_identity(path: Path) -> str:
    """A short key that changes when the file at `path` is replaced or modified."""
    st = path.stat()
    raw = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def converted_dir(source: Path) -> Path:
    """Cache folder for a GGUF file converted to safetensors + tokenizer.json."""
    return cache_root() / "models" / f"{source.stem}-{file_identity(source)}"
