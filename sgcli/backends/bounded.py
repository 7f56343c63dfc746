"""Compiles that cannot take the process down: a time and a memory ceiling on every compile, one compile each.

Every compile in every command goes through `compile_bounded`, which compiles once (the first mask of a
fresh matcher included: `_compile`), in one of two places:
- in this process, where the backend's work grows with the constraint (`Capabilities.compiles_in_process`:
  llguidance, xgrammar, measured) and the constraint fits (`fits_in_process`: no count past SMALL_COUNT,
  and a stack that its deepest nesting cannot overflow), or where this very grammar already passed a
  bounded compile quickly (`trusted`). A fork costs more than such a compile (measured 14-37 ms
  against 0.2-1.2 ms p50 on the JSON-Schema-Test-Suite), and a second compile after it doubles the
  rest. The libraries recurse per level of nesting: chains of `$ref`s or rules overflowed an 8 MiB
  stack at 35 KB (llguidance, 240 stack bytes per constraint byte at worst, measured per shape), so a
  constraint gets STACK_PER_BYTE stack bytes per byte of its text. The `sgcli` process compiles a
  constraint that fits the main thread's stack there, under a watchdog that ends the run with exit 2
  at the timeout (`set_overrun_handler`; timeouts of MAIN_THREAD_MIN_S and more); a larger one, or
  any outside the CLI (tests, embedding, short timeouts), on a compile thread with a WORKER_STACK
  stack that is waited on and given up at the timeout, and the process goes on;
- otherwise in a forked child under RLIMIT_AS (`sgcli.limits.run_bounded`), killed at the timeout.
  Where the backend serializes cheaply (`Capabilities.ships_compiled`: outlines-core's Index) the
  child sends the compiled grammar back and that is the result; elsewhere (xgrammar's JSON grows as
  rules x FSM, llguidance has none) the parent compiles again, bounded by the child's pass.
A timeout is a `CompileLimitError`, never a refusal: `auto` does not move on past it.
Measurements and the trade-off: docs/limits.md.
"""

from __future__ import annotations

import functools
import importlib
import os
import queue
import re
import resource
import struct
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager

from sgcli.backends.native_stderr import give_back_fd2
from sgcli.constraints.spec import ConstraintSpec, Kind, check_size
from sgcli.errors import ConstraintError, UserError
from sgcli.limits import LimitHit, Limits, current_limits, run_bounded

# A fork copies only the forking thread: a library lock held by another thread at that moment
# stays locked forever in the child. Bounded compiles are therefore one at a time per process.
_compile_lock = threading.RLock()

STACK_PER_BYTE = 1024  # 4x the most any shape measured: llguidance, `items` through `$ref` chains (240)
WORKER_STACK = 256 << 20  # address space only: the pages a compile never reaches are never backed
SMALL_COUNT = 10_000  # xgrammar: `[a-z]{1,100000}` took 0.74 s, linear in the count
MAX_SHIPPED_BYTES = 64 << 20  # a bigger compiled grammar is compiled again rather than sent back
MAIN_THREAD_MIN_S = 5.0  # shorter timeouts are ones a small compile may meet: those keep the compile thread
# In a JSON Schema only a count keyword's value or a quantifier inside a string (`{n`, `,n}`: JSON itself
# never puts a digit right after `{`, nor `}` right after `,n`) counts; descriptions and bounds are full
# of big numbers. Read on the text before each big number, which is rare: a scan of every brace and comma
# measured 0.13 ms a compile on the JSON Schema Store sample.
_COUNT_BEFORE = re.compile(r'(?:"(?:min|max)(?:Length|Items|Properties|Contains)"\s*:|\{|,)\s*$')
_CLOSES_AFTER = re.compile(r"\s*\}")
_DIGITS_AS_9 = str.maketrans("012345678", "999999999")  # runs of digits found by str.find: 20x a \d{5,} scan
_overrun: Callable[[UserError], None] | None = None


