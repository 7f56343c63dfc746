"""Where sgcli keeps what is expensive to recompute (converted models, compiled grammars), and the
two things every cache writer shares: atomic writes and notices about cache trouble."""

from __future__ import annotations

import functools
import hashlib
import mmap
import os
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

from sgcli.gguf_layout import header_end
from sgcli.regular_files import read_regular

_notifier: Callable[[str], None] | None = None


SECTIONS = ("checks", "compiled", "kernels", "models")  # the folders sgcli keeps under cache_root()


def cache_root() -> Path:
    """$SGCLI_CACHE_DIR, else $XDG_CACHE_HOME/sgcli, else ~/.cache/sgcli (read on every call, so a
    changed environment counts; the Path is built once per setting: every compile asks, twice)."""
    env = os.environ
    return _root(env.get("SGCLI_CACHE_DIR"), env.get("XDG_CACHE_HOME"), env.get("HOME"))


@functools.lru_cache(maxsize=16)
def _root(sgcli_dir: str | None, xdg_dir: str | None, home: str | None) -> Path:
    if sgcli_dir:
        return Path(sgcli_dir).expanduser()
    if xdg_dir:
        return Path(xdg_dir).expanduser() / "sgcli"
    return Path.home() / ".cache" / "sgcli"


# The Cache Directory Tagging Specification's tag (bford.info/cachedir): written into each section sgcli
# creates, so that `cache clear` removes only folders sgcli made (a `cache-dir = "."` had it delete a
# project's `.git` and `src`), and backup tools skip what is rebuilt on use
TAG_NAME = "CACHEDIR.TAG"
TAG = b"Signature: 8a477f597d28d172789f06886806bc55\n# sgcli's cache: rebuilt on use (sgcli cache clear)\n"


def cache_folder(path: Path) -> None:
    """`mkdir -p` for a folder under the cache root; the section folder it creates gets the tag."""
    root = cache_root()
    try:
        section = root / path.relative_to(root).parts[0]
    except (ValueError, IndexError):
        section = None
    fresh = section is not None and not os.path.lexists(section)
    path.mkdir(parents=True, exist_ok=True)
    if fresh:
        try:
            atomic_write(section / TAG_NAME, TAG)
        except OSError:
            pass  # an untagged section is only one `cache clear` leaves alone


def tagged(section: Path) -> bool:
    """Whether sgcli created this section folder (its tag is there, with the specification's signature)."""
    try:
        return read_regular(section / TAG_NAME, limit=4096).startswith(TAG[:43])
    except OSError:
        return False


def default_root() -> Path:
    """The cache root when SGCLI_CACHE_DIR (or `cache-dir`) says nothing: a folder named for sgcli."""
    return _root(None, os.environ.get("XDG_CACHE_HOME"), os.environ.get("HOME"))


def set_notifier(fn: Callable[[str], None] | None) -> Callable[[str], None] | None:
    """Where cache notices go (the CLI prints them on stderr); without one, Python warnings.
    Returns the previous one, to put back."""
    global _notifier
    previous, _notifier = _notifier, fn
    return previous


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


_SAMPLE = 64 << 10  # bytes per sampled chunk
_SAMPLES = 16  # chunks spread over the file, besides its first and last MiB
_identities: dict[tuple[str, int, int], str] = {}


def sampled_digest(path: Path) -> str:
    """sha256 of the file's size, first and last MiB and `_SAMPLES` chunks between: a content
    fingerprint that reads ~3 MB whatever the file's size."""
    size = path.stat().st_size
    head = 1 << 20
    chunks = [(0, head), (max(0, size - head), head)]
    chunks += [(size * i // (_SAMPLES + 1), _SAMPLE) for i in range(1, _SAMPLES + 1)]
    h = hashlib.sha256(str(size).encode())
    with path.open("rb") as f:
        for offset, length in chunks:
            f.seek(offset)
            h.update(f.read(length))
    return h.hexdigest()


def content_identity(path: Path) -> str:
    """A short key for the file's content (size + sampled hash, and for a GGUF every byte of its header,
    metadata and tensor directory), not its path: the same .gguf in three virtual environments is
    converted once. The samples alone missed an edited chat template (1.8 MB into the file, between
    two samples; GGUF padding keeps the size), and the stale conversion rendered the old template.
    Computed once per (path, size, mtime)."""
    st = path.stat()
    memo = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if memo not in _identities:
        h = hashlib.sha256(sampled_digest(path).encode())
        with path.open("rb") as f:
            try:
                blob = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except ValueError:  # an empty file
                blob = None
            if blob is not None:
                with blob:
                    end = header_end(blob)
                    if end is not None:
                        h.update(b"gguf-header")
                        h.update(blob[:end])
        _identities[memo] = h.hexdigest()[:16]
    return _identities[memo]


def converted_dir(source: Path) -> Path:
    """Cache folder for a GGUF file converted to safetensors + tokenizer.json, keyed by the file's
    content and by the transformers version that converts it (its GGUF readers change between
    releases): a reinstall or a second venv reuses the conversion, an upgrade redoes it."""
    return cache_root() / "models" / f"{source.stem}-{content_identity(source)}-tf{_converter_version()}"


def _converter_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("transformers")
    except PackageNotFoundError:
        return "none"
