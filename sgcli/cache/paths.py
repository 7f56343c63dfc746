"""Where sgcli keeps what is expensive to recompute (converted models, compiled grammars), and the
two things every cache writer shares: atomic writes and notices about cache trouble."""

from __future__ import annotations

import hashlib
import os
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

_notifier: Callable[[str], None] | None = None


def cache_root() -> Path:
    """$SGCLI_CACHE_DIR, else $XDG_CACHE_HOME/sgcli, else ~/.cache/sgcli."""
    if os.environ.get("SGCLI_CACHE_DIR"):
        return Path(os.environ["SGCLI_CACHE_DIR"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]).expanduser() / "sgcli"
    return Path.home() / ".cache" / "sgcli"


def set_notifier(fn: Callable[[str], None] | None) -> None:
    """Where cache notices go (the CLI prints them on stderr); without one, Python warnings."""
    global _notifier
    _notifier = fn


def notify(message: str) -> None:
    """Report cache trouble that sgcli repaired or worked around: never silent, never fatal."""
    if _notifier is not None:
        _notifier(message)
    else:
        warnings.warn(message, stacklevel=2)


def atomic_write(path: Path, data: bytes) -> None:
    """Write `data` to a unique temporary file beside `path`, then rename it into place:
    readers see the old file or the new one, never a mix, whatever other writers do."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def file_identity(path: Path) -> str:
    """A short key that changes when the file at `path` is replaced or modified."""
    st = path.stat()
    raw = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def converted_dir(source: Path) -> Path:
    """Cache folder for a GGUF file converted to safetensors + tokenizer.json."""
    return cache_root() / "models" / f"{source.stem}-{file_identity(source)}"