def set_overrun_handler(handler: Callable[[UserError], None] | None) -> None:
    """What to do when a main-thread compile passes the timeout: the CLI's process entry reports the
    limit and ends the process (exit 2). Without a handler every in-process compile uses the compile
    thread. A hand-off to another thread waits for the scheduler twice: on a loaded machine that
    measured more than the compile itself (llguidance p50 3.2 ms through the thread, 0.4 ms without)."""
    global _overrun
    _overrun = handler


@contextmanager
def each_on_its_own(many: bool = True):
    """While a command works through several inputs (files, backends), a compile past its limit is
    given up on the compile thread and reported for its own input, and the others go on: the main
    thread's watchdog (`set_overrun_handler`) would end the whole run at the first. `many` False:
    one input, whose limit may end the run (no hand-off to the compile thread to pay)."""
    global _overrun
    before = _overrun
    if many:
        _overrun = None
    try:
        yield
    finally:
        _overrun = before


class CompileLimitError(UserError):
    """A compile ran into a limit: exit 2 naming the limit and the flag that raises it."""

    def __init__(self, message: str, flag: str):
        super().__init__(
            f"{message}; the compile was stopped",
            hint=f"raise the limit with {flag} (0 turns it off), or simplify the constraint",
        )
        self.flag = flag


def fits_in_process(spec: ConstraintSpec) -> bool:
    """A constraint the backends that compile in process can compile here: no repetition count or
    length bound past SMALL_COUNT (in a JSON Schema a count keyword's value or a quantifier, elsewhere
    every number in the text), and short enough for the compile thread's stack whatever its nesting.
    Asked twice a compile (the cache, then the compile): the last answer is kept."""
    if _text_bytes(spec) * STACK_PER_BYTE > _Worker.stack_bytes():
        return False
    global _last_fit
    last_spec, last_fits = _last_fit  # one read: another thread may replace it
    if last_spec is spec:
        return last_fits
    fits = not any(n > SMALL_COUNT for part in _parts(spec) for n in _counts(part))
    _last_fit = (spec, fits)
    return fits


_last_fit: tuple = (None, False)  # (spec, fits_in_process's answer for it)


def _counts(part: ConstraintSpec):
    text = part.text
    nines = text.translate(_DIGITS_AS_9)  # every digit a 9: a run of 5 is a "99999", found by str.find
    at = nines.find("99999")
    json_schema = at >= 0 and part.kind is Kind.JSON_SCHEMA and "\\u00" not in text  # escaped brace, comma: all
    while at >= 0:  # `at` starts a run of digits: the first "99999" past the previous run's end
        end = at + 5
        while end < len(nines) and nines[end] == "9":
            end += 1
        before = _COUNT_BEFORE.search(text, max(0, at - 40), at) if json_schema else True
        if before and (not json_schema or before.group().lstrip()[:1] != "," or _CLOSES_AFTER.match(text, end)):
            yield int(text[at:end]) if end - at < 19 else 10**19  # no int() of a 5,000-digit run
        at = nines.find("99999", end)


def _parts(spec: ConstraintSpec):
    return (spec, *(sub for _, sub in spec.subgrammars))


def _text_bytes(spec: ConstraintSpec) -> int:
    return sum(len(part.text) for part in _parts(spec))


def _main_stack_bytes() -> int:
    """The main thread's stack limit (RLIMIT_STACK; 8 MiB where it is unlimited or unknown)."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
    except (OSError, ValueError):
        return 8 << 20
    return 8 << 20 if soft == resource.RLIM_INFINITY else soft


def compile_bounded(backend, spec: ConstraintSpec, vocab, *, trusted: bool = False):
    """`backend.compile(spec, vocab)` under the current limits, once; a limit is a CompileLimitError.
    `trusted`: this grammar already passed a bounded compile well within today's limits."""
    limits = current_limits()
    check_size(spec, limits)
    check_read_as_written(spec)
    if spec.kind in (Kind.LARK, Kind.STRUCTURAL_TAG):  # a schema written inside: valid, or exit 2 at its keyword
        from sgcli.dialects.embedded import check_embedded

        check_embedded(spec)
    if spec.kind is Kind.NONE:
        return backend.compile(spec, vocab)
    if not (limits.timeout_s or limits.memory_mb):  # limits off: in this process, still on a stack that holds it
        return _compile_watched(backend, spec, vocab, limits)
    backend.prepare(vocab)
    if trusted or (backend.capabilities.compiles_in_process and fits_in_process(spec)):
        return _compile_watched(backend, spec, vocab, limits, trusted=trusted)
    return _compile_in_child(backend, spec, vocab, limits)


