"""On-disk cache of compiled grammars, so a second compile of the same grammar is a load.

Entries live under `cache_root()/compiled/`, keyed by everything that changes the
compiled artefact: backend name and version, the tokenizer's identity (a hash of its
bytes, special ids and stop ids), and the grammar (kind, text, choices, sub-grammars,
JSON options). Only backends whose capabilities say `cacheable` are
cached; for the others `compile_cached` compiles and says "not cacheable".
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

from sgcli.backends.base import Backend, Compiled, CompileWarning
from sgcli.cache.paths import cache_root
from sgcli.constraints.spec import ConstraintSpec
from sgcli.tokenizers.vocab import Vocab

FORMAT_VERSION = 1  # bump when the entry layout changes

HIT, MISS, OFF, NOT_CACHEABLE = "hit", "miss", "off", "not cacheable"

_vocab_ids: weakref.WeakKeyDictionary[Vocab, str] = weakref.WeakKeyDictionary()


@dataclass
class CacheOutcome:
    compiled: Compiled
    status: str  # HIT, MISS, OFF or NOT_CACHEABLE
    key: str | None = None


def compiled_dir() -> Path:
    return cache_root() / "compiled"


def tokenizer_identity(vocab: Vocab) -> str:
    """A hash of what a compiled grammar depends on in `vocab`; computed once per Vocab."""
    known = _vocab_ids.get(vocab)
    if known is None:
        h = hashlib.sha256()
        for token in vocab.tokens:
            h.update(len(token).to_bytes(4, "little"))
            h.update(token)
        h.update(repr((sorted(vocab.special_ids), vocab.stop_ids, vocab.vocab_type, vocab.add_prefix_space)).encode())
        known = h.hexdigest()[:32]
        _vocab_ids[vocab] = known
    return known


def _spec_fingerprint(spec: ConstraintSpec) -> dict:
    return {
        "kind": spec.kind.value,
        "text": spec.text,
        "choices": list(spec.choices),
        "subgrammars": [[name, _spec_fingerprint(sub)] for name, sub in spec.subgrammars],
        "json_options": dataclasses.asdict(spec.json_options),
    }


def cache_key(backend: Backend, spec: ConstraintSpec, vocab: Vocab) -> str:
    material = {
        "format": FORMAT_VERSION,
        "backend": backend.name,
        "version": backend.version(),
        "tokenizer": tokenizer_identity(vocab),
        "grammar": _spec_fingerprint(spec),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:40]


def is_cacheable(backend: Backend) -> bool:
    return backend.capabilities.cacheable


def compile_cached(backend: Backend, spec: ConstraintSpec, vocab: Vocab, *, use_cache: bool = True) -> CacheOutcome:
    """Load `spec` compiled by `backend` from the cache, or compile it and store it.

    Compile errors propagate unchanged (positioned UserErrors); cache trouble never does:
    an unreadable entry is recompiled and an unwritable cache folder is ignored.
    """
    if not use_cache:
        return CacheOutcome(backend.compile(spec, vocab), OFF)
    if not is_cacheable(backend):
        return CacheOutcome(backend.compile(spec, vocab), NOT_CACHEABLE)
    key = cache_key(backend, spec, vocab)
    loaded = _load(backend, key, spec, vocab)
    if loaded is not None:
        return CacheOutcome(loaded, HIT, key)
    compiled = backend.compile(spec, vocab)
    data = compiled.serialize()
    if data is None:
        return CacheOutcome(compiled, NOT_CACHEABLE, key)
    _store(key, data, compiled)
    return CacheOutcome(compiled, MISS, key)


def _paths(key: str) -> tuple[Path, Path]:
    folder = compiled_dir() / key[:2]
    return folder / f"{key}.bin", folder / f"{key}.meta.json"


def _load(backend: Backend, key: str, spec: ConstraintSpec, vocab: Vocab) -> Compiled | None:
    data_path, meta_path = _paths(key)
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        data = data_path.read_bytes()
    except (OSError, ValueError):
        return None
    t = time.perf_counter()
    compiled = backend.deserialize(data, spec, vocab)
    if compiled is None:
        return None
    compiled.compile_s = time.perf_counter() - t
    compiled.warnings = [CompileWarning(w["message"], w.get("pointer")) for w in meta.get("warnings", [])]
    if compiled.normalized is None:
        compiled.normalized = meta.get("normalized")
    return compiled


def _store(key: str, data: bytes, compiled: Compiled) -> None:
    data_path, meta_path = _paths(key)
    meta = {
        "backend": compiled.backend,
        "origin": compiled.spec.origin,
        "compile_s": compiled.compile_s,
        "warnings": [{"message": w.message, "pointer": w.pointer} for w in compiled.warnings],
        "normalized": compiled.normalized,
    }
    try:
        data_path.parent.mkdir(parents=True, exist_ok=True)
        _atomic_write(data_path, data)
        _atomic_write(meta_path, json.dumps(meta).encode("utf-8"))  # written last: marks the entry complete
    except OSError:
        pass  # a read-only or full cache folder only costs speed


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
