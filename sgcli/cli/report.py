"""The terminal side of a run: `sgcli.app.report.Reporter` on rich progress bars and stderr.

Results (a single prompt's text or record) go to the record writer the application layer
opened (stdout or --output); everything for a person goes to stderr.
"""

from __future__ import annotations

import json

from sgcli.app.report import Tally
from sgcli.batch.records import RecordWriter
from sgcli.cli.common import err, escape
from sgcli.errors import plural

_COLOURS = {"warning": "yellow", "fallback": "yellow", "note": "cyan"}


class Terminal:
    """Progress bars and stderr lines for a person; `quiet` drops the summaries."""

    def __init__(self, *, quiet: bool = False):
        self.quiet = quiet

    def stage(self, title: str):
        from sgcli.cli.progress import stage_progress  # rich.progress

        return stage_progress(title)

    def counter(self, title: str, total: int):
        from sgcli.cli.progress import count_progress

        return count_progress(title, total)

    def notice(self, label: str, message: str) -> None:
        err.print(f"[{_COLOURS.get(label, 'yellow')}]{label}[/]: {escape(message)}")

    def reasoning(self, text: str) -> None:
        err.print(text, end="", style="dim", markup=False)

    def tally(self, tally: Tally) -> None:
        if not self.quiet:
            lines = [tally.summary(), *(f"  [red]✗[/] {escape(f)}" for f in tally.failures.lines())]
            err.print("\n".join(lines), highlight=False)

    # The single prompt's output path: its text as it streams, then its record (json_out) or the
    # end of the text, on the record writer (stdout, or the --output file).

    def answer_text(self, sink: RecordWriter, text: str) -> None:
        sink.write_text(text)

    def answer_end(self, sink: RecordWriter, record: dict, *, json_out: bool) -> None:
        if json_out:
            sink.write(record)
        else:
            sink.write_text("\n")
            _pretty_on_terminal(record, sink)
        if not self.quiet:
            record_summary(record)


def _pretty_on_terminal(record: dict, sink: RecordWriter) -> None:
    """On a terminal, a JSON object or array is shown once more after the stream, indented for people,
    where that differs from the text generated; pipes, files, --json and the record keep the exact text."""
    from sgcli.cli import common

    parsed = record.get("parsed")
    if getattr(sink, "path", None) is not None or not isinstance(parsed, (dict, list)) or not common.out.is_terminal:
        return
    pretty = json.dumps(parsed, indent=2, ensure_ascii=False)
    if pretty != (record.get("output") or "").strip():
        sink.write_text(pretty + "\n")


def record_summary(record: dict) -> None:
    """One record's line on stderr: backend, model, tokens, speed, finish and verdict, then its errors."""
    t, usage = record["timings"], record["usage"]
    tps = f"{t['tokens_per_s']:.1f} tok/s" if t["tokens_per_s"] else "- tok/s"
    ttft = f"first token {t['first_token_ms'] / 1000:.2f} s" if t["first_token_ms"] is not None else "no token"
    if t.get("start_to_first_token_ms") is not None:  # the wait a user sees: process start to that token
        ttft += f" (ready {t['start_to_first_token_ms'] / 1000:.2f} s from start)"
    forced = f" ({usage['forced_tokens']} forced)" if usage.get("forced_tokens") else ""
    tokens = "-" if usage.get("completion_tokens") is None else usage["completion_tokens"]  # a server sent none
    threads = f"{plural(t['threads'], 'thread')} · " if t.get("threads") else ""
    valid = {True: "[green]valid[/]", False: "[red]invalid[/]"}.get(record["valid"], "[yellow]unchecked[/]")
    if record.get("validated_by"):
        valid += f" [dim](checked by {record['validated_by']})[/]"
    placed = (
        f" ({record['device']}, {record['dtype']}, {record.get('model_impl')}"
        f"{' + ' + record['kernel'] if record.get('kernel') else ''}, template {record['chat_template']})"
        if "device" in record
        else ""
    )
    err.print(
        f"[dim]{record['backend']} · {record['model']}{placed} · {plural(tokens, 'token')}{forced} · "
        f"{tps} · {ttft} · {threads}finish: {record['finish_reason']} ·[/] {valid}"
    )
    for e in record["errors"]:
        err.print(f"  [red]✗[/] {escape(e)}")  # a regex's `[a-z]` is text, not markup
    if record.get("unchecked"):
        err.print(f"  [yellow]?[/] not checked: {escape(record['unchecked'])}")
