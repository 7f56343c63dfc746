"""Where batch records go: one writer for every command that emits JSONL records.

Nothing the user already has is lost. The target is checked when the writer is made (a bad
`--output` fails in milliseconds), but the file is opened, and emptied or repaired, only when
the run can start (`open()`, or the first record): a run that fails while loading, or a server
that does not answer, leaves an earlier output as it was. An existing non-empty output needs
`--resume` (append the missing ids) or `--force` (start over), and a lock (`output_lock.py`: `<output>.lock`,
holding the writer's pid; none on Windows, which lacks flock) keeps a second writer off the same
file. With `resume`, the ids already answered are read back (a partial last line left by a
killed process is cut off, error records are dropped so their ids run again), and new records
are appended.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from sgcli import RECORD_SCHEMA_VERSION
from sgcli.batch.output_lock import OutputLock
from sgcli.errors import Location, UserError

REASONING_ONLY = ("reasoning", "think_budget")  # keys a record has only in --reasoning mode
# keys of records the in-process model answered (Session.placement): a server's records leave them out
LOCAL_ONLY = ("device", "dtype", "model_impl", "model_impl_reason", "kernel", "chat_template")
# "engine": only records answered by a server (--engine)
_ONLY_WHERE_GIVEN = (*REASONING_ONLY, *LOCAL_ONLY, "engine")
NOT_RUN = "nothing was generated, so nothing could be checked: see errors"  # an error record's `unchecked`


SERVER_TIMINGS = ("request_ms", "server_ms")  # timings only a server's records (--engine) carry


def error_record(rid: Any, prompt: Any, errors: list[str], **context: Any) -> dict:
    """A record for a request that failed before any output: the keys, in their order, of the records
    beside it (README: an error record has a normal record's keys), nulls where nothing ran
    (`valid: null`, `unchecked` saying why), `finish_reason: error`; REASONING_ONLY, LOCAL_ONLY keys,
    `engine` and SERVER_TIMINGS only where the context has them (a server's records, `engine` given)."""
    from sgcli.records import GenerationRecord

    record = GenerationRecord(finish_reason="error", valid=None, unchecked=NOT_RUN, errors=list(errors))
    record = record.model_dump(mode="json")
    record.update(id=rid, prompt=prompt, **context)  # in the record's order, as a normal record has them
    for key in _ONLY_WHERE_GIVEN:
        if key not in context:
            record.pop(key)
    if "engine" not in context:
        for key in SERVER_TIMINGS:
            record["timings"].pop(key)
    return record


def stop_cut_warning(stop: str, at: int) -> str:
    """Why an output that a --stop string ended does not validate: the stop string, not the model, cut it."""
    return (
        f"the --stop string {stop!r} ended the output at character {at}, before the constraint was complete: "
        "leave --stop out, or choose a string the constraint's text cannot hold"
    )


def id_key(rid: Any) -> str:
    """Ids are any JSON value; compare them by their canonical JSON text."""
    return json.dumps(rid, sort_keys=True, ensure_ascii=False)


ANY_PROMPT = object()  # `skip` without a prompt: any record of the id


def prompt_key(prompt: Any) -> str:
    """A line's prompt (text, or its messages) as its record keeps it, compared by canonical JSON text."""
    return json.dumps(prompt, sort_keys=True, ensure_ascii=False)


class RecordWriter:
    """JSONL records to a file (or stdout), one flushed line each.

    Made before anything slow: checks the target, takes the lock and (resume) reads the answered
    ids, changing nothing. `open()` (or the first line) truncates (`force`), creates, or applies
    the resume repairs and appends; `close()` releases the lock, and leaves the file untouched
    when the writer was never opened.
    """

    def __init__(self, path: Path | None, *, resume: bool = False, force: bool = False, batch: bool = True):
        """`batch`: the run answers --input lines (--resume applies), not a single prompt."""
        self.path = path
        self.resume = resume
        # id -> prompt -> each of its records already in the output (resume): valid, finish_reason, line
        self.answered: dict[str, dict[str | None, list]] = {}
        self.kept: list[dict] = []  # the records `skip` found answering a line (resume): they count in the tally
        self.stream: IO[str] | None = sys.stdout if path is None else None
        self._lock: OutputLock | None = None
        self._repair: _Repair | None = None
        if path is None:
            if resume or force:
                flag = "--resume" if resume else "--force"
                raise UserError(f"{flag} needs --output FILE", hint=f"{flag} acts on the file given with --output")
            return
        if resume and force:
            raise UserError(
                "--resume and --force contradict each other",
                hint="--resume keeps the records in --output and appends; --force replaces them",
            )
        _check_target(path)
        mode = _mode(path)
        if stat.S_ISCHR(mode):  # /dev/null, /dev/full, a terminal: nothing to lock or keep
            _probe_device(path)
            return
        if mode and not stat.S_ISREG(mode):  # a named pipe: its reader decides
            return
        self._lock = OutputLock.take(path)
        try:
            if mode and not resume and not force and path.stat().st_size > 0:
                keep = "add --resume to keep them and answer only the missing ids, or " if batch else "pass "
                raise UserError(
                    f"--output {path} already holds {path.stat().st_size:,} bytes (an earlier run's records?)",
                    hint=f"{keep}--force to overwrite them (or choose another --output)",
                )
            if resume and mode:
                self._repair = _scan_for_resume(path)
                self.answered = self._repair.answered
        except BaseException:
            self._release()
            raise

    def skip(self, rid: Any, prompt: Any = ANY_PROMPT) -> bool:
        """With resume: True when a record of this line is already in the output, one per call. A record
        answers the line with its id and its prompt (a record without a prompt: any line of its id), so
        lines that share an id are told apart: keyed by id alone, an error record dropped for the first
        of them, or a line whose made-up `line-N` id a user's line also had, gave one line's record to
        another and answered that one twice (2026-12-06). Lines alike in both are answered in input order."""
        if not self.resume:
            return False
        by_prompt = self.answered.get(id_key(rid))
        if not by_prompt:
            return False
        keys = list(by_prompt) if prompt is ANY_PROMPT else [prompt_key(prompt), None]
        for key in keys:
            if by_prompt.get(key):
                self.kept.append(by_prompt[key].pop(0))
                return True
        return False

    def keep_error(self, rid: Any, errors: list[str]) -> bool:
        """With resume: True where the output already holds this error record (a bad input line, still bad
        and in the same words), which then stays where it is rather than dropped and written again at the
        end: a resume moved every bad line's record after the others, even with nothing to do (a tour)."""
        repair = self._repair
        if repair is None:
            return False
        for span in repair.dropped:
            if repair.errors.get(span) == (id_key(rid), errors):
                repair.dropped.remove(span)
                self.kept.append({"valid": None, "finish_reason": "error"})  # still a failed line: exit 1
                return True
        return False

    def unmatched(self) -> list[int]:
        """Lines of the output (resume) whose records `skip` gave to no input line: an edited prompt, another
        input's records, a line answered twice. They stay in the file; the batch says so."""
        return sorted(
            kept["line"] for by_prompt in self.answered.values() for left in by_prompt.values() for kept in left
        )

    def open(self) -> None:
        """The run can start (the model loaded, the server answered): create, empty (--force) or
        repair (--resume) the file now. Writing opens it too; calling this again does nothing."""
        self._open()

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

    @property
    def reader_gone(self) -> bool:
        """stdout's reader left (`| head`): nothing written from now on is read (`sgcli.cli.streams`)."""
        return self.path is None and bool(getattr(self.stream, "reader_gone", False))

    def close(self) -> None:
        """Flush and close an opened file, and release the lock. A writer never opened (the run did
        not start) leaves the file exactly as it was. Safe to call more than once."""
        try:
            if self.path is not None and self.stream is not None and not self.stream.closed:
                self.stream.close()
        except OSError as exc:
            raise _write_error(self.path, exc) from None
        finally:
            self._release()

    def _open(self) -> IO[str]:
        if self.stream is None:
            assert self.path is not None
            try:
                if self._repair is not None:
                    self._repair.apply(self.path)
                    self._repair = None
                self.stream = self.path.open("a" if self.resume else "w", encoding="utf-8")
            except OSError as exc:
                raise _write_error(self.path, exc) from None
        return self.stream

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None


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


@dataclass
class _Repair:
    """What --resume found in the output file, applied by `open()` (not before: the run may not start).

    `keep` is where the complete lines end (bytes after it are a killed process's partial line);
    `dropped` are the (start, end) offsets of error records, whose ids are answered again."""

    answered: dict[str, dict[str | None, list]] = field(default_factory=dict)
    size: int = 0
    keep: int = 0
    newline: bool = False  # the last complete record lacks its newline
    dropped: list[tuple[int, int]] = field(default_factory=list)
    # of those, each error record's (id, errors): a bad input line's, given again, stays where it is
    errors: dict[tuple[int, int], tuple[str, list]] = field(default_factory=dict)

    def apply(self, path: Path) -> None:
        if self.dropped:
            _rewrite(path, self)
        elif self.keep < self.size:
            with path.open("r+b") as f:
                f.truncate(self.keep)
        if self.newline:
            with path.open("ab") as f:
                f.write(b"\n")


def _scan_for_resume(path: Path) -> _Repair:
    """Ids answered in an earlier run's output, read line by line (never the whole file at once);
    a partial last line (killed mid-write) is to be cut, error records dropped. Changes nothing."""
    repair, offset = _Repair(), 0
    try:
        with path.open("rb") as f:
            for n, line in enumerate(f, start=1):
                start, offset = offset, offset + len(line)
                complete = line.endswith(b"\n")
                if not line.strip():
                    repair.keep = offset if complete else repair.keep
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    if not complete and line.startswith(b'{"'):  # the unfinished last line of a killed process
                        break  # (sgcli writes each record as one JSON object): cut off
                    raise UserError(
                        "--resume: this line of the output file is not a JSON record",
                        location=Location(str(path), n, 1),
                        hint="fix or delete the line, or rerun with --force to start over",
                    ) from None
                _check_resumable(record, path, n)
                repair.keep = offset
                if record.get("finish_reason") == "error":
                    repair.dropped.append((start, offset))
                    repair.errors[(start, offset)] = (id_key(record["id"]), record.get("errors"))
                    repair.newline = False
                else:
                    prompt = prompt_key(record["prompt"]) if "prompt" in record else None
                    kept = {k: record.get(k) for k in ("valid", "finish_reason")} | {"line": n}  # what a tally reads
                    repair.answered.setdefault(id_key(record["id"]), {}).setdefault(prompt, []).append(kept)
                    repair.newline = not complete
    except OSError as exc:
        raise UserError(f"--resume: cannot read the output file {path}: {exc.strerror}") from None
    repair.size = offset
    return repair


def _check_resumable(record: Any, path: Path, n: int) -> None:
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
            hint="write to a new --output file, or rerun with --force to start over",
        )


def _rewrite(path: Path, repair: _Repair) -> None:
    """The complete lines but the dropped ones, copied in chunks to a temporary file that replaces
    the output atomically (a kill now leaves the old file whole)."""
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".resume")
    try:
        with os.fdopen(fd, "wb") as out, path.open("rb") as src:
            at = 0
            for start, end in [*repair.dropped, (repair.keep, repair.keep)]:
                src.seek(at)
                _copy(src, out, start - at)
                at = end
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise _write_error(path, exc) from None


def _copy(src, out, n: int) -> None:
    while n > 0:
        data = src.read(min(n, 1 << 20))
        if not data:
            return
        out.write(data)
        n -= len(data)
