"""Writing batch records: in input order, each flushed as soon as it and all before it are done;
and the list of the batch's failures its summary ends with.

Shared by the local batch loop and the serving engines' concurrent one, so `--resume`
(which reads back the ids already written) sees one format whoever generated the records.
"""

from __future__ import annotations

import json
from typing import IO

from sgcli.errors import Location, plural


class OrderedWriter:
    """Takes records by input position in any order; writes them in order, as early as possible."""

    def __init__(self, sink: IO[str], write=None):
        self._sink = sink
        self._write = write or _json_line
        self._pending: dict[int, dict] = {}
        self._next = 0

    def put(self, index: int, record: dict) -> list[dict]:
        """Hold `record` for position `index`; write whatever is now contiguous. Returns what was written."""
        self._pending[index] = record
        written = []
        while self._next in self._pending:
            rec = self._pending.pop(self._next)
            self._write(rec, self._sink)
            written.append(rec)
            self._next += 1
        return written

    @property
    def written(self) -> int:
        return self._next


def _json_line(record: dict, sink: IO[str]) -> None:
    sink.write(json.dumps(record, ensure_ascii=False) + "\n")
    sink.flush()


class Failures:
    """A batch's error records for its summary on stderr: the first few, each as `file:line: message`
    (the --input line it came from), then how many more."""

    SHOWN = 5

    def __init__(self) -> None:
        self.count = 0
        self.shown: list[str] = []

    def add(self, record: dict, where: Location | None = None) -> None:
        self.count += 1
        if len(self.shown) >= self.SHOWN:
            return
        message = (record.get("errors") or ["failed (no reason recorded)"])[0]
        if where is None:
            prefix = f"id {json.dumps(record.get('id'), ensure_ascii=False)}"
        else:
            prefix = f"{where.path}:{where.line}" if where.line is not None else str(where)
        self.shown.append(message if message.startswith(prefix) else f"{prefix}: {message}")

    def lines(self) -> list[str]:
        more = self.count - len(self.shown)
        return self.shown + ([f"... and {plural(more, 'more error')}"] if more else [])
