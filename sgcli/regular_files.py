"""Reading a file only when it is a regular one, and only up to a size: a FIFO left where a file was
expected would wait for a writer forever, and a huge file would be read whole. Low in the layers, so the
configuration reader and the cache readers share the one reader."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class NotARegularFile(OSError):
    """A path that holds a FIFO, a device or a folder where a file was expected."""


class FileTooLarge(OSError):
    """A file past the size limit its reader set."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket"


def read_regular(path: Path, limit: int = 0) -> bytes:
    """The bytes of a file, read only when it is a regular file: opened without blocking (a FIFO left in
    the cache would wait for a writer forever, past every time limit) and checked before any read.
    Anything else raises NotARegularFile, an OSError, which cache readers take as a damaged entry;
    past `limit` bytes (0: none), FileTooLarge, after reading one byte more than it."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFile(errno.EINVAL, f"{_kind(mode)}, not a regular file", str(path))
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1 if limit else -1)
    finally:
        os.close(fd)
    if limit and len(data) > limit:
        raise FileTooLarge(errno.EFBIG, f"over the limit of {limit:,} bytes", str(path))
    return data
