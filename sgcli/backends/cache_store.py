"""Storing a compile beside the caller: serialize, trial-load and write the entry in a bounded child.

A compile is stored only when the trial load of its serialized form was faster than the compile and
the bytes fit `MAX_ENTRY_BYTES`; serializing runs in a bounded child (`start_bounded`) with twice the
compile's time as its budget, because xgrammar's JSON grows with rules x FSM size (it reached 23 GB
at 150 properties). A compile not worth storing leaves a skip entry saying why, so the next run does
not try again. The attempt runs beside the caller, not before it returns: a generation decodes while
the child serializes (100-330 ms a store on a loaded machine). One runs at a time; the process's exit
and a later compile of the same grammar wait for it.
"""

from __future__ import annotations

import atexit
import os
import time

from sgcli.backends.base import Compiled
from sgcli.backends.cache_entries import skip_header, stored_header, write_entry
from sgcli.limits import Bounded, LimitHit, current_limits, start_bounded

MAX_ENTRY_BYTES = 64 << 20  # a bigger payload is not stored (and is no faster to load than to compile)
MIN_STORE_BUDGET_S = 0.25  # the least time a store attempt gets, whatever the compile took


class PendingStore:
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
                write_entry(self.key, skip_header(self.key, result["reason"]), b"")
            self._verdict = bool(result.get("stored")), result.get("reason")
            _pending.pop(self.key, None)
        return self._verdict


_pending: dict[str, PendingStore] = {}  # key -> its store attempt, running beside this process
_pending_pid = os.getpid()


def _own_pending() -> dict[str, PendingStore]:
    """`_pending`, less what a forked child inherited: those stores are its parent's children, which
    only the parent can wait for (a lint probe child compiles too)."""
    global _pending_pid
    if _pending_pid != os.getpid():
        _pending.clear()
        _pending_pid = os.getpid()
    return _pending


def store_running() -> bool:
    """Whether a store attempt still runs (one at a time: each is a forked child on a core of its own, and
    a loop of compiles, as in a benchmark or `sgcli bench`, would otherwise fork one per grammar); those
    that have finished are collected on the way."""
    for pending in list(_own_pending().values()):
        if pending.ready():
            pending.finish()
    return bool(_own_pending())


def settle_pending(key: str | None = None) -> None:
    """Wait for the store attempt of `key` (None: all of them)."""
    for pending in [p for k, p in _own_pending().items() if key is None or k == key]:
        pending.finish()


atexit.register(settle_pending)  # an exit leaves no store half done, nor a skip entry unwritten


def start_store(backend, key: str, compiled: Compiled) -> PendingStore:
    """Serialize, trial-load and write the entry in a bounded child, started now; see `PendingStore`."""
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
        write_entry(key, stored_header(key, data, compiled), data)
        return {"stored": True}

    pending = PendingStore(key, start_bounded(attempt, timeout_s=budget, memory_mb=current_limits().memory_mb), budget)
    _pending[key] = pending
    return pending


def _store_limit_reason(hit: LimitHit, budget: float) -> str:
    if hit.kind == "time":
        return f"serializing took longer than twice the compile ({budget * 1000:.0f} ms)"
    if hit.kind == "memory":
        return f"serializing needed more than --compile-memory {current_limits().memory_mb} MB"
    return f"serializing failed: {hit.detail}"
