"""A generation request, run end to end on the in-process model or on a server.

`sgcli generate` parses its flags into one `GenerateRequest` (`sgcli.app.request`, the same
for both places) and calls `run_generate`: it opens the one record writer, checks the request against what will run
it (before anything slow), and answers a single prompt (streamed) or a batch (one record per
input line, in input order) through a runner: the local model (`sgcli.app.local`) or a server
(`sgcli.app.server`). Records, the summary and the exit code are the same whoever generated.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

from sgcli import backends
from sgcli.app.report import KEPT, Reporter, Tally
from sgcli.app.request import GenerateRequest
from sgcli.backends.guarantee import Guarantee, server_guarantee
from sgcli.batch.output import OrderedWriter
from sgcli.batch.records import RecordWriter
from sgcli.batch.requests import BadLine, Request, duplicate_ids, read_requests
from sgcli.constraints.schema_empty import check_admits_a_value
from sgcli.constraints.spec import Kind
from sgcli.errors import EXIT_FINDINGS, EXIT_OK, Interrupted, plural
from sgcli.serving import check_engine_supports

if TYPE_CHECKING:
    from sgcli.serving.base import Dialect


class Runner(Protocol):
    """What answers requests: the local model or a server."""

    title: str  # the batch progress bar's
    # True: the run can start once the runner exists (the model loaded), so the output is opened then;
    # False: it opens with the first record (a server's first answer), so a dead server loses nothing.
    open_at_start: bool

    def run_single(self, req: Request, show: Callable[[str], None] | None) -> dict:
        """One request's record; its answer text goes to `show` as it streams (None: not streamed)."""
        ...

    def run_batch(self, items: list[Request | BadLine], put: Callable[[int, dict], None]) -> None:
        """A record for every item, `put(index, record)` as each is done (in any order)."""
        ...

    def how(self) -> str:
        """What a batch ran with, for its summary line: rows decoded together and threads, or the server's
        concurrency (defaults are measured per machine: the user sees which applied)."""
        ...


def run_generate(request: GenerateRequest, reporter: Reporter) -> int:
    """Run `request`; returns the exit code (0 no output invalid, 1 some output invalid or failed)."""
    # A bad or locked --output fails here, before anything loads; nothing is written until the run starts.
    writer = RecordWriter(request.output, resume=request.resume, force=request.force, batch=request.batch is not None)
    try:
        with _sigterm_interrupts():  # SIGTERM ends any run as Ctrl-C does: exit 130, the lock given back
            dialect, kept = check_request(request)
            for note in kept.notes if kept is not None else ():
                reporter.notice("note", note)
            runner = _runner(request, reporter, dialect, kept)
            if runner.open_at_start:
                writer.open()  # created, emptied (--force) or repaired (--resume) only now
            if request.batch is not None:
                return run_batch(runner, request.batch, writer, reporter, raw=request.prompt_options.raw)
            return run_single(runner, request, writer, reporter)
    finally:
        writer.close()  # the lock goes however the run ends; a never-opened output is left as it was


def check_request(request: GenerateRequest) -> tuple[Dialect | None, Guarantee | None]:
    """The one check of the request against what runs it, before anything slow: a backend or a server
    that cannot take the constraint is exit 2 naming who can, and so is a JSON Schema that admits no
    value. A server's answer is checked by sgcli's schema checker alone, so a keyword it cannot judge is
    exit 2 too, unless --allow-unenforced. Returns the server's dialect and what its answers leave
    unchecked (None, None: the local model, whose compile says what its grammar leaves)."""
    spec, server = request.spec, request.server
    dialect = None
    if server is not None:
        dialect = check_engine_supports(server.engine, spec, raw=request.prompt_options.raw)
    elif request.local.backend != "auto":
        backends.check_supports(request.local.backend, spec)
    if spec.kind is not Kind.JSON_SCHEMA:
        return dialect, None
    check_admits_a_value(spec)  # one message at the keyword, where backends would each refuse in their words
    if server is None:
        return None, None
    return dialect, server_guarantee(spec, server.engine, allow_unenforced=server.allow_unenforced)


def _runner(request: GenerateRequest, reporter: Reporter, dialect: Dialect | None, kept: Guarantee | None) -> Runner:
    if dialect is not None:
        from sgcli.app.server import ServerRunner  # the HTTP client (httpx)

        return ServerRunner(request, dialect, kept.unenforced if kept is not None else [])
    from sgcli.app.local import LocalRunner  # torch

    return LocalRunner.load(request, reporter)


