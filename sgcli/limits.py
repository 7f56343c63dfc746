"""Work that cannot take the process down: a forked child under a time limit and an address-space ceiling.

Grammar compiles (`backends/bounded.py`), cache serialization and chat-template renders run here.
Why a child and not a thread: the grammar libraries release the GIL while they work, so a daemon
thread *could* be timed out, but it cannot be stopped or given a memory ceiling - an abandoned
outlines-core compile of `a{1,1000000}` keeps a core busy and grows past 4 GB until the process
exits. Measurements and the trade-off: docs/limits.md.
"""

from __future__ import annotations

import faulthandler
import json
import os
import select
import signal
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sgcli.bounds import check_setting

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MEMORY_MB = 4096
DEFAULT_MAX_BYTES = 1 << 20  # the largest schema in the project's corpora is 130 KB
# One --input line or stdin prompt: a 128k-token prompt is ~0.5 MB of text, ~2 MB as \u-escaped JSON
DEFAULT_MAX_PROMPT_BYTES = 4 << 20


@dataclass(frozen=True)
class Limits:
    timeout_s: float = DEFAULT_TIMEOUT_S  # 0: no time limit
    memory_mb: int = DEFAULT_MEMORY_MB  # 0: no memory ceiling
    max_bytes: int = DEFAULT_MAX_BYTES  # 0: no size limit


def _env_limits() -> Limits:
    """The defaults, or the SGCLI_COMPILE_* variables (the CLI's flags read them too), so code that
    compiles without the CLI (tests, embedding) follows the same settings."""

    def read(name: str, kind, default):
        try:
            return kind(os.environ[name])
        except (KeyError, ValueError):
            return default

    return Limits(
        read("SGCLI_COMPILE_TIMEOUT", float, DEFAULT_TIMEOUT_S),
        read("SGCLI_COMPILE_MEMORY", int, DEFAULT_MEMORY_MB),
        read("SGCLI_MAX_CONSTRAINT_BYTES", int, DEFAULT_MAX_BYTES),
    )


_limits = _env_limits()


def set_limits(limits: Limits) -> None:
    """Set the limits for every later compile in this process (the CLI does, from its flags)."""
    global _limits
    check_setting("compile-timeout", limits.timeout_s)
    check_setting("compile-memory", limits.memory_mb)
    check_setting("max-constraint-bytes", limits.max_bytes)
    _limits = limits


def current_limits() -> Limits:
    return _limits


_DEEP_STACK_BYTES = 64 << 20
_deep_lock = threading.Lock()


