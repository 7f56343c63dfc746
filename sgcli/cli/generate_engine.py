"""`sgcli generate --engine vllm|sglang|openai`: the same command, answered by a server.

Records, validation and exit codes are those of a local run; only where the tokens come
from changes. Single prompts stream; batches run `--concurrency` requests at a time and are
written in input order as they complete.
"""

from __future__ import annotations

import sys

from sgcli.cli.common import err, json_line
from sgcli.errors import EXIT_FINDINGS, EXIT_OK, UserError


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
    batch_text: tuple[str, str] | None,
    json_out: bool,
    output,
    quiet: bool,
) -> int:
    """Run on the server; returns the exit code."""
    from sgcli.serving import check_engine_supports
    from sgcli.serving.runner import EngineJob

    dialect = check_engine_supports(engine, spec, raw=raw)
    job = EngineJob(engine, dialect, spec, sampling, client, served_model, system, raw)
    sink = output.open("w", encoding="utf-8") if output else sys.stdout
    try:
        if batch_text is not None:
            return _batch(job, batch_text, sink, quiet=quiet)
        return _single(job, prompt, json_out=json_out, sink=sink, quiet=quiet)
    finally:
        if output:
            sink.close()


def _batch(job, batch_text, sink, *, quiet: bool) -> int:
    from sgcli.cli.generate import BatchTally
    from sgcli.cli.progress import count_progress
    from sgcli.engine.batch_output import OrderedWriter
    from sgcli.engine.requests import read_requests
    from sgcli.serving.runner import run_batch

    items = list(read_requests(*batch_text))
    writer = OrderedWriter(sink, json_line)
    tally = BatchTally()
    with count_progress(f"generating on {job.engine}", len(items)) as advance:

        def put(index: int, record: dict) -> None:
            tally.add(record)
            writer.put(index, record)
            advance()

        run_batch(job, items, put)
    if not quiet:
        err.print(tally.summary(), highlight=False)
    return EXIT_FINDINGS if tally.invalid or tally.errors else EXIT_OK  # unchecked (null) is not a finding


def _single(job, prompt, *, json_out: bool, sink, quiet: bool) -> int:
    from sgcli.engine.requests import Request
    from sgcli.serving.runner import run_single

    def show(text: str) -> None:
        sink.write(text)
        sink.flush()

    record = run_single(job, Request(None, prompt), None if json_out else show)
    if json_out:
        json_line(record, sink)
    else:
        sink.write("\n")
        sink.flush()
    if not quiet:
        from sgcli.cli.generate import _summary

        _summary(record)
    return EXIT_OK if record["valid"] is not False else EXIT_FINDINGS


def reject_local_only(**flags) -> None:
    """Flags that act on the in-process model have no meaning on a server: say so, don't ignore them."""
    for flag, given in flags.items():
        if given:
            raise UserError(
                f"{flag} applies to the local engine only",
                hint="the server's own settings decide this; drop the flag or use --engine local",
            )
