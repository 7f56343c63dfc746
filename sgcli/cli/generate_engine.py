"""`sgcli generate --engine vllm|sglang|openai`: the same command, answered by a server.

Records, validation and exit codes are those of a local run; only where the tokens come
from changes. Single prompts stream; batches run `--concurrency` requests at a time and are
written in input order as they complete.
"""

from __future__ import annotations

from sgcli.batch.output import OrderedWriter
from sgcli.batch.requests import Request, read_requests
from sgcli.cli.common import err
from sgcli.cli.generate import BatchTally, end_single
from sgcli.errors import EXIT_FINDINGS, EXIT_OK, UserError
from sgcli.serving import check_engine_supports


def generate_on_engine(
    engine: str,
    client,
    spec,
    *,
    served_model: str | None,
    sampling,
    system: str | None,
    raw: bool,
    prompt: str | None,
    batch: tuple[bytes, str] | None,
    json_out: bool,
    writer,
    quiet: bool,
) -> int:
    """Run on the server; returns the exit code. `writer` is the local path's RecordWriter, so
    `--output` checks and `--resume` behave the same on a server."""
    from sgcli.serving.runner import EngineJob

    dialect = check_engine_supports(engine, spec, raw=raw)
    job = EngineJob(engine, dialect, spec, sampling, client, served_model, system, raw)
    try:
        if batch is not None:
            return _batch(job, batch, writer, quiet=quiet)
        return _single(job, prompt, json_out=json_out, sink=writer, quiet=quiet)
    finally:
        writer.close()


def _batch(job, batch, records, *, quiet: bool) -> int:
    """`records` is opened only once the server answered (run_batch writes nothing before), so an
    unreachable server leaves an earlier --output as it was."""
    from sgcli.cli.progress import count_progress
    from sgcli.serving.runner import run_batch

    items = list(read_requests(*batch))
    todo = [item for item in items if not records.skip(item.id)]  # --resume: ids already answered
    writer = OrderedWriter(None, lambda record, _: records.write(record))
    tally = BatchTally()
    with count_progress(f"generating on {job.engine}", len(items)) as advance:

        def put(index: int, record: dict) -> None:
            tally.add(record, todo[index])
            writer.put(index, record)
            advance()

        run_batch(job, todo, put)
    records.open()  # the server answered (or there was nothing to ask): an empty batch still leaves its file
    if len(todo) < len(items):
        err.print(f"[cyan]note[/]: --resume: {len(items) - len(todo)} of {len(items)} ids were already answered")
    if not quiet:
        err.print(tally.summary(), highlight=False)
    return EXIT_FINDINGS if tally.invalid or tally.errors else EXIT_OK  # unchecked (null) is not a finding


def _single(job, prompt, *, json_out: bool, sink, quiet: bool) -> int:
    from sgcli.serving.runner import run_single

    record = run_single(job, Request(None, prompt), None if json_out else sink.write_text)
    return EXIT_OK if end_single(record, json_out=json_out, sink=sink, quiet=quiet) else EXIT_FINDINGS


def reject_local_only(**flags) -> None:
    """Flags that act on the in-process model have no meaning on a server: say so, don't ignore them."""
    for flag, given in flags.items():
        if given:
            raise UserError(
                f"{flag} applies to the local engine only",
                hint="the server's own settings decide this; drop the flag or use --engine local",
            )
