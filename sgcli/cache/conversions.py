"""Integrity of converted models and tokenizers (GGUF -> safetensors + tokenizer.json) in the cache.

A conversion is written into a unique staging folder beside its final place, gets a manifest
(per file: size, a hash of samples, the full sha256), and is renamed into place in one step, so
two first runs converting at once both succeed and a reader never sees half a folder. On every
later use the manifest is checked cheaply (sizes and sampled hashes: milliseconds for 500 MB);
a folder that fails is reported, set aside and converted again, never used. Cache-side problems
name the cache folder and SGCLI_CACHE_DIR, never the .gguf file.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from sgcli.cache.paths import notify, sampled_digest
from sgcli.errors import UserError

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
        files[path.name] = {"size": path.stat().st_size, "sampled": sampled_digest(path), "sha256": _full_digest(path)}
    manifest = {"format": 1, "source": str(source), "files": files}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")


def problem(folder: Path) -> str | None:
    """What is wrong with a converted folder (cheap check), or None when it matches its manifest."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        files = manifest["files"]
    except FileNotFoundError:
        return f"its manifest {MANIFEST} is missing"
    except (OSError, ValueError, KeyError, TypeError):
        return f"its manifest {MANIFEST} is unreadable"
    if not files:
        return "its manifest lists no files"
    for name, want in files.items():
        path = folder / name
        try:
            size = path.stat().st_size
        except OSError:
            return f"{name} is missing"
        if size != want.get("size"):
            return f"{name} has {size:,} bytes, {want.get('size'):,} were written"
        if sampled_digest(path) != want.get("sampled"):
            return f"{name} has changed since it was written (checksum mismatch)"
    return None


def usable(out: Path, what: str) -> bool:
    """True when `out` holds a good conversion; a damaged one is reported and set aside."""
    if not out.exists():
        return False
    found = problem(out)
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
        out.parent.mkdir(parents=True, exist_ok=True)
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


def publish(staged: Path, out: Path, source: Path) -> Path:
    """Write the manifest and move `staged` to `out` in one rename. When another process got
    there first with a good conversion, keep theirs and drop ours."""
    write_manifest(staged, source)
    for _ in range(3):
        try:
            staged.rename(out)
            return out
        except OSError:  # `out` exists: another first run finished before us
            found = problem(out)
            if found is None:
                shutil.rmtree(staged, ignore_errors=True)
                return out
            discard(out, f"the cached conversion in {out} is damaged ({found}): replacing it")
    raise UserError(f"cannot move the converted files into {out}", hint="check the cache folder (SGCLI_CACHE_DIR)")
