"""On-disk cache of compiled grammars: a load where a load is measured faster than a compile.

Entries live under `cache_root()/compiled/`, keyed by everything that changes the compiled
artefact: backend name and version, the tokenizer's identity (a hash of its bytes, special ids
and stop ids), and the grammar (kind, text, choices, sub-grammars, JSON options). Only backends
whose capabilities say `cacheable` are cached; for the others `compile_cached` compiles and says
"not cacheable".

The cache must never hurt (docs/limits.md has the measurements): a compile is stored only when a
trial load was faster (`cache_store`, in a bounded child beside the caller); a damaged entry is
removed and recompiled with a notice, never used (`cache_entries`); a cache folder that cannot be
written turns the cache off with one notice. This module decides: the key, a hit, a compile (in
process where a probe record says this very grammar passed a bounded child's compile), a store.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from sgcli import __version__ as sgcli_version
from sgcli.backends.base import Backend, Compiled, CompileWarning
from sgcli.backends.bounded import compile_bounded, fits_in_process
from sgcli.backends.cache_entries import (
    FORMAT_VERSION,
    compiled_dir,
    drop_entry,
    entry_path,
    read_entry,
    skip_header,
    writable,
    write_entry,
    write_file,
)
from sgcli.backends.cache_store import PendingStore, settle_pending, start_store, store_running
from sgcli.constraints.spec import ConstraintSpec, JsonOptions
from sgcli.limits import current_limits
from sgcli.regular_files import read_regular
from sgcli.tokenizers.vocab import Vocab

# A compile quicker than this is never stored, nor tried: reading, checking and loading an entry took
# longer (measured: xgrammar @iso8601 loads in 10 ms, compiles in 5 ms), and the store attempt is a fork.
MIN_STORE_COMPILE_S = 0.05

HIT, MISS, OFF, NOT_CACHEABLE, NOT_STORED = "hit", "miss", "off", "not cacheable", "not stored"

_enabled = True

_vocab_ids: weakref.WeakKeyDictionary[Vocab, str] = weakref.WeakKeyDictionary()


@dataclass
class CacheOutcome:
    compiled: Compiled
    status: str  # HIT, MISS (compiled and stored), NOT_STORED (compiled, not worth storing), OFF, NOT_CACHEABLE
    key: str | None = None
    reason: str | None = None  # why NOT_STORED, OFF or NOT_CACHEABLE
    notes: list[str] = field(default_factory=list)
    store: PendingStore | None = None  # a store attempt still running (status MISS until it says otherwise)

    def settled(self) -> CacheOutcome:
        """This outcome once its store attempt (if any) has finished: MISS if stored, else NOT_STORED
        with the reason."""
        if self.store is not None:
            stored, reason = self.store.finish()
            self.store = None
            if not stored:
                self.status, self.reason = NOT_STORED, reason
        return self


def cache_enabled() -> bool:
    return _enabled


def set_cache_enabled(enabled: bool) -> None:
    """`--no-cache`: every later compile in this process compiles afresh and leaves the cache alone."""
    global _enabled
    _enabled = enabled


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


_JSON_OPTION_FIELDS = dataclasses.fields(JsonOptions)


def _spec_fingerprint(spec: ConstraintSpec) -> dict:
    return {
        "kind": spec.kind.value,
        "text": spec.text,
        "choices": list(spec.choices),
        "subgrammars": [[name, _spec_fingerprint(sub)] for name, sub in spec.subgrammars],
        # plain values: the dict dataclasses.asdict made, without its deep copy (the same key)
        "json_options": {f.name: getattr(spec.json_options, f.name) for f in _JSON_OPTION_FIELDS},
    }


def cache_key(backend: Backend, spec: ConstraintSpec, vocab: Vocab) -> str:
    material = {
        "format": FORMAT_VERSION,
        "sgcli": sgcli_version,
        "backend": backend.name,
        "version": backend.version(),
        "tokenizer": tokenizer_identity(vocab),
        "grammar": _spec_fingerprint(spec),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:40]


def is_cacheable(backend: Backend) -> bool:
    return backend.capabilities.cacheable


def compile_cached(
    backend: Backend, spec: ConstraintSpec, vocab: Vocab, *, use_cache: bool | None = None
) -> CacheOutcome:
    """Load `spec` compiled by `backend` from the cache, or compile it (bounded) and maybe store it.

    Compile errors propagate unchanged (positioned UserErrors, limit errors); cache trouble never
    does: a bad entry is recompiled and reported, an unwritable cache folder is skipped.
    """
    if not (_enabled if use_cache is None else use_cache):
        return CacheOutcome(compile_bounded(backend, spec, vocab), OFF)
    why = f"{backend.name} has no serialized form of a compiled grammar: it compiles each run"
    if not is_cacheable(backend) and backend.capabilities.compiles_in_process and fits_in_process(spec):
        return CacheOutcome(compile_bounded(backend, spec, vocab), NOT_CACHEABLE, reason=why)  # no key, no record
    key = cache_key(backend, spec, vocab)
    if not is_cacheable(backend):
        return CacheOutcome(_compile_probed(backend, spec, vocab, key), NOT_CACHEABLE, reason=why)
    notes: list[str] = []
    settle_pending(key)  # this grammar's own store attempt, still running: its entry decides below
    header, payload = read_entry(key, notes)
    if header is not None and header.get("stored"):
        loaded = _load(backend, key, header, payload, spec, vocab, notes)
        if loaded is not None:
            return CacheOutcome(loaded, HIT, key, notes=notes)
        header = None  # the entry did not load and was removed: compile and store afresh
    compiled = _compile_probed(backend, spec, vocab, key)
    if header is not None:  # a skip entry: measured before, not worth storing
        reason = f"decided by an earlier compile: {header.get('reason')}"  # not by this one's time
        return CacheOutcome(compiled, NOT_STORED, key, reason, notes)
    if not writable(compiled_dir()):
        return CacheOutcome(compiled, OFF, key, f"cache folder {compiled_dir()} is not writable", notes)
    if compiled.compile_s < MIN_STORE_COMPILE_S:
        ms, least = compiled.compile_s * 1000, MIN_STORE_COMPILE_S * 1000
        reason = f"compiled in {ms:.0f} ms (under {least:.0f} ms), quicker than any load"
        return CacheOutcome(compiled, NOT_STORED, key, reason, notes)
    if store_running():  # never wait behind another grammar's store: that wait would be the caller's
        reason = "another grammar's store attempt was still running; the next compile of this one tries again"
        return CacheOutcome(compiled, NOT_STORED, key, reason, notes)
    return CacheOutcome(compiled, MISS, key, None, notes, store=start_store(backend, key, compiled))


PROBE_MARGIN = 10  # trusted again only if it compiled in under a tenth of the time limit


def _compile_probed(backend: Backend, spec: ConstraintSpec, vocab: Vocab, key: str) -> Compiled:
    """`compile_bounded`, in this process rather than a forked child where this very grammar (the cache key:
    backend version, tokenizer, text, options) already passed a child's compile under limits no looser than
    the current ones, in under a tenth of the time limit: compiling is deterministic, so it passes again.
    The pass is remembered in a small `.probe` file beside the entries; an unreadable one only means
    forking again. Constraints that compile in process anyway (`bounded.fits_in_process`) need no record."""
    limits = current_limits()
    if backend.capabilities.compiles_in_process and fits_in_process(spec):
        return compile_bounded(backend, spec, vocab)
    path = entry_path(key).with_suffix(".probe")
    if _probe_passed(path, key, limits):
        return compile_bounded(backend, spec, vocab, trusted=True)
    compiled = compile_bounded(backend, spec, vocab)
    probed = limits.timeout_s or limits.memory_mb  # else compile_bounded ran no child either
    if probed and compiled.compile_s * PROBE_MARGIN < (limits.timeout_s or float("inf")):
        record = {"format": FORMAT_VERSION, "key": key, "compile_s": compiled.compile_s}
        write_file(path, json.dumps(record | dataclasses.asdict(limits)).encode("utf-8"))
    return compiled


def _probe_passed(path: Path, key: str, limits) -> bool:
    try:
        record = json.loads(read_regular(path))
        if record.get("format") != FORMAT_VERSION or record.get("key") != key:
            return False
        fast = not limits.timeout_s or record["compile_s"] * PROBE_MARGIN < limits.timeout_s
        memory = not limits.memory_mb or 0 < record["memory_mb"] <= limits.memory_mb
        return fast and memory
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _load(backend, key, header, payload, spec, vocab, notes) -> Compiled | None:
    backend.prepare(vocab)  # per-vocabulary state: a compile needs it too, so it is not part of the load
    t = time.perf_counter()
    compiled = backend.deserialize(payload, spec, vocab)
    if compiled is None:
        drop_entry(
            entry_path(key),
            f"compiled-grammar cache entry {entry_path(key)} could not be loaded: removed, compiling afresh",
            notes,
        )
        return None
    load_s = time.perf_counter() - t
    meta = header.get("meta", {})
    compiled.compile_s = load_s
    compiled.warnings = [CompileWarning(w["message"], w.get("pointer")) for w in meta.get("warnings", [])]
    if compiled.normalized is None:
        compiled.normalized = meta.get("normalized")
    if load_s > meta.get("compile_s", 0):  # this machine loads slower than it compiles: stop loading
        write_entry(
            key,
            skip_header(key, f"a load took {load_s * 1000:.0f} ms, a compile {meta.get('compile_s', 0) * 1000:.0f} ms"),
            b"",
        )
    return compiled
