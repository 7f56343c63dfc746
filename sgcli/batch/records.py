"""Where batch records go: one writer for every command that emits JSONL records.

The writer is opened before anything slow loads, so a bad `--output` fails in
milliseconds; a write that fails later (disk full) is the user's to fix, not a crash.
With `resume`, the ids already answered in the file are read back (a partial last line
left by a killed process is cut off), and new records are appended.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import IO, Any

from sgcli import RECORD_SCHEMA_VERSION
from sgcli.errors import Location, UserError

REASONING_ONLY = ("reasoning", "think_budget")  # keys a record has only in --reasoning mode
LOCAL_ONLY = ("device", "dtype", "chat_template")  # keys of records the in-process model answered
# "engine": only records answered by a server (--engine)
_ONLY_WHERE_GIVEN = (*REASONING_ONLY, *LOCAL_ONLY, "engine")


def error_record(rid: Any, prompt: Any, errors: list[str], **context: Any) -> dict:
    """A record for a request that failed: the documented key set (sgcli/records/), nulls where
    nothing ran, `valid: false`, `finish_reason: error`; REASONING_ONLY, LOCAL_ONLY keys and `engine`
    only where the context has them."""
    from sgcli.records import GenerationRecord

    record = GenerationRecord(finish_reason="error", valid=False, errors=list(errors)).model_dump(mode="json")
    for key in _ONLY_WHERE_GIVEN:
        record.pop(key)
    record.update(id=rid, prompt=prompt, **context)
    return record


def id_key(rid: Any) -> str:
    """Ids are any JSON value; compare them by their canonical JSON text."""
    return json.dumps(rid, sort_keys=True, ensure_ascii=False)


class RecordWriter:
    """JSONL records to a file (or stdout), one flushed line each.

    The target is checked when the writer is made; the file itself is opened (and, without
    resume, emptied) only when the first line is written, so a run that fails while loading
    leaves an earlier output file as it was.
    """

    def __init__(self, path: Path | None, *, resume: bool = False):
        self.path = path
        self.resume = resume
        self.answered: set[str] = set()
        self.stream: IO[str] | None = sys.stdout if path is None else None
        if path is None:
            if resume:
                raise UserError("--resume needs --output FILE", hint="--resume appends to the file given with --output")
            return
        _check_target(path)
        if stat.S_ISCHR(_mode(path)):
            _probe_device(path)
        elif resume and path.exists():
            self.answered = _repair_and_read_ids(path)

    def skip(self, rid: Any) -> bool:
        """With resume: True when this id is already answered, else claims it (each id exactly once)."""
        if not self.resume:
            return False
        key = id_key(rid)
        if key in self.answered:
            return True
        self.answered.add(key)
        return False

    def write(self, record: dict) -> None:
        self.write_text(json.dumps(record, ensure_ascii=False) + "\n")

    def write_text(self, text: str) -> None:
        """Plain text (a streamed single generation), flushed at once."""
        try:
            stream = self._open()
            stream.write(text)
            stream.flush()
        except OSError as exc:
            if self.path is None:
                raise
            raise _write_error(self.path, exc) from None

    def close(self) -> None:
        """Flush and close; a run that wrote nothing still leaves its (empty) output file."""
        if self.path is None or (self.stream is not None and self.stream.closed):
            return
        try:
            self._open().close()
        except OSError as exc:
            raise _write_error(self.path, exc) from None

    def _open(self) -> IO[str]:
        if self.stream is None:
            assert self.path is not None
            self.stream = self.path.open("a" if self.resume else "w", encoding="utf-8")
        return self.stream


def _mode(path: Path) -> int:
    try:
        return path.stat().st_mode
    except OSError:
        return 0


def _write_error(path: Path, exc: OSError) -> UserError:
    return UserError(
        f"cannot write the output file {path}: {exc.strerror or exc}",
        hint="choose a writable --output path with free space",
    )


def _check_target(path: Path) -> None:
    """A directory, a missing folder or an unwritable file: exit 2 before the model loads."""
    if path.is_dir():
        raise UserError(f"--output {path} is a directory", hint="give a file path, e.g. --output results.jsonl")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UserError(f"--output {path}: the folder {parent} does not exist", hint=f"create it: mkdir -p {parent}")
    if path.exists() and not os.access(path, os.W_OK):
        raise UserError(f"--output {path} is not writable", hint="choose another path or fix its permissions")
    if not path.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"--output {path}: cannot create files in {parent}", hint="choose a writable folder")
    if not path.exists():  # permission bits say nothing for root or for /proc-like folders: try it
        import tempfile

        try:
            fd, probe = tempfile.mkstemp(dir=parent, prefix=".sgcli-probe-")
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise UserError(
                f"--output {path}: cannot create files in {parent} ({exc.strerror})", hint="choose a writable folder"
            ) from None


def _probe_device(path: Path) -> None:
    """A character device (not a terminal) must take one byte now: /dev/full fails here, not after the model."""
    try:
        with path.open("a", encoding="utf-8") as stream:
            if not stream.isatty():
                stream.write("\n")
                stream.flush()
    except OSError as exc:
        raise _write_error(path, exc) from None


def _repair_and_read_ids(path: Path) -> set[str]:
    """Ids answered in an earlier run's output; a partial last line (killed mid-write) is cut off.

    A record that ended in an error (a server that went away, a request that failed) is not an
    answer: it is dropped from the file, so the rerun answers that id again, exactly once."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    tail = lines.pop()  # bytes after the last newline: empty, or an unfinished line
    keep = len(data) - len(tail)
    if tail.strip():
        try:
            json.loads(tail)
            lines.append(tail)
            keep = len(data)
            with path.open("ab") as f:
                f.write(b"\n")  # a complete record that only lacked its newline
        except ValueError:
            pass
    if keep < len(data):
        with path.open("r+b") as f:
            f.truncate(keep)
    answered, kept, dropped = set(), [], 0
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            raise UserError(
                "--resume: this line of the output file is not a JSON record",
                location=Location(str(path), n, 1),
                hint="fix or delete the line, or rerun without --resume to start over",
            ) from None
        if not isinstance(record, dict) or "id" not in record:
            raise UserError(
                "--resume: this line of the output file has no 'id'",
                location=Location(str(path), n, 1),
                hint="--resume needs an output file written by sgcli",
            )
        if record.get("schema_version", RECORD_SCHEMA_VERSION) != RECORD_SCHEMA_VERSION:  # one file, one format
            raise UserError(
                f"--resume: this record is format {record.get('schema_version')!r}; this sgcli writes format "
                f"{RECORD_SCHEMA_VERSION!r} (see `sgcli schema record`)",
                location=Location(str(path), n, 1),
                hint="write to a new --output file, or rerun without --resume to start over",
            )
        if record.get("finish_reason") == "error":
            dropped += 1
            continue
        answered.add(id_key(record["id"]))
        kept.append(line)
    if dropped:
        _rewrite(path, kept)
    return answered


def _rewrite(path: Path, lines: list[bytes]) -> None:
    """Replace the output file by `lines`, atomically (a kill now leaves the old file whole)."""
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".resume")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(b"".join(line + b"\n" for line in lines if line.strip()))
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise _write_error(path, exc) from None