def deep_call(fn: Callable[[], object], *, frames: int) -> object:
    """`fn()` with room for `frames` Python frames: in a thread with a 64 MB stack and the recursion
    limit raised for its duration. For third-party code that recurses per level of input whose depth
    sgcli has already bounded (jsonschema's meta-validation takes ~10 frames per schema level)."""
    if frames <= sys.getrecursionlimit() // 2:
        return fn()
    result: dict[str, object] = {}

    def run() -> None:
        try:
            result["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            result["error"] = exc

    with _deep_lock:  # the recursion limit is the interpreter's: one deep call at a time
        old_size, old_limit = threading.stack_size(), sys.getrecursionlimit()
        threading.stack_size(_DEEP_STACK_BYTES)
        try:
            sys.setrecursionlimit(max(old_limit, frames + 200))
            thread = threading.Thread(target=run, name="sgcli-deep-call")
            try:
                thread.start()
            except RuntimeError:  # no thread to be had (an address-space ceiling): here, as deep as it goes
                run()
            else:
                thread.join()
        finally:
            threading.stack_size(old_size)
            sys.setrecursionlimit(old_limit)
    if "error" in result:
        raise result["error"]
    return result.get("value")


class LimitHit(Exception):
    """`run_bounded`'s child ran past a limit: `kind` is 'time' or 'memory'."""

    def __init__(self, kind: str, detail: str = ""):
        super().__init__(kind)
        self.kind = kind
        self.detail = detail


_MEMORY_WORDS = ("bad_alloc", "memory allocation", "MemoryError", "out of memory", "Cannot allocate memory")


# The child's own timer fires this long after the parent's deadline, so that a parent reading in time
# always reports the limit itself (and kills the child), with its own wording.
_CHILD_GRACE_S = 1.0


def run_bounded(fn: Callable[[], object], *, timeout_s: float, memory_mb: int) -> object:
    """Run `fn` in a forked child with a time limit and an address-space ceiling; returns what
    `fn` returned (JSON-able, or bytes, sent as they are). Raises LimitHit('time' | 'memory' |
    'crash') when the child ran past a limit or died; any other exception of `fn` comes back as
    LimitHit('raised', its text)."""
    return start_bounded(fn, timeout_s=timeout_s, memory_mb=memory_mb).result()


def start_bounded(fn: Callable[[], object], *, timeout_s: float, memory_mb: int, helper: bool = False) -> Bounded:
    """`run_bounded`, started now and collected later: the caller works on while the child runs
    (on another core), then `result()` waits for it. The time limit counts from now. `helper`: one
    of the children a command starts early and collects later (the weights, chat templates), which
    take turns on a machine of 2 cores or fewer (HELPER_WAIT_S)."""
    return Bounded(fn, timeout_s, memory_mb, helper)


# Helpers take turns on 2 cores: each starts its work once the helper started before it has finished
# (or after HELPER_WAIT_S), so that two of them never take the main process's core too. Measured on
# a 2-core Zen 5 (`benchmarks/startup.py --rounds 8 --generate`, against the commit before), warm
# `generate` to its first byte: 1.645 s median with the chat template's render waiting for the
# weights' dequantization, 1.838 s with both at once. A waiting helper's time limit counts from the
# end of its wait; the caller allows for the wait (only where there is one: the helper before is
# still at work).
HELPER_WAIT_S = 5.0
_helper_done: int | None = None  # read end: EOF once the last helper started has finished its work


def _helper_running() -> bool:
    """Whether the last helper started is still at its work (its end of the pipe not yet closed)."""
    return _helper_done is not None and not select.select([_helper_done], [], [], 0)[0]


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class Bounded:
    """A forked child's work in progress (`start_bounded`); `result()` once, or `cancel()`."""

    def __init__(self, fn: Callable[[], object], timeout_s: float, memory_mb: int, helper: bool = False):
        global _helper_done
        after = _helper_done if helper and _helper_running() and _usable_cores() <= 2 else None
        waits = HELPER_WAIT_S if after is not None else 0.0
        self._deadline = time.monotonic() + waits + timeout_s if timeout_s else None
        self._value: object = None
        self._pid = 0
        if not hasattr(os, "fork"):
            self._value = fn()  # no fork (Windows): unbounded, as documented in docs/limits.md
            return
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # else HF tokenizers warns at fork
        _reap_exited()
        self._read_fd, write_fd = os.pipe()
        done_r, done_w = os.pipe() if helper else (None, None)
        self._stderr = tempfile.TemporaryFile()
        self._pid = os.fork()
        if self._pid == 0:  # the child: never returns
            os.close(self._read_fd)
            if done_r is not None:
                os.close(done_r)
            _child(fn, write_fd, self._stderr.fileno(), memory_mb, timeout_s, after, done_w)
        os.close(write_fd)
        if done_r is not None:  # only the child holds the write end: EOF when its work is done, or it died
            os.close(done_w)
            if _helper_done is not None:
                os.close(_helper_done)
            _helper_done = done_r

    def result(self) -> object:
        if not self._pid:
            return self._value
        pid, self._pid = self._pid, 0
        data = None
        try:
            data = _read_until_eof(self._read_fd, self._deadline)
        except BaseException:  # the time limit, or Ctrl-C in the parent: the child goes too
            os.kill(pid, signal.SIGKILL)
            raise
        finally:
            os.close(self._read_fd)
            reply = _framed(data)
            if reply is not None:  # a whole reply: the exit status adds nothing, so the exit is not waited for
                status = 0
                if not os.waitpid(pid, os.WNOHANG)[0]:
                    _exiting.append(pid)
            else:
                _, status = os.waitpid(pid, 0)  # EOF came: the child is exiting (or was just killed)
            self._stderr.seek(0)
            log = self._stderr.read()[-4096:].decode("utf-8", "replace")
            self._stderr.close()
        return _outcome(reply if reply is not None else b"", status, log)

    def ready(self) -> bool:
        """Whether `result()` would answer without waiting for the child's work (its reply or its
        end has reached the pipe)."""
        if not self._pid:
            return True
        return bool(select.select([self._read_fd], [], [], 0)[0])

    def cancel(self) -> None:
        """Stop the child if it still runs (its work is no longer wanted)."""
        if self._pid:
            pid, self._pid = self._pid, 0
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(self._read_fd)
            self._stderr.close()


_log_pid = 0  # in a bounded child, its pid: its fd 2 is the log the parent reads when it dies


def in_bounded_child() -> bool:
    """Whether this process is a bounded child, whose fd 2 is the log its parent reads when it dies."""
    return _log_pid == os.getpid()


def _child(fn, write_fd: int, stderr_fd: int, memory_mb: int, timeout_s: float, after=None, done=None) -> None:
    global _log_pid
    code = 0
    try:
        os.dup2(stderr_fd, 2)
        _log_pid = os.getpid()
        faulthandler.disable()  # a native crash is reported by the parent, not dumped on the terminal
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
        if after is not None:  # a helper: the one started before it first (its EOF), or HELPER_WAIT_S
            select.select([after], [], [], HELPER_WAIT_S)
        if timeout_s:  # the child's own limit, for a parent that collects late or never (it died, or exits)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.setitimer(signal.ITIMER_REAL, timeout_s + _CHILD_GRACE_S)
        if memory_mb:
            _cap_address_space(memory_mb)
        try:
            reply = {"status": "ok", "value": fn()}
        except MemoryError:
            reply = {"status": "memory"}
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, which decides
            text = f"{type(exc).__name__}: {exc}"
            reply = {"status": "memory" if any(w in text for w in _MEMORY_WORDS) else "raised", "detail": text[:500]}
        if done is not None:
            os.close(done)  # the next helper may start
        value = reply.get("value")
        # bytes go through the pipe as they are (a compiled grammar: base64 in JSON cost more than the compile)
        payload = b"B" + value if isinstance(value, bytes) else b"J" + json.dumps(reply).encode()
        payload = struct.pack("<Q", len(payload)) + payload  # framed: the parent knows a whole reply from a cut one
        while payload:
            payload = payload[os.write(write_fd, payload) :]
        # EOF now, before the exit tears the address space down (10-25 ms after a large compile)
        os.close(write_fd)
    except BaseException:  # noqa: BLE001
        code = 70
    finally:
        os._exit(code)


def _cap_address_space(memory_mb: int) -> None:
    """RLIMIT_AS = what the child already maps (the parent's model, libraries) + the ceiling."""
    import resource

    try:
        with open("/proc/self/status") as f:
            vm_kb = next(int(line.split()[1]) for line in f if line.startswith("VmSize:"))
    except (OSError, StopIteration, ValueError):
        return  # no /proc: no ceiling rather than a wrong one
    cap = vm_kb * 1024 + memory_mb * (1 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _read_until_eof(fd: int, deadline: float | None) -> bytes:
    """The child's whole reply; LimitHit('time') once the deadline has passed with nothing left to read
    (a reply already waiting in the pipe is read however late the parent comes for it)."""
    chunks = []
    while True:
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            if deadline is not None and time.monotonic() >= deadline:
                raise LimitHit("time")
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _framed(data: bytes | None) -> bytes | None:
    """The reply inside the child's length frame; None when the child died before writing all of it."""
    if data is None or len(data) < 8 or struct.unpack("<Q", data[:8])[0] != len(data) - 8:
        return None
    return data[8:]


def _reap_exited() -> None:
    """Collect children that sent their whole reply and were left to exit on their own."""
    for pid in list(_exiting):
        try:
            done = os.waitpid(pid, os.WNOHANG)[0]
        except ChildProcessError:
            done = pid
        if done:
            _exiting.remove(pid)


_exiting: list[int] = []  # pids of such children not yet collected: reaped at the next fork


def _outcome(data: bytes, status: int, log: str) -> object:
    if data[:1] == b"B":
        return data[1:]
    try:
        reply = json.loads(data[1:]) if data else None
    except ValueError:
        reply = None
    if reply is not None and reply.get("status") == "ok":
        return reply.get("value")
    if reply is not None and reply.get("status") == "memory":
        raise LimitHit("memory", reply.get("detail", ""))
    if reply is None and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGALRM:
        raise LimitHit("time")  # the child's own timer (`_child`): the parent came after its deadline
    if reply is None and (any(w in log for w in _MEMORY_WORDS) or os.WIFSIGNALED(status) and os.WTERMSIG(status) == 9):
        raise LimitHit("memory", log.strip().splitlines()[-1] if log.strip() else "killed")
    if reply is not None:
        raise LimitHit("raised", reply.get("detail", ""))
    raise LimitHit("crash", _death(status, log))


def _death(status: int, log: str) -> str:
    last = log.strip().splitlines()[-1] if log.strip() else ""
    if os.WIFSIGNALED(status):
        return f"signal {signal.Signals(os.WTERMSIG(status)).name}" + (f" ({last})" if last else "")
    return f"exit status {os.WEXITSTATUS(status)}" + (f" ({last})" if last else "")
