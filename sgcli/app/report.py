"""What a run tells the person running it, and the tally a batch ends with.

The application layer never prints: it calls a `Reporter`, which cli/ implements with its
progress bars and stderr (`sgcli.cli.report.Terminal`), and a test or another caller with
whatever it likes. Messages are plain text; the terminal decides colours and escaping.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

from sgcli.batch.output import Failures
from sgcli.errors import plural

if TYPE_CHECKING:
    from sgcli.batch.records import RecordWriter

Stage = Callable[[str, int, int], None]  # (description, step, total): one slow stage's progress


class Reporter(Protocol):
    def stage(self, title: str) -> AbstractContextManager[Stage]:
        """Progress through one slow stage (loading a tokenizer, a model)."""
        ...

    def counter(self, title: str, total: int) -> AbstractContextManager[Callable[[], None]]:
        """Progress through `total` records; the callable counts one more."""
        ...

    def notice(self, label: str, message: str) -> None:
        """One line for a person: `label` is "warning", "fallback" or "note"."""
        ...

    def reasoning(self, text: str) -> None:
        """A single prompt's thinking text (--reasoning), as it streams."""
        ...

    def answer_text(self, sink: RecordWriter, text: str) -> None:
        """A single prompt's answer, as it streams, to `sink` (stdout or --output)."""
        ...

    def answer_end(self, sink: RecordWriter, record: dict, *, json_out: bool) -> None:
        """A single prompt's end: its record (json_out) or the end of its text, then its summary."""
        ...

    def tally(self, tally: Tally) -> None:
        """The summary a batch ends with."""
        ...


KEPT = object()  # Tally.add's item for a record --resume kept from an earlier run (`RecordWriter.kept`)


class Tally:
    """How a batch's records fared and how fast: the line a batch ends with, its first errors (each at
    its --input file:line), and its exit code."""

    def __init__(self, how: str | Callable[[], str] = "") -> None:
        # how the batch ran ("batch 32, 2 threads"; "vllm, 4 concurrent"), asked at the end: threads may change
        self.how = how
        self.start = time.perf_counter()
        self.n = self.valid = self.invalid = self.unchecked = self.errors = self.tokens = 0
        self.failed = 0  # records that are invalid or errors: exit 1
        self.kept = 0  # records an earlier run left in the output (--resume): counted, not generated now
        self.failures = Failures()

    def add(self, record: dict, item=None) -> None:
        """`item`: the Request or BadLine the record answers (its `location` is the input line)."""
        self.n += 1
        self.tokens += ((record.get("usage") or {}).get("completion_tokens") or 0) if item is not KEPT else 0
        self.kept += item is KEPT
        self.failed += record.get("valid") is False or record.get("finish_reason") == "error"
        if record.get("finish_reason") == "error":
            self.errors += 1
            if item is not KEPT:
                self.failures.add(record, getattr(item, "location", None))
        elif record.get("valid") is True:
            self.valid += 1
        elif record.get("valid") is None:
            self.unchecked += 1
        else:
            self.invalid += 1

    def summary(self) -> str:
        elapsed = time.perf_counter() - self.start
        rate = f"{self.tokens / elapsed:.1f} tok/s" if elapsed > 0 and self.tokens else "- tok/s"
        unchecked = f", {self.unchecked} unchecked" if self.unchecked else ""
        how = self.how() if callable(self.how) else self.how
        kept = f" ({self.kept} kept from the output file)" if self.kept else ""
        return (
            f"{plural(self.n, 'record')}{kept}: {self.valid} valid, {self.invalid} invalid{unchecked}, "
            f"{plural(self.errors, 'error')} · {plural(self.tokens, 'token')} in {elapsed:.1f} s ({rate})"
            + (f" · {how}" if how else "")
        )
