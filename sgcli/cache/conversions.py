"""Integrity of converted models and tokenizers (GGUF -> safetensors + tokenizer.json) in the cache.

A conversion is written into a unique staging folder beside its final place, gets a manifest
(per file: size, mtime, a hash of samples, the full sha256), and is renamed into place in one
step, so two first runs converting at once both succeed and a reader never sees half a folder. On
every later use the manifest is checked: a file whose size and mtime are those it was written with
gets the cheap check (sampled hashes: milliseconds for 500 MB); one whose mtime changed, or that
the manifest has no mtime for, is fully re-hashed against its sha256 (~1 s for 500 MB), since a
damaged region between the samples would pass the cheap check. The source file is described too
(size, full sha256, and the paths and mtimes it was confirmed at): a model conversion is a recipe
that reads the .gguf at every load, so a .gguf that changed since (other size, or another mtime and
other bytes) makes the folder stale, like a damaged file of its own. A folder that fails is reported,
set aside and converted again, never used. A disk that fills while converting is exit 2 naming
the folder and the space needed. Cache-side problems name the cache folder and SGCLI_CACHE_DIR,
never the .gguf file.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sgcli.cache.paths import atomic_write, cache_folder, notify, sampled_digest
from sgcli.errors import UserError
from sgcli.regular_files import read_regular

MANIFEST = "sgcli-converted.json"


def _full_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(8 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_manifest(folder: Path, source: Path) -> None:
    """Describe every file in `folder` (sizes, sampled and full hashes); written last."""
    files = {}
    for path in sorted(p for p in folder.iterdir() if p.is_file() and p.name != MANIFEST):
        st = path.stat()
        files[path.name] = {
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "sampled": sampled_digest(path),
            "sha256": _full_digest(path),
        }
    st = source.stat()
    origin = {"size": st.st_size, "sha256": _full_digest(source), "seen": {str(source.resolve()): st.st_mtime_ns}}
    manifest = {"format": 1, "source": str(source), "origin": origin, "files": files}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")


def _source_problem(manifest: dict, source: Path) -> tuple[str | None, bool]:
    """(what is wrong with `source` against the manifest's origin, whether the manifest learnt a new
    path/mtime). A path and mtime seen before are trusted; else every byte is hashed (0.15 s per 100 MB)."""
    origin = manifest.get("origin")
    if not isinstance(origin, dict):
        return None, False  # a tokenizer folder, or one written before origins were recorded
    try:
        st = source.stat()
    except OSError:
        return f"its source {source} cannot be read", False
    if st.st_size != origin.get("size"):
        return f"its source {source.name} has {st.st_size:,} bytes, {origin.get('size'):,} when converted", False
    seen = origin.setdefault("seen", {})
    key = str(source.resolve())
    if seen.get(key) == st.st_mtime_ns:
        return None, False
    if _full_digest(source) != origin.get("sha256"):
        return f"its source {source.name} has changed since it was converted (full checksum mismatch)", False
    seen[key] = st.st_mtime_ns
    return None, True


def problem(folder: Path, source: Path | None = None) -> str | None:
    """What is wrong with a converted folder (cheap check), or None when it matches its manifest (and
    `source`, where given, is the file it was converted from)."""
    try:
        manifest = json.loads(read_regular(folder / MANIFEST))
        files = manifest["files"]
    except FileNotFoundError:
        return f"its manifest {MANIFEST} is missing"
    except (OSError, ValueError, KeyError, TypeError):
        return f"its manifest {MANIFEST} is unreadable"
    if not files:
        return "its manifest lists no files"
    rehashed = False
    for name, want in files.items():
        path = folder / name
        try:
            st = path.stat()
        except OSError:
            return f"{name} is missing"
        if not stat.S_ISREG(st.st_mode):  # a FIFO would hang the checksum's read
            return f"{name} is not a regular file"
        if st.st_size != want.get("size"):
            return f"{name} has {st.st_size:,} bytes, {want.get('size'):,} were written"
        if st.st_mtime_ns != want.get("mtime_ns"):  # touched since it was written: every byte is checked
            if _full_digest(path) != want.get("sha256"):
                return f"{name} was modified after it was written (full checksum mismatch)"
            want["mtime_ns"], rehashed = st.st_mtime_ns, True
        elif sampled_digest(path) != want.get("sampled"):
            return f"{name} has changed since it was written (checksum mismatch)"
    if source is not None:
        found, learnt = _source_problem(manifest, source)
        if found is not None:
            return found
        rehashed = rehashed or learnt
    if rehashed:  # every byte matched: the next run takes the cheap check (else it re-hashes every time)
        _rewrite_manifest(folder, manifest)
    return None


def _rewrite_manifest(folder: Path, manifest: dict) -> None:
    """The manifest with the mtimes a full check has just confirmed; a cache it cannot write keeps the old one."""
    try:
        atomic_write(folder / MANIFEST, json.dumps(manifest, indent=1).encode("utf-8"))
    except OSError:
        pass


def usable(out: Path, what: str, source: Path | None = None) -> bool:
    """True when `out` holds a good conversion (of `source`, where given); a damaged or stale one is
    reported and set aside."""
    try:
        if not out.exists():
            return False
    except OSError:  # cannot be looked at (another user's folder): converted again, or exit 2 by `staging`
        return False
    found = problem(out, source)
    if found is None:
        return True
    discard(out, f"the cached {what} in {out} is damaged ({found}): converting it again")
    return False


def discard(out: Path, message: str) -> None:
    """Report `message` and remove `out` (renamed away first, so no reader sees it half-deleted)."""
    notify(message)
    trash = out.with_name(f".{out.name}.discarded-{os.getpid()}-{os.urandom(4).hex()}")
    try:
        out.rename(trash)
    except OSError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def staging(out: Path) -> Path:
    """A fresh, unique folder beside `out` to convert into; exit 2 when the cache cannot be written."""
    try:
        cache_folder(out.parent)
        _drop_stale_staging(out)
        folder = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.partial-"))
        folder.chmod(0o755)  # mkdtemp's 0700 would keep other users of a shared cache out
        return folder
    except OSError as exc:
        raise UserError(
            f"cannot write the model cache at {out.parent} ({exc.strerror or exc}); "
            "converting a .gguf needs a writable cache folder (SGCLI_CACHE_DIR)",
            hint="set SGCLI_CACHE_DIR to a writable folder, or pass a model or tokenizer folder instead",
        ) from None


def _drop_stale_staging(out: Path, max_age_s: float = 6 * 3600) -> None:
    """Staging folders of runs killed mid-conversion (a live run's folder is minutes old)."""
    now = time.time()
    for stale in out.parent.glob(f".{out.name}.partial-*"):
        try:
            if now - stale.stat().st_mtime > max_age_s:
                shutil.rmtree(stale, ignore_errors=True)
        except OSError:
            pass


_SPARE = 64 << 20  # room left for the manifest, the config and the file system's own needs


def ensure_space(folder: Path, needed: int, what: str) -> None:
    """Exit 2 before writing `needed` bytes into `folder` when its disk has not that much free."""
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return  # unknown: the writes themselves will say (disk_full_is_exit_2)
    if free < needed + _SPARE:
        raise _no_space(folder, what, needed, free)


@contextmanager
def disk_full_is_exit_2(folder: Path, what: str, needed: int | None = None) -> Iterator[None]:
    """A write into the cache that fills its disk (ENOSPC, EDQUOT) is the user's to fix: exit 2."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        try:
            free = shutil.disk_usage(folder.parent).free
        except OSError:
            free = None
        raise _no_space(folder, what, needed, free) from None


def _no_space(folder: Path, what: str, needed: int | None, free: int | None) -> UserError:
    need = f"needs about {max(needed, 10**6) / 1e6:,.0f} MB" if needed else "needs more space"
    has = f", {free / 1e6:,.0f} MB are free" if free is not None else ""
    return UserError(
        f"the disk of the model cache is full: {what} {need} in {folder.parent}{has}",
        hint="free space there, or set SGCLI_CACHE_DIR to a folder on a disk with room",
    )


def publish(staged: Path, out: Path, source: Path) -> Path:
    """Write the manifest and move `staged` to `out` in one rename. When another process got
    there first with a good conversion, keep theirs and drop ours."""
    write_manifest(staged, source)
    for _ in range(3):
        try:
            staged.rename(out)
            return out
        except OSError:  # `out` exists: another first run finished before us
            found = problem(out, source)
            if found is None:
                shutil.rmtree(staged, ignore_errors=True)
                return out
            discard(out, f"the cached conversion in {out} is damaged ({found}): replacing it")
    raise UserError(f"cannot move the converted files into {out}", hint="check the cache folder (SGCLI_CACHE_DIR)")