def check_read_as_written(spec: ConstraintSpec) -> None:
    """A spelling no backend reads as written (`NotReadAsWritten`: a count past 2**32, an escape past
    U+10FFFF) is exit 2 at its place, before any backend sees it: xgrammar wrapped such a count around
    silently, and Python's re raised (exit 3)."""
    for _, part in ((None, spec), *spec.subgrammars):
        found = _not_read_as_written(part.kind, part.text)
        if found is not None:
            message, pos, hint = found
            line = part.text.count("\n", 0, pos) + 1
            col = pos - (part.text.rfind("\n", 0, pos) + 1) + 1
            raise ConstraintError(message, location=part.where(line, col), hint=hint or "fix it at that position")


@functools.lru_cache(maxsize=64)
def _not_read_as_written(kind: Kind, text: str) -> tuple[str, int, str | None] | None:
    """(message, offset, hint) of the first spelling sgcli's reader refuses as read by no backend as written, else
    None (a text it cannot follow for another reason is the backend's to judge)."""
    from sgcli.dialects.grammar_model import NotReadAsWritten, ParseError

    readers = {Kind.EBNF: "sgcli.dialects.gbnf:parse_gbnf", Kind.LARK: "sgcli.dialects.lark:parse_lark"}
    readers[Kind.REGEX] = "sgcli.dialects.regex_parse:parse_regex"
    if kind not in readers:
        return None
    module, _, name = readers[kind].partition(":")
    try:
        getattr(importlib.import_module(module), name)(text)
    except NotReadAsWritten as exc:
        return exc.message, exc.pos, exc.hint
    except (ParseError, RecursionError):
        return None
    return None


def _compile_watched(backend, spec: ConstraintSpec, vocab, limits: Limits, *, trusted: bool = False):
    """The compile in this process: on the calling thread (the main thread, under the watchdog) where
    that is allowed and its stack holds the constraint, else on the compile thread, which the caller
    waits for up to the time limit. A compile that outlives it is left to finish on its own (these
    compiles end, their work growing with the constraint; a first mask that never ends runs until the
    process does, which the CLI ends after the run), its thread is given up, and the limit reported.
    A trusted grammar passed a forked child's compile on the stack of the thread that forked."""
    handler = _overrun
    masking: list[bool] = []  # set once the compile itself is done and its first mask is being filled
    needs = _text_bytes(spec) * STACK_PER_BYTE
    fits_here = trusted or needs <= _main_stack_bytes()  # a thread's default stack is RLIMIT_STACK too
    if fits_here and not limits.timeout_s:
        return _compile(backend, spec, vocab, masking)
    on_main = threading.current_thread() is threading.main_thread()
    if fits_here and handler is not None and on_main and limits.timeout_s >= MAIN_THREAD_MIN_S:
        with (
            _compile_lock,
            _Watchdog.armed(
                limits.timeout_s, lambda: handler(_limit_error(LimitHit("time"), backend.name, spec, limits, masking))
            ),
        ):
            return _compile(backend, spec, vocab, masking)
    with _compile_lock:  # no fork of ours happens while the compile thread is inside a grammar library
        worker = _Worker.current()
        if not trusted and needs > _Worker.stack_bytes() and (limits.timeout_s or limits.memory_mb):
            return _compile_in_child(backend, spec, vocab, limits)  # its stack could not be had (ulimit -v)
        box = worker.run(lambda: _compile(backend, spec, vocab, masking), limits.timeout_s or None)
    if box is None:  # the compile left running still holds its capture of fd 2 (native_stderr): what
        give_back_fd2()  # follows is for the user (`generate` ended with exit 2 and not a word, 2026-12-07)
        raise _limit_error(LimitHit("time"), backend.name, spec, limits, masking)
    if "error" in box:
        raise box["error"]
    return box["value"]


