"""The compiled-grammar cache's entries on disk: one file per entry, never used when damaged.

An entry is a JSON header line (its key, the payload's size and sha256, what sgcli adds to the
compile: warnings, the normalized grammar) and the payload the backend serialized, or a "skip" entry
saying why a compile was not worth storing. Each is written to a unique temporary file and renamed
into place, so concurrent writers never mix; one whose header names another key, or whose payload
fails its checksum, is removed (with a notice) and the grammar compiled afresh. Probe records
(`.probe`, see `compile_cache`) live beside the entries.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from sgcli.backends.base import Compiled
from sgcli.cache.paths import atomic_write, cache_folder, cache_root, notify
from sgcli.regular_files import NotARegularFile, read_regular

# bump when the entry layout, what sgcli hands a library for the same spec, or the warnings sgcli adds to
# an entry change (3: the JSON layout inside tags; 4: outlines_core's warnings name only keywords that
# validate; 5: strings generated with one spelling per character, json_layout.UNIQUE_ESCAPES; 6: outlines-core's
# patterns grouped; 7: keywords the schema's draft ignores left out, draft_reading; 8: `\s` for xgrammar with
# U+2028/U+2029 outside its class, xgrammar_regex._space; 9: a choice's alternatives longest first;
# 10: xgrammar's stop ids given no bytes, xgrammar_backend.pieces_for_xgrammar; 11: xgrammar given pieces that
# start with NUL as they are; 12: xgrammar's objects with patternProperties open to every name,
# xgrammar_json; 13: objects that list properties closed when generating, listed_properties, and a Lark
# grammar's inline %json laid out as --sub schemas are; 14: xgrammar and outlines-core given a pattern with a
# lookaround, backreference or `\b` relaxed, pattern_gaps.unmatchable_patterns, and xgrammar an object that must
# hold more than it lists left open, xgrammar_json._needs_properties; 15: llguidance's `\S` and `[^\s]` left
# to the checker, pattern_gaps.reads_shorthand_wider; outlines-core told to follow every `$ref` of an acyclic
# schema, outlines_backend.ref_depth). A release changes the key anyway: sgcli's version is part of it.
FORMAT_VERSION = 15

_unwritable_noticed: set[Path] = set()


def compiled_dir() -> Path:
    return cache_root() / "compiled"


def entry_path(key: str) -> Path:
    return compiled_dir().joinpath(key[:2], f"{key}.entry")


def read_entry(key: str, notes: list[str]) -> tuple[dict | None, bytes]:
    """(header, payload) of the entry for `key`; (None, b"") when absent or bad (bad ones removed)."""
    path = entry_path(key)
    try:
        raw = read_regular(path)
    except NotARegularFile:  # a FIFO there hung the compile, past --compile-timeout
        drop_entry(path, f"compiled-grammar cache entry {path} is not a regular file: removed, compiling afresh", notes)
        return None, b""
    except OSError:
        return None, b""
    newline = raw.find(b"\n")
    try:
        header = json.loads(raw[:newline]) if newline > 0 else None
    except (ValueError, RecursionError):
        header = None
    payload = raw[newline + 1 :] if newline > 0 else b""
    problem = _entry_problem(header, payload, key)
    if problem is None:
        return header, payload
    drop_entry(path, f"compiled-grammar cache entry {path} {problem}: removed, compiling afresh", notes)
    return None, b""


def _entry_problem(header: dict | None, payload: bytes, key: str) -> str | None:
    if not isinstance(header, dict) or header.get("format") != FORMAT_VERSION:
        return "is unreadable or of another format"
    if header.get("key") != key:
        return "belongs to another grammar (its header names another key)"
    if len(payload) != header.get("size") or hashlib.sha256(payload).hexdigest() != header.get("sha256"):
        return "is corrupt or truncated (checksum mismatch)"
    if not _meta_ok(header.get("meta", {})):  # the checksum covers the payload; the header is read as data
        return "has a header of the wrong shape"
    return None


def _meta_ok(meta) -> bool:
    """Whether a stored entry's `meta` has the shape `stored_header` writes (a changed header was exit 3)."""
    if not isinstance(meta, dict):
        return False
    compile_s, warnings = meta.get("compile_s", 0), meta.get("warnings", [])
    if isinstance(compile_s, bool) or not isinstance(compile_s, (int, float)) or not 0 <= compile_s < float("inf"):
        return False
    if not isinstance(meta.get("normalized"), (str, type(None))) or not isinstance(warnings, list):
        return False
    return all(
        isinstance(w, dict) and isinstance(w.get("message"), str) and isinstance(w.get("pointer"), (str, type(None)))
        for w in warnings
    )


def drop_entry(path: Path, message: str, notes: list[str]) -> None:
    notes.append(message)
    notify(message)
    try:
        path.unlink()
    except OSError:
        pass


def stored_header(key: str, data: bytes, compiled: Compiled) -> dict:
    return {
        "format": FORMAT_VERSION,
        "key": key,
        "stored": True,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "meta": {
            "backend": compiled.backend,
            "origin": compiled.spec.origin,
            "compile_s": compiled.compile_s,
            "warnings": [{"message": w.message, "pointer": w.pointer} for w in compiled.warnings],
            "normalized": compiled.normalized,
        },
    }


def skip_header(key: str, reason: str) -> dict:
    return {
        "format": FORMAT_VERSION,
        "key": key,
        "stored": False,
        "reason": reason,
        "size": 0,
        "sha256": hashlib.sha256(b"").hexdigest(),
    }


def write_entry(key: str, header: dict, payload: bytes) -> None:
    write_file(entry_path(key), json.dumps(header).encode("utf-8") + b"\n" + payload)


def write_file(path: Path, data: bytes) -> None:
    try:
        cache_folder(path.parent)
        atomic_write(path, data)
    except OSError:
        pass  # the folder was checked writable; a full disk only costs speed


_writable_folders: set[Path] = set()


def writable(folder: Path) -> bool:
    """Whether entries can be written; says once per folder when they cannot. A folder found writable
    is not tried again in this process (the try is a file created and removed)."""
    if folder in _writable_folders:
        return True
    try:
        cache_folder(folder)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".probe-")
        os.close(fd)
        os.unlink(probe)
        ok = True
    except OSError:
        ok = False
    if ok:
        _writable_folders.add(folder)
    if not ok and folder not in _unwritable_noticed:
        _unwritable_noticed.add(folder)
        notify(
            f"cache folder {folder} is not writable: compiled grammars are not cached "
            "(set SGCLI_CACHE_DIR to a writable folder, or pass --no-cache)"
        )
    return ok
