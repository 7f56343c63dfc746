"""The lock a batch's output file is written under: one writer a file, never a file sgcli did not make.

`RecordWriter` (records.py) takes it before anything slow and gives it back at close; the kernel
drops it at process exit, even after a kill -9.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from sgcli.errors import UserError


class OutputLock:
    """An exclusive flock on `<output>.lock`, which holds the owner's pid, and one on the output file
    itself where it exists (a hard link or a bind mount is another name for it, which the lock file's
    name cannot know); released at close or at process exit (the kernel drops both even after a kill
    -9). A symbolic link or a file sgcli did not write at the lock's path is left alone (exit 2): it
    followed the link and wrote its pid over the target, and removed a user's own file of that name
    (a tour, 2026-12-07). Without fcntl (Windows) there is no lock."""

    def __init__(self, path: Path, fd: int, output_fd: int | None = None):
        self.path, self.fd, self.output_fd = path, fd, output_fd

    @classmethod
    def take(cls, output: Path) -> OutputLock | None:
        try:
            import fcntl
        except ImportError:  # Windows: no flock, no lock (said in the module docstring)
            return None
        path = Path(os.path.realpath(output) + ".lock")  # two names for one file share one lock
        while True:
            fd = _open_lock_file(output, path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                pid = _holder(fd)
                os.close(fd)
                raise _held(output, pid, path) from None
            if _same_file(fd, path):  # not a lock file its previous owner just removed
                break
            os.close(fd)
        lock = cls(path, fd)
        try:
            _check_own(fd, output, path)
        except UserError:
            lock.release(remove=False)  # not ours: left as it is
            raise
        try:
            lock.output_fd = _lock_output(output, fcntl)
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        except OSError as exc:  # a full disk (ENOSPC, EDQUOT): the output could not be written either
            lock.release()
            raise UserError(
                f"--output {output}: cannot write its lock file {path} ({exc.strerror or exc})",
                hint="choose an --output on a disk with free space",
            ) from None
        except UserError:
            lock.release()
            raise
        return lock

    def release(self, remove: bool = True) -> None:
        if remove:
            try:
                if _same_file(self.fd, self.path):  # ours: a waiting writer sees it gone and retries
                    self.path.unlink()
            except OSError:
                pass
        os.close(self.fd)
        if self.output_fd is not None:
            os.close(self.output_fd)


def _open_lock_file(output: Path, path: Path) -> int:
    """The lock file, opened without following a symbolic link, created if missing."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as exc:
        if os.path.islink(path):
            raise UserError(
                f"--output {output}: its lock file's path {path} is a symbolic link, which sgcli does not follow",
                hint="remove the link (sgcli makes that file itself), or choose another --output",
            ) from None
        raise UserError(
            f"--output {output}: cannot create its lock file {path} ({exc.strerror})",
            hint="choose an --output in a folder you can write to",
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UserError(
            f"--output {output}: its lock file's path {path} is not a regular file",
            hint="move it away (sgcli makes that file itself), or choose another --output",
        )
    return fd


def _check_own(fd: int, output: Path, path: Path) -> None:
    """A file at the lock's path holding anything but a pid is not sgcli's: never overwritten."""
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 4096)
    if text.strip() and not text.strip().isdigit():
        raise UserError(
            f"--output {output}: {path} already exists and is not sgcli's lock file (it holds other text)",
            hint="move that file away (sgcli keeps its lock there while it writes), or choose another --output",
        )


def _lock_output(output: Path, fcntl) -> int | None:
    """A flock on the output file itself, where it exists: a writer that reaches it by another name."""
    try:
        fd = os.open(os.path.realpath(output), os.O_RDONLY)
    except OSError:
        return None  # not there yet (or unreadable): the lock file's name is the lock
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise _held(output, None, None) from None
    return fd


def _held(output: Path, pid: str | None, path: Path | None) -> UserError:
    through = f"lock {path}" if path is not None else "through another name: a hard link or a mount"
    return UserError(
        f"--output {output} is being written by another sgcli process (pid {pid or 'unknown'}, {through})",
        hint="wait for that run to finish, or write to another --output; two writers would mix or repeat records",
    )


def _holder(fd: int) -> str | None:
    """The pid the lock file holds (its owner writes it right after locking: wait a moment for it)."""
    for _ in range(20):
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 64).decode("ascii", "replace").strip()
        if text:
            return text
        time.sleep(0.01)
    return None


def _same_file(fd: int, path: Path) -> bool:
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