def _compile(backend, spec: ConstraintSpec, vocab, masking: list[bool] | None = None):
    """`backend.compile` and its first mask (`Compiled.first_step`), both under the compile's limits: a
    library whose first mask never ends (llguidance on `start: /a+/ "a"`, memory growing to GBs) is a
    compile past --compile-timeout, never a command that hangs at its first step. Where a forked child
    compiled, the parent's own compile fills it when first asked: the child's pass bounds it.
    `masking` hears when the mask starts, for the limit's message."""
    compiled = backend.compile(spec, vocab)
    if masking is not None:
        masking.append(True)
    compiled.first_step()
    return compiled


class _Worker:
    """One long-lived compile thread per process (starting a thread per compile measured more than a
    small compile); replaced when a compile outlives its limit, or in a forked child, which has none."""

    _current: _Worker | None = None
    _stack = WORKER_STACK  # the stack its threads get; the default where that cannot be had

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        try:
            self._start(self.stack_bytes())
        except (ValueError, RuntimeError):  # no such stack here (ulimit -v): the default, and what fits it
            _Worker._stack = _main_stack_bytes()
            self._start(0)

    def _start(self, stack: int) -> None:
        previous = threading.stack_size(stack)
        try:
            threading.Thread(target=self._loop, name="sgcli-compile", daemon=True).start()
        finally:
            threading.stack_size(previous)

    @classmethod
    def stack_bytes(cls) -> int:
        return cls._stack

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
        _given_up.append(done)
        return None


_given_up: list[threading.Event] = []  # the `done` of each compile left running past its limit


def compiles_left_running() -> bool:
    """Whether a compile given up at its limit still runs on its thread. Python's exit must not wait for
    it nor finalize under it: xgrammar, torn down beneath its own compile, aborted the process (exit
    134 after the limit's exit-2 message; `cli.launch` ends such a process at once)."""
    return any(not done.is_set() for done in _given_up)


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
            compiled = _compile(backend, spec, vocab)
        except UserError as exc:  # a refusal comes back as itself; another kind the parent meets again
            return {"compiled": False, "refusal": exc.as_json() if _plain(exc) else None}
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
        refusal = reply.get("refusal") if isinstance(reply, dict) else None
        if refusal:  # the child's positioned error: not a second compile to find it again
            raise UserError.from_json(refusal)
        return backend.compile(spec, vocab)  # a Python exception in the child happens again here, traceback and all


def _plain(exc: UserError) -> bool:
    """Whether `as_json` carries `exc` whole: a plain UserError, nothing but its message, place and
    hint. Any other the parent meets again by compiling, where it surfaces as itself."""
    return type(exc) is UserError and not set(vars(exc)) - {"message", "location", "hint"}


def _limit_error(
    hit: LimitHit, backend_name: str, spec: ConstraintSpec, limits: Limits, masking: list[bool] | None = None
) -> UserError:
    what = f"compiling the {spec.kind.label}" + (f" of {spec.origin}" if spec.origin else "") + f" with {backend_name}"
    if masking:  # it compiled: the library's first token mask is what did not end
        what += " (its first token mask, after the grammar itself compiled)"
    if hit.kind == "time":
        return CompileLimitError(f"{what} took longer than the {limits.timeout_s:g} s time limit", "--compile-timeout")
    if hit.kind == "memory":
        return CompileLimitError(f"{what} needed more than the {limits.memory_mb} MB memory limit", "--compile-memory")
    return UserError(
        f"{what} crashed the grammar library" + (f": {hit.detail}" if hit.detail else ""),
        hint="a bug in the grammar library, not in your constraint alone; try another --backend",
    )
