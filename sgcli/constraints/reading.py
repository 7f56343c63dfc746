"""Reading what the user gives, bounded: files, stdin and JSONL lines, each read no further than its
size limit (so `/dev/zero` or a 10 GB file fails in milliseconds), every failure an exit 2 naming the
path, the line and the flag that raises the limit.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from sgcli.errors import Location, UserError
from sgcli.limits import current_limits
from sgcli.lone_surrogates import lone_surrogate

UTF8_BOM = b"\xef\xbb\xbf"

_stdin_read_as: list[str] = []  # what '-' was read as by the running command: stdin can be read once


def forget_stdin() -> None:
    """A new command starts (`cli.common.handles_errors`): nothing of stdin has been read yet."""
    _stdin_read_as.clear()


def read_text(
    path: str, *, what: str = "file", limit: int | None = None, flag: str = "--max-constraint-bytes"
) -> tuple[str, str]:
    """(text, origin) of a path, or of stdin for '-', bounded as `read_bytes` is. A UTF-8 byte order
    mark (Windows editors write one; RFC 8259 lets a reader ignore it) is dropped."""
    data, origin = read_bytes(path, what=what, limit=limit, flag=flag)
    _refuse_utf16(data, what, origin)
    try:
        return data.removeprefix(UTF8_BOM).decode("utf-8"), origin
    except UnicodeDecodeError as exc:
        line, col = _byte_line_col(data, exc.start)
        raise UserError(
            f"{what} is not UTF-8 text", location=Location(origin, line, col), hint="save the file as UTF-8"
        ) from None


def _refuse_utf16(head: bytes, what: str, origin: str) -> None:
    """A UTF-16 or UTF-32 file (Windows' "Unicode" saves one, byte order mark first) is one message at its
    start, not an error for every line of a batch (each of which held NULs between its characters)."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")):
        raise UserError(
            f"{what} is UTF-16 or UTF-32 text (its byte order mark says so): sgcli reads UTF-8",
            location=Location(origin, 1, 1),
            hint="save it as UTF-8 (iconv -f UTF-16 -t UTF-8 FILE > NEW)",
        )


def read_bytes(
    path: str, *, what: str = "file", limit: int | None = None, flag: str = "--max-constraint-bytes"
) -> tuple[bytes, str]:
    """(bytes, origin) of a path, or of stdin for '-'; unreadable paths are the user's to fix.

    At most `limit` bytes are read (default: --max-constraint-bytes; 0 = no limit): one byte
    more is exit 2 naming `flag`, so /dev/zero or a 10 GB file fails in milliseconds."""
    limit = current_limits().max_bytes if limit is None else limit
    with open_input(path, what=what) as (stream, origin):
        data = _read(stream, limit + 1 if limit else -1)
    if limit and len(data) > limit:
        raise over_limit(what, origin, limit, flag, size=_size(path))
    return data, origin


@dataclass(frozen=True)
class LongLine:
    """A line over the limit, in `read_lines`'s list in its place: its reader answers it alone (a batch's
    error record) while the other lines go on."""

    limit: int
    flag: str

    def message(self) -> str:
        return f"the line is over the limit of {self.limit:,} bytes (raise it with {self.flag}; 0 turns it off)"


SKIP_BYTES = 64 << 20  # past a long line, how far its newline is looked for before the file counts as one line


def read_lines(path: str, *, what: str, limit: int, flag: str) -> tuple[list[bytes | LongLine], str]:
    """(lines without their newline, origin) of a path or stdin, read line by line. A line longer than
    `limit` bytes (0 = no limit) is a `LongLine` in its place, its rest skipped; where no newline follows
    within `SKIP_BYTES` (a file without newlines, like /dev/zero), exit 2 at its line number, naming `flag`,
    and nothing after it is read."""
    lines: list[bytes | LongLine] = []
    with open_input(path, what=what) as (stream, origin):
        while True:
            line = _readline(stream, limit + 1 if limit else -1)
            if not line:
                return lines, origin
            if not lines:
                _refuse_utf16(line, what, origin)
            if line.endswith(b"\n"):
                line = line[:-1]
            elif limit and len(line) > limit:
                if not _skip_line(stream):
                    raise over_limit(f"this line of the {what}", origin, limit, flag, line=len(lines) + 1)
                line = LongLine(limit, flag)
            lines.append(line)


def _skip_line(stream) -> bool:
    """Read past the rest of the current line: whether its newline (or the end) came within SKIP_BYTES."""
    left = SKIP_BYTES
    while left > 0:
        chunk = _readline(stream, min(left, 1 << 20))
        if not chunk or chunk.endswith(b"\n"):
            return True
        left -= len(chunk)
    return False


