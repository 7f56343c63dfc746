"""Capture what native code writes to file descriptor 2.

Grammar libraries log warnings from C++/Rust straight to fd 2, bypassing Python's
sys.stderr. Left alone they leak into the user's terminal or JSONL. This redirects fd 2
into a temporary file for the duration of a block and hands back the lines.

The temporary files are kept for the next capture (emptied, one per capture in progress):
creating one measured 25-40 us, more than some compiles it wrapped (llguidance: 50 us).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator

from sgcli.limits import in_bounded_child

_spare: list[int] = []  # descriptors of emptied capture files of this process, ready for the next capture
_spare_pid = 0  # a forked child shares its parent's files (and their offsets): it makes its own
_saved: list[int] = []  # fd 2 as it was before each capture in progress, outermost first


def give_back_fd2() -> None:
    """fd 2 as it was before any capture in progress: for a process about to end itself in the middle
    of one (a compile past --compile-timeout), whose last message would otherwise go to a capture file."""
    if _saved:
        os.dup2(_saved[0], 2)


def capture_fd2() -> contextlib.AbstractContextManager[list[str]]:
    """fd 2's lines written during the block (the list fills when it ends)."""
    return _capture_in_log() if in_bounded_child() else _capture_to_file()


@contextlib.contextmanager
def _capture_in_log() -> Iterator[list[str]]:
    """In a bounded child fd 2 already is the log its parent reads if the child dies: captured there, in
    place, so that the last words of a library that aborts the process reach the parent (Rust's `memory
    allocation of N bytes failed` under --compile-memory, lost with a capture file of the child's own,
    was reported as a crash of the library). Read back and cut off when the block ends."""
    lines: list[str] = []
    _flush_stderr()
    start = os.lseek(2, 0, os.SEEK_CUR)
    try:
        yield lines
    finally:
        lines.extend(_take_lines(2, start))


@contextlib.contextmanager
def _capture_to_file() -> Iterator[list[str]]:
    global _spare, _spare_pid
    lines: list[str] = []
    _flush_stderr()
    if _spare_pid != os.getpid():
        _spare, _spare_pid = [], os.getpid()
    try:
        fd = _spare.pop()
    except IndexError:
        fd, path = tempfile.mkstemp(prefix="sgcli-fd2-")
        os.unlink(path)  # open, nameless: gone with the process
    saved = os.dup(2)
    _saved.append(saved)
    os.dup2(fd, 2)
    try:
        yield lines
    finally:
        os.dup2(saved, 2)
        _saved.remove(saved)
        os.close(saved)
        lines.extend(_take_lines(fd, 0))
        _spare.append(fd)


def _flush_stderr() -> None:
    try:
        sys.stderr.flush()
    except Exception:  # a closed or odd stderr must not break compilation
        pass


def _take_lines(fd: int, start: int) -> list[str]:
    """The non-blank lines written to `fd`'s file from `start` to its offset, which are then cut off."""
    size = os.lseek(fd, 0, os.SEEK_CUR) - start  # fd 2 wrote through the same file offset
    data = b""
    if size > 0:
        os.lseek(fd, start, os.SEEK_SET)
        while len(data) < size:
            chunk = os.read(fd, size - len(data))
            if not chunk:
                break
            data += chunk
        os.ftruncate(fd, start)
        os.lseek(fd, start, os.SEEK_SET)
    return [line for line in data.decode("utf-8", errors="replace").splitlines() if line.strip()]
