"""stdout and stderr as a shell pipeline leaves them, handled once for every command.

A reader that leaves (`| head`, `| true`) used to end a run at the first line it missed: rich's
broken-pipe handler exits 1 (after pointing fd 1 at /dev/null even when stderr broke), and a
BrokenPipeError ended the command with exit 0, a lint finding or an invalid record notwithstanding.
Here a standard stream whose reader left swallows what is still written there (its fd now /dev/null),
so the command finishes the work and exits with the code it earned; a batch stops at the first record
nobody takes (`reader_gone`). A stream closed before the start (`>&-`, `2>&-`; Python's sys.stdout is
then None) gets /dev/null for its fd: a message that cannot be shown is dropped, and a result that has
nowhere to go is exit 2 naming the fix, at its first write.
"""

from __future__ import annotations

import io
import os
import sys


class _PipeEnd(io.FileIO):
    """fd 1 or 2, without closing it; once its reader has left, what is written goes to /dev/null."""

    reader_gone = False

    def write(self, data) -> int:
        if not self.reader_gone:
            try:
                return super().write(data)
            except BrokenPipeError:
                self.reader_gone = True
                _to_devnull(self.fileno())
        return len(memoryview(data))


class _PipeText(io.TextIOWrapper):
    """A standard stream on a `_PipeEnd`, with the text settings Python chose for it."""

    @property
    def reader_gone(self) -> bool:
        return getattr(self.buffer, "raw", self.buffer).reader_gone


class _ClosedStdout(io.TextIOBase):
    """stdout closed when sgcli started: the first result written there is exit 2, saying so."""

    closed_at_start = True

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        from sgcli.errors import UserError

        raise UserError("stdout is closed, so the result has nowhere to go", hint="redirect it: >FILE or >/dev/null")

    def isatty(self) -> bool:
        return False


def install() -> None:
    """Called first thing by the console script (in-process callers keep their own streams)."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        stream = getattr(sys, name)
        if stream is None:  # closed at start: hold the fd, so a file opened later cannot take its number
            if _fd_closed(fd):
                _to_devnull(fd)
            setattr(sys, name, _ClosedStdout() if fd == 1 else _devnull_text())
        elif _is_fd(stream, fd):
            setattr(sys, name, _pipe_text(stream, fd))


def _pipe_text(stream, fd: int) -> _PipeText:
    """As Python made it: buffered, or not (`python -u`, PYTHONUNBUFFERED: every write reaches the fd)."""
    stream.flush()
    raw = _PipeEnd(fd, "w", closefd=False)
    buffer = io.BufferedWriter(raw) if isinstance(stream.buffer, io.BufferedIOBase) else raw
    return _PipeText(
        buffer,
        encoding=stream.encoding,
        errors=stream.errors,
        line_buffering=stream.line_buffering,
        write_through=stream.write_through,
    )


def _devnull_text():
    return open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - sys.stderr for the whole run


def _is_fd(stream, fd: int) -> bool:
    """Whether `stream` is Python's own text stream over a plain file descriptor `fd` (never a Windows
    console's wide-character layer, whose replacement by bytes would garble what it shows)."""
    try:
        raw = getattr(stream.buffer, "raw", stream.buffer)
        return stream.fileno() == fd and isinstance(stream, io.TextIOWrapper) and type(raw) is io.FileIO
    except (OSError, ValueError, AttributeError):
        return False


def _fd_closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def _to_devnull(fd: int) -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    if devnull != fd:
        os.dup2(devnull, fd)
        os.close(devnull)