def over_limit(what: str, origin: str, limit: int, flag: str, *, size: int | None = None, line: int | None = None):
    """The one exit-2 error for input past a size limit: what, where, the limit and the flag that raises it."""
    env = "SGCLI_" + flag.removeprefix("--").replace("-", "_").upper()  # every limit flag reads SGCLI_<FLAG>
    total = f" ({size:,} bytes)" if size else ""
    return UserError(
        f"{what} is over the limit of {limit:,} bytes{total}",
        location=Location(origin, line),
        hint=f"raise the limit with {flag} or {env} (0 turns it off)",
    )


@contextlib.contextmanager
def open_input(path: str, *, what: str = "file"):
    """(binary stream, origin) of a path, or of stdin for '-'; open errors become exit 2 naming the path."""
    if path == "-":
        yield _stdin(what), "<stdin>"
        return
    if not path:  # Path("") is ".": "is a directory" named nothing the user typed
        raise UserError(f"{what}: the path is empty", hint="give a file's path, or - for stdin")
    p = Path(path).expanduser()
    try:
        stream = _open_fifo(p) if _is_fifo(p) else p.open("rb")
    except FileNotFoundError:
        raise UserError(f"{what} not found: {path}", hint="check the path") from None
    except IsADirectoryError:
        raise UserError(f"{what} is a directory, not a file: {path}") from None
    except OSError as exc:
        raise UserError(f"cannot read {what} {path}: {exc.strerror}") from None
    with stream:
        try:
            yield stream, str(path)
        except OSError as exc:  # EISDIR on read, EIO...
            if exc.errno == errno.EISDIR:
                raise UserError(f"{what} is a directory, not a file: {path}") from None
            raise UserError(f"cannot read {what} {path}: {exc.strerror}") from None


def join_surrogate_pairs(text: str) -> str:
    """`text` with each surrogate pair made the one character it escapes (a lone surrogate stays): JSON
    joins `"\\ud83d\\ude00"`, PyYAML keeps two halves, which `lone_surrogate` would refuse."""
    if lone_surrogate(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def json_surrogate_col(line: str) -> int | None:
    """1-based column of the first `\\uXXXX` escape in a JSON text that decodes to a lone surrogate."""
    i = 0
    while (i := line.find("\\", i)) >= 0:
        code = line[i + 1 : i + 6]
        if code[:1] == "u" and len(code) == 5 and _hex(code[1:]) is not None:
            high, low = _hex(code[1:]), _hex(line[i + 8 : i + 12]) if line[i + 6 : i + 8] == "\\u" else None
            if 0xDC00 <= high <= 0xDFFF or (0xD800 <= high < 0xDC00 and not (low and 0xDC00 <= low <= 0xDFFF)):
                return i + 1
            i += 12 if 0xD800 <= high < 0xDC00 else 6
        else:
            i += 2  # an escaped character, "\\\\" included
    return None


def _hex(digits: str) -> int | None:
    try:
        return int(digits, 16) if len(digits) == 4 else None
    except ValueError:
        return None


def stdin_closed(what: str) -> UserError:
    """The error for '-' when stdin was closed at start (`<&-`, a daemon): sys.stdin is None."""
    return UserError(f"the {what} is '-' (stdin), but stdin is closed", hint="pipe it in, or give a file")


def _stdin(what: str):
    """The binary stdin for '-', read at most once per command: a second '-' would see only what the
    first left (nothing), and a closed stdin (`<&-`, a daemon) has nothing to read. Both are exit 2."""
    stream = getattr(sys.stdin, "buffer", sys.stdin)
    if stream is None:
        raise stdin_closed(what)
    if _stdin_read_as:
        raise UserError(
            f"the {what} is '-' (stdin), but stdin is already read as the {_stdin_read_as[0]}",
            hint="only one input can come from stdin: put the other in a file",
        )
    _stdin_read_as.append(what)
    return stream


def _read(stream, n: int) -> bytes:
    data = stream.read(n)
    return data.encode("utf-8") if isinstance(data, str) else data  # a text-only stdin (embedding, tests)


def _is_fifo(path: Path) -> bool:
    try:
        return stat.S_ISFIFO(path.stat().st_mode)
    except OSError:
        return False  # the open says what is wrong


def _open_fifo(path: Path):
    """A named pipe, opened without waiting for a writer (a plain open blocked until one came: `sgcli lint
    p.gbnf` on a pipe nothing writes to hung, 2026-12-06), then read blocking: with a writer, as it writes
    (`<(cmd)`); with none, empty at once."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _readline(stream, n: int) -> bytes:
    data = stream.readline(n)
    return data.encode("utf-8") if isinstance(data, str) else data


def _size(path: str) -> int | None:
    """The size of a regular file (to say by how much it is over), else None."""
    if path == "-":
        return None
    try:
        st = Path(path).expanduser().stat()
    except OSError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def _byte_line_col(data: bytes, offset: int) -> tuple[int, int]:
    """1-based line and byte column of a byte offset."""
    line = data.count(b"\n", 0, offset) + 1
    return line, offset - (data.rfind(b"\n", 0, offset) + 1) + 1