def run_single(runner: Runner, request: GenerateRequest, writer: RecordWriter, reporter: Reporter) -> int:
    """A single prompt: its text streamed (or its record, with json_out), then its summary."""
    show = None if request.json_out else (lambda text: reporter.answer_text(writer, text))
    record = runner.run_single(Request(None, request.prompt), show)
    reporter.answer_end(writer, record, json_out=request.json_out)
    return EXIT_OK if record["valid"] is not False else EXIT_FINDINGS


def _record_prompt(item) -> object:
    """The prompt a record of this request holds (`session.record`, `serving.runner`)."""
    return item.prompt if item.messages is None else item.messages


def run_batch(
    runner: Runner, batch: tuple[list[bytes], str], writer: RecordWriter, reporter: Reporter, *, raw: bool = False
) -> int:
    """Every input line answered by one record, in input order; a failing request becomes an error
    record and the batch goes on. With resume, ids already in the output are skipped."""
    items = list(read_requests(*batch, raw=raw))
    _warn_duplicates(items, reporter)
    # --resume: lines already answered; a bad line whose error record the output holds in the same words
    # keeps it in place (its `line-N` id must not use up the record of a user's id "line-N")
    todo = [
        item
        for item in items
        if not (
            writer.keep_error(item.id, item.record()["errors"])
            if isinstance(item, BadLine)
            else writer.skip(item.id, _record_prompt(item))
        )
    ]
    tally = Tally(runner.how)  # the records written: with a reader that left, those it received

    def write(entry: tuple[dict, Request | BadLine], _sink) -> None:
        record, item = entry
        writer.write(record)
        if not writer.reader_gone:
            tally.add(record, item)

    ordered = OrderedWriter(None, write)
    with reporter.counter(runner.title, len(todo)) as advance:

        def put(index: int, record: dict) -> None:
            ordered.put(index, (record, todo[index]))
            advance()
            if writer.reader_gone:
                raise _ReaderGone

        try:
            runner.run_batch(todo, put)
        except _ReaderGone:  # `| head`: the rest would be generated for nobody; the exit code is that of those written
            reporter.notice("note", f"stdout's reader left after {tally.n} of {len(todo)} records: the batch stopped")
    writer.open()  # the run answered (or there was nothing to ask): an empty batch still leaves its file
    if len(todo) < len(items):
        reporter.notice(
            "note", f"--resume: {len(items) - len(todo)} of {len(items)} lines were already answered in {writer.path}"
        )
    unmatched = writer.unmatched()
    if unmatched:  # kept as they are: the file no longer holds one record per input line
        reporter.notice(
            "warning",
            f"--resume: {plural(len(unmatched), 'record')} in {writer.path} answer no line of the input (first: "
            f"{writer.path}:{unmatched[0]}; an edited prompt, or another input's records); they stay in the file",
        )
    for record in writer.kept:  # an invalid record an earlier run left fails the batch as it did that run
        tally.add(record, KEPT)
    reporter.tally(tally)
    return EXIT_FINDINGS if tally.failed else EXIT_OK  # unchecked (null) is not a finding; an error is


class _ReaderGone(Exception):
    """Ends a batch whose records nobody reads any more."""


def _warn_duplicates(items: list[Request | BadLine], reporter: Reporter) -> None:
    dups = duplicate_ids(items)
    if not dups:
        return
    shown = ", ".join(_short_id(d) for d in dups[:5]) + (" ..." if len(dups) > 5 else "")
    what = "each line still gets its own record, in input order"  # --resume too: a record per line of the id
    reporter.notice("warning", f"{plural(len(dups), 'id')} used on several input lines: {shown} ({what})")


def _short_id(rid, most: int = 80) -> str:
    """An id as JSON, cut to `most` characters (a 200,000-character id was printed whole: 200 KB of stderr)."""
    text = json.dumps(rid, ensure_ascii=False)
    return text if len(text) <= most else f"{text[: most - 1]}… ({len(text):,} characters)"


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM ends a run like Ctrl-C: a batch's lines written so far are complete records, and the
    output's lock is given back (a default SIGTERM left it behind). Only the main thread can set it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum, frame):
    raise Interrupted(signum)
