"""On-disk cache of compiled grammars: a load where a load is measured faster than a compile.

Entries live under `cache_root()/compiled/`, keyed by everything that changes the compiled
artefact: backend name and version, the tokenizer's identity (a hash of its bytes, special ids
and stop ids), and the grammar (kind, text, choices, sub-grammars, JSON options). Only backends
whose capabilities say `cacheable` are cached; for the others `compile_cached` compiles and says
"not cacheable".

The cache must never hurt (docs/limits.md has the measurements):
- a compile is stored only when a trial load of its serialized form was faster than the compile
  and the bytes fit `MAX_ENTRY_BYTES`; serializing runs in a bounded child (`run_bounded`) with
  the compile's own time as its budget, because xgrammar's JSON grows with rules x FSM size (every
  rule's FSM embeds the whole grammar's FSM) and reached 23 GB at 150 properties. A compile not
  worth storing leaves a small "skip" entry saying why, so the next run does not try again;
- one file per entry: a JSON header line (its key, the payload's size and sha256) and the payload,
  written to a unique temporary file and renamed into place, so concurrent writers never mix;
- an entry whose header names another key, or whose payload fails its checksum, is removed,
  recompiled and reported (a notice), never used;
- a cache folder that cannot be written turns the cache off with one notice;
- the store attempt runs beside the caller, not before it returns: a generation starts decoding while
  the child serializes (it cost 100-330 ms a store on a loaded machine, a third of xgrammar's cold
  compile p90). `CacheOutcome.settled()` waits for the verdict where it is shown (`sgcli compile`); a
  later compile of the same grammar, and the process's exit, wait for it too. One runs at a time, and a
  compile of another grammar meanwhile is not stored rather than wait (its next compile tries again).
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import json
import os
import tempfile
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from sgcli import __version__ as sgcli_version
from sgcli.backends.base import Backend, Compiled, CompileWarning
from sgcli.backends.bounded import compile_bounded, fits_in_process
from sgcli.cache.paths import atomic_write, cache_root, notify
from sgcli.constraints.spec import ConstraintSpec, JsonOptions
from sgcli.limits import Bounded, LimitHit, current_limits, start_bounded
from sgcli.tokenizers.vocab import Vocab

# bump when the entry layout, what sgcli hands a library for the same spec, or the warnings sgcli adds to
# an entry change (3: the JSON layout inside tags; 4: outlines_core's warnings name only keywords that
# validate; 5: strings generated with one spelling per character, json_layout.UNIQUE_ESCAPES; 6: outlines-core's
# patterns grouped). A release changes the key anyway: sgcli's version is part of it.
FORMAT_VERSION = 6
MAX_ENTRY_BYTES = 64 << 20  # a bigger payload is not stored (and is no faster to load than to compile)
MIN_STORE_BUDGET_S = 0.25  # the least time a store attempt gets, whatever the compile took
# A compile quicker than this is never stored, nor tried: reading, checking and loading an entry took
# longer (measured: xgrammar @iso8601 loads in 10 ms, compiles in 5 ms), and the store attempt is a fork.
MIN_STORE_COMPILE_S = 0.05

HIT, MISS, OFF, NOT_CACHEABLE, NOT_STORED = "hit", "miss", "off", "not cacheable", "not stored"

_enabled = True
_unwritable_noticed: set[Path] = set()

_vocab_ids: weakref.WeakKeyDictionary[Vocab, str] = weakref.WeakKeyDictionary()


@dataclass
class CacheOutcome:
    compiled: Compiled
    status: str  # HIT, MISS (compiled and stored), NOT_STORED (compiled, not worth storing), OFF, NOT_CACHEABLE
    key: str | None = None
    reason: str | None = None  # why NOT_STORED or OFF
    notes: list[str] = field(default_factory=list)
    store: _PendingStore | None = None  # a store attempt still running (status MISS until it says otherwise)

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
    if not is_cacheable(backend) and backend.capabilities.compiles_in_process and fits_in_process(spec):
        return CacheOutcome(compile_bounded(backend, spec, vocab), NOT_CACHEABLE)  # no key, no record needed
    key = cache_key(backend, spec, vocab)
    if not is_cacheable(backend):
        return CacheOutcome(_compile_probed(backend, spec, vocab, key), NOT_CACHEABLE)
    notes: list[str] = []
    _settle_pending(key)  # this grammar's own store attempt, still running: its entry decides below
    header, payload = _read_entry(key, notes)
    if header is not None and header.get("stored"):
        loaded = _load(backend, key, header, payload, spec, vocab, notes)
        if loaded is not None:
            return CacheOutcome(loaded, HIT, key, notes=notes)
        header = None  # the entry did not load and was removed: compile and store afresh
    compiled = _compile_probed(backend, spec, vocab, key)
    if header is not None:  # a skip entry: measured before, not worth storing
        return CacheOutcome(compiled, NOT_STORED, key, header.get("reason"), notes)
    if not _writable(compiled_dir()):
        return CacheOutcome(compiled, OFF, key, f"cache folder {compiled_dir()} is not writable", notes)
    if compiled.compile_s < MIN_STORE_COMPILE_S:
        reason = f"compiled in under {MIN_STORE_COMPILE_S * 1000:.0f} ms, quicker than any load"
        return CacheOutcome(compiled, NOT_STORED, key, reason, notes)
    if _store_running():  # never wait behind another grammar's store: that wait would be the caller's
        reason = "another grammar's store attempt was still running; the next compile of this one tries again"
        return CacheOutcome(compiled, NOT_STORED, key, reason, notes)
    return CacheOutcome(compiled, MISS, key, None, notes, store=_start_store(backend, key, compiled))


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
    path = _path(key).with_suffix(".probe")
    if _probe_passed(path, key, limits):
        return compile_bounded(backend, spec, vocab, trusted=True)
    compiled = compile_bounded(backend, spec, vocab)
    probed = limits.timeout_s or limits.memory_mb  # else compile_bounded ran no child either
    if probed and compiled.compile_s * PROBE_MARGIN < (limits.timeout_s or float("inf")):
        record = {"format": FORMAT_VERSION, "key": key, "compile_s": compiled.compile_s}
        _write_file(path, json.dumps(record | dataclasses.asdict(limits)).encode("utf-8"))
    return compiled


def _probe_passed(path: Path, key: str, limits) -> bool:
    try:
        record = json.loads(path.read_bytes())
        if record.get("format") != FORMAT_VERSION or record.get("key") != key:
            return False
        fast = not limits.timeout_s or record["compile_s"] * PROBE_MARGIN < limits.timeout_s
        memory = not limits.memory_mb or 0 < record["memory_mb"] <= limits.memory_mb
        return fast and memory
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _path(key: str) -> Path:
    return compiled_dir().joinpath(key[:2], f"{key}.entry")


def _read_entry(key: str, notes: list[str]) -> tuple[dict | None, bytes]:
    """(header, payload) of the entry for `key`; (None, b"") when absent or bad (bad ones removed)."""
    path = _path(key)
    try:
        raw = path.read_bytes()
    except OSError:
        return None, b""
    newline = raw.find(b"\n")
    try:
        header = json.loads(raw[:newline]) if newline > 0 else None
    except ValueError:
        header = None
    payload = raw[newline + 1 :] if newline > 0 else b""
    problem = _entry_problem(header, payload, key)
    if problem is None:
        return header, payload
    _drop(path, f"compiled-grammar cache entry {path} {problem}: removed, compiling afresh", notes)
    return None, b""


def _entry_problem(header: dict | None, payload: bytes, key: str) -> str | None:
    if not isinstance(header, dict) or header.get("format") != FORMAT_VERSION:
        return "is unreadable or of another format"
    if header.get("key") != key:
        return "belongs to another grammar (its header names another key)"
    if len(payload) != header.get("size") or hashlib.sha256(payload).hexdigest() != header.get("sha256"):
        return "is corrupt or truncated (checksum mismatch)"
    return None


def _drop(path: Path, message: str, notes: list[str]) -> None:
    notes.append(message)
    notify(message)
    try:
        path.unlink()
    except OSError:
        pass


def _load(backend, key, header, payload, spec, vocab, notes) -> Compiled | None:
    backend.prepare(vocab)  # per-vocabulary state: a compile needs it too, so it is not part of the load
    t = time.perf_counter()
    compiled = backend.deserialize(payload, spec, vocab)
    if compiled is None:
        _drop(
            _path(key),
            f"compiled-grammar cache entry {_path(key)} could not be loaded: removed, compiling afresh",
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
        _write_entry(
            key,
            _skip_header(
                key, f"a load took {load_s * 1000:.0f} ms, a compile {meta.get('compile_s', 0) * 1000:.0f} ms"
            ),
            b"",
        )
    return compiled


class _PendingStore:
    """A store attempt running in a bounded child (`start_bounded`); `finish()` waits for its verdict
    and writes the skip entry when it did not store."""

    def __init__(self, key: str, child: Bounded, budget: float):
        self.key, self._child, self._budget = key, child, budget
        self._verdict: tuple[bool, str | None] | None = None
        self._owner = os.getpid()

    def ready(self) -> bool:
        """Whether `finish()` would answer without waiting (asked of this process's own stores only)."""
        return self._verdict is not None or self._child.ready()

    def finish(self) -> tuple[bool, str | None]:
        if self._verdict is None and self._owner != os.getpid():  # a forked child: not its store to collect
            return False, "the store attempt is the parent process's"
        if self._verdict is None:
            try:
                result = self._child.result()
            except LimitHit as hit:
                result = {"stored": False, "reason": _store_limit_reason(hit, self._budget)}
            if not result.get("stored"):
                _write_entry(self.key, _skip_header(self.key, result["reason"]), b"")
            self._verdict = bool(result.get("stored")), result.get("reason")
            _pending.pop(self.key, None)
        return self._verdict


_pending: dict[str, _PendingStore] = {}  # key -> its store attempt, running beside this process
_pending_pid = os.getpid()


def _own_pending() -> dict[str, _PendingStore]:
    """`_pending`, less what a forked child inherited: those stores are its parent's children, which
    only the parent can wait for (a lint probe child compiles too)."""
    global _pending_pid
    if _pending_pid != os.getpid():
        _pending.clear()
        _pending_pid = os.getpid()
    return _pending


def _store_running() -> bool:
    """Whether a store attempt still runs (one at a time: each is a forked child on a core of its own, and
    a loop of compiles, as in a benchmark or `sgcli bench`, would otherwise fork one per grammar); those
    that have finished are collected on the way."""
    for pending in list(_own_pending().values()):
        if pending.ready():
            pending.finish()
    return bool(_own_pending())


def _settle_pending(key: str | None = None) -> None:
    """Wait for the store attempt of `key` (None: all of them)."""
    for pending in [p for k, p in _own_pending().items() if key is None or k == key]:
        pending.finish()


atexit.register(_settle_pending)  # an exit leaves no store half done, nor a skip entry unwritten


def _start_store(backend, key: str, compiled: Compiled) -> _PendingStore:
    """Serialize, trial-load and write the entry in a bounded child, started now; see `_PendingStore`."""
    # twice the compile: the fork, serialize and trial load of a loaded machine can outrun one compile
    # time, and a store happens once per grammar (what decides is the load against the compile, below)
    budget = max(MIN_STORE_BUDGET_S, 2 * compiled.compile_s)

    def attempt() -> dict:
        data = compiled.serialize()
        if data is None:
            return {"stored": False, "reason": "the backend cannot serialize this grammar"}
        if len(data) > MAX_ENTRY_BYTES:
            return {"stored": False, "reason": f"serialized size {len(data):,} bytes > {MAX_ENTRY_BYTES:,}"}
        t = time.perf_counter()
        ok = backend.deserialize(data, compiled.spec, compiled.vocab) is not None
        load_s = time.perf_counter() - t
        if not ok:
            return {"stored": False, "reason": "the serialized grammar does not load back"}
        if load_s >= compiled.compile_s:
            return {
                "stored": False,
                "reason": f"a load took {load_s * 1000:.0f} ms, the compile {compiled.compile_s * 1000:.0f} ms",
            }
        _write_entry(key, _stored_header(key, data, compiled), data)
        return {"stored": True}

    pending = _PendingStore(key, start_bounded(attempt, timeout_s=budget, memory_mb=current_limits().memory_mb), budget)
    _pending[key] = pending
    return pending


def _store_limit_reason(hit: LimitHit, budget: float) -> str:
    if hit.kind == "time":
        return f"serializing took longer than twice the compile ({budget * 1000:.0f} ms)"
    if hit.kind == "memory":
        return f"serializing needed more than --compile-memory {current_limits().memory_mb} MB"
    return f"serializing failed: {hit.detail}"


def _stored_header(key: str, data: bytes, compiled: Compiled) -> dict:
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


def _skip_header(key: str, reason: str) -> dict:
    return {
        "format": FORMAT_VERSION,
        "key": key,
        "stored": False,
        "reason": reason,
        "size": 0,
        "sha256": hashlib.sha256(b"").hexdigest(),
    }


def _write_entry(key: str, header: dict, payload: bytes) -> None:
    _write_file(_path(key), json.dumps(header).encode("utf-8") + b"\n" + payload)


def _write_file(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data)
    except OSError:
        pass  # the folder was checked writable; a full disk only costs speed


_writable_folders: set[Path] = set()


def _writable(folder: Path) -> bool:
    """Whether entries can be written; says once per folder when they cannot. A folder found writable
    is not tried again in this process (the try is a file created and removed)."""
    if folder in _writable_folders:
        return True
    try:
        folder.mkdir(parents=True, exist_ok=True)
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
