"""Compiles that cannot take the process down: a time and a memory ceiling on every compile, one compile each.

Every compile in every command goes through `compile_bounded`, which compiles once, in one of two places:
- in this process, where the backend's work grows with the constraint (`Capabilities.compiles_in_process`:
  llguidance, xgrammar, measured) and the constraint is small (`small`: at most SMALL_BYTES, no count
  past SMALL_COUNT), or where this very grammar already passed a bounded compile quickly (`trusted`).
  A fork costs more than such a compile (measured 14-37 ms against 0.2-1.2 ms p50 on the
  JSON-Schema-Test-Suite). The `sgcli` process compiles on its main thread under a watchdog that
  ends the run with exit 2 at the timeout (`set_overrun_handler`; timeouts of MAIN_THREAD_MIN_S and
  more); elsewhere (tests, embedding, short timeouts) a compile thread is waited on and given up
  at the timeout, and the process goes on;
- otherwise in a forked child under RLIMIT_AS (`sgcli.limits.run_bounded`), killed at the timeout.
  Where the backend serializes cheaply (`Capabilities.ships_compiled`: outlines-core's Index) the
  child sends the compiled grammar back and that is the result; elsewhere (xgrammar's JSON grows as
  rules x FSM, llguidance has none) the parent compiles again, bounded by the child's pass.
A timeout is a `CompileLimitError`, never a refusal: `auto` does not move on past it.
Measurements and the trade-off: docs/limits.md.
"""

from __future__ import annotations

import os
import queue
import re
import struct
import threading
import time
from collections.abc import Callable

from sgcli.constraints.spec import ConstraintSpec, Kind, check_size
from sgcli.errors import UserError
from sgcli.limits import LimitHit, Limits, current_limits, run_bounded

# A fork copies only the forking thread: a library lock held by another thread at that moment
# stays locked forever in the child. Bounded compiles are therefore one at a time per process.
_compile_lock = threading.RLock()

SMALL_BYTES = 32 << 10  # every schema of the JSON-Schema-Test-Suite and of tests/ is under 4 KB
SMALL_COUNT = 10_000  # xgrammar: `[a-z]{1,100000}` took 0.74 s, linear in the count
MAX_SHIPPED_BYTES = 64 << 20  # a bigger compiled grammar is compiled again rather than sent back
MAIN_THREAD_MIN_S = 5.0  # shorter timeouts are ones a small compile may meet: those keep the compile thread
_NUMBER = re.compile(r"\d{5,}")
_overrun: Callable[[UserError], None] | None = None


def set_overrun_handler(handler: Callable[[UserError], None] | None) -> None:
    """What to do when a main-thread compile passes the timeout: the CLI's process entry reports the
    limit and ends the process (exit 2). Without a handler every in-process compile uses the compile
    thread. A hand-off to another thread waits for the scheduler twice: on a loaded machine that
    measured more than the compile itself (llguidance p50 3.2 ms through the thread, 0.4 ms without)."""
    global _overrun
    _overrun = handler


class CompileLimitError(UserError):
    """A compile ran into a limit: exit 2 naming the limit and the flag that raises it."""

    def __init__(self, message: str, flag: str):
        super().__init__(
            f"{message}; the compile was stopped",
            hint=f"raise the limit with {flag} (0 turns it off), or simplify the constraint",
        )
        self.flag = flag


def small(spec: ConstraintSpec) -> bool:
    """A constraint whose compile is cheap on the backends that compile in process: short, and no
    repetition count or length bound (every number in the text is read as one) past SMALL_COUNT."""
    for part in (spec, *(sub for _, sub in spec.subgrammars)):
        if len(part.text) > SMALL_BYTES or any(int(n) > SMALL_COUNT for n in _NUMBER.findall(part.text)):
            return False
    return True


def compile_bounded(backend, spec: ConstraintSpec, vocab, *, trusted: bool = False):
    """`backend.compile(spec, vocab)` under the current limits, once; a limit is a CompileLimitError.
    `trusted`: this grammar already passed a bounded compile well within today's limits."""
    limits = current_limits()
    check_size(spec, limits)
    if spec.kind is Kind.NONE or not (limits.timeout_s or limits.memory_mb):
        return backend.compile(spec, vocab)
    backend.prepare(vocab)
    if trusted or (backend.capabilities.compiles_in_process and small(spec)):
        return _compile_watched(backend, spec, vocab, limits)
    return _compile_in_child(backend, spec, vocab, limits)


def _compile_watched(backend, spec: ConstraintSpec, vocab, limits: Limits):
    """The compile in this process's compile thread; the caller waits for it up to the time limit.
    A compile that outlives it is left to finish on its own (these compiles always end: their work
    grows with the constraint, which is small), its thread is given up, and the limit reported."""
    if not limits.timeout_s:
        return backend.compile(spec, vocab)
    handler = _overrun
    if (
        handler is not None
        and limits.timeout_s >= MAIN_THREAD_MIN_S
        and threading.current_thread() is threading.main_thread()
    ):
        with (
            _compile_lock,
            _Watchdog.armed(
                limits.timeout_s, lambda: handler(_limit_error(LimitHit("time"), backend.name, spec, limits))
            ),
        ):
            return backend.compile(spec, vocab)
    with _compile_lock:  # no fork of ours happens while the compile thread is inside a grammar library
        box = _Worker.current().run(lambda: backend.compile(spec, vocab), limits.timeout_s)
    if box is None:
        raise _limit_error(LimitHit("time"), backend.name, spec, limits)
    if "error" in box:
        raise box["error"]
    return box["value"]


class _Worker:
    """One long-lived compile thread per process (starting a thread per compile measured more than a
    small compile); replaced when a compile outlives its limit, or in a forked child, which has none."""

    _current: _Worker | None = None

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="sgcli-compile", daemon=True).start()

    @classmethod
    def current(cls) -> _Worker:
        if cls._current is None or cls._current.pid != os.getpid():
            cls._current = cls()
        return cls._current

    def _loop(self) -> None:
        while True:
            fn, box, done = self.jobs.get()
            try:
                box["value"] = fn()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread, traceback and all
                box["error"] = exc
            done.set()

    def run(self, fn, timeout_s: float) -> dict | None:
        """{"value": ...} or {"error": ...}; None when `fn` is still running after `timeout_s`."""
        box: dict[str, object] = {}
        done = threading.Event()
        self.jobs.put((fn, box, done))
        if done.wait(timeout_s):
            return box
        _Worker._current = None  # this thread is busy until its compile ends: the next one gets a new thread
        return None


class _Watchdog:
    """One polling thread per process (every 0.1 s: arming costs two assignments, no wake-up); it runs
    the armed action once the deadline has passed while the compile still holds the main thread."""

    _pid = 0
    _deadline: float | None = None
    _action: Callable[[], None] | None = None

    @classmethod
    def armed(cls, timeout_s: float, action: Callable[[], None]):
        if cls._pid != os.getpid():  # first use, or a forked child (which has no thread of ours)
            cls._pid = os.getpid()
            threading.Thread(target=cls._loop, name="sgcli-compile-watchdog", daemon=True).start()
        return _Armed(cls, time.monotonic() + timeout_s, action)

    @classmethod
    def _loop(cls) -> None:
        while True:
            time.sleep(0.1)
            deadline, action = cls._deadline, cls._action
            if deadline is not None and action is not None and time.monotonic() > deadline:
                cls._deadline = None
                action()


class _Armed:
    def __init__(self, watchdog, deadline: float, action) -> None:
        self.watchdog, self.deadline, self.action = watchdog, deadline, action

    def __enter__(self) -> None:
        self.watchdog._action, self.watchdog._deadline = self.action, self.deadline

    def __exit__(self, *exc) -> None:
        self.watchdog._deadline = None


def _compile_in_child(backend, spec: ConstraintSpec, vocab, limits: Limits):
    ships = backend.capabilities.ships_compiled

    def child():
        t = time.perf_counter()
        try:
            compiled = backend.compile(spec, vocab)
        except UserError:
            return {"compiled": False}  # the parent compiles again and raises the positioned error itself
        data = compiled.serialize() if ships else None
        if data is None or len(data) > MAX_SHIPPED_BYTES:
            return {"compiled": True}
        return struct.pack("<d", time.perf_counter() - t) + data  # the compile time, then the grammar

    with _compile_lock:  # no other thread of ours is inside a grammar library when we fork
        try:
            reply = run_bounded(child, timeout_s=limits.timeout_s, memory_mb=limits.memory_mb)
        except LimitHit as hit:
            if hit.kind != "raised":
                raise _limit_error(hit, backend.name, spec, limits) from None
            reply = None
        if isinstance(reply, bytes):
            compiled = backend.deserialize(reply[8:], spec, vocab)
            if compiled is not None:
                compiled.compile_s = struct.unpack("<d", reply[:8])[0]
                return compiled
        return backend.compile(spec, vocab)  # a Python exception in the child happens again here, traceback and all


def _limit_error(hit: LimitHit, backend_name: str, spec: ConstraintSpec, limits: Limits) -> UserError:
    what = f"compiling the {spec.kind.label}" + (f" of {spec.origin}" if spec.origin else "") + f" with {backend_name}"
    if hit.kind == "time":
        return CompileLimitError(f"{what} took longer than the {limits.timeout_s:g} s time limit", "--compile-timeout")
    if hit.kind == "memory":
        return CompileLimitError(f"{what} needed more than the {limits.memory_mb} MB memory limit", "--compile-memory")
    return UserError(
        f"{what} crashed the grammar library" + (f": {hit.detail}" if hit.detail else ""),
        hint="a bug in the grammar library, not in your constraint alone; try another --backend",
    )
