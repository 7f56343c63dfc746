"""Rich progress for long work (model conversion, batches), shown only on a terminal."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Column

from sgcli.cli.common import err

_OTHER_COLUMNS = 42  # spinner, 16-cell bar, "123/456", "0:00:12" and the gaps between them


def _progress(transient: bool = True) -> Progress:
    # The description gives way (cut with an ellipsis) so the counter and the clock always
    # stay on the line, down to 80 columns.
    return Progress(
        SpinnerColumn(),
        TextColumn(
            "{task.description}",
            table_column=Column(no_wrap=True, overflow="ellipsis", max_width=max(20, err.width - _OTHER_COLUMNS)),
        ),
        BarColumn(bar_width=16),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=transient,
        disable=not err.is_terminal,
    )


@contextlib.contextmanager
def stage_progress(title: str) -> Iterator:
    """A callback `(description, step, total)` that drives one progress bar."""
    with _progress() as bar:
        task = bar.add_task(title, total=None)

        last = [None]

        def update(description: str, step: int, total: int) -> None:
            bar.update(task, description=f"{title}: {description}", completed=step, total=total)
            if not err.is_terminal and description != last[0]:  # a log line per stage, not per step
                err.print(f"{title}: {description}")
            last[0] = description

        yield update


@contextlib.contextmanager
def count_progress(title: str, total: int) -> Iterator:
    with _progress(transient=True) as bar:
        task = bar.add_task(title, total=total)
        yield lambda: bar.advance(task)


LOG_EVERY_S = 10.0  # off a terminal: a progress line at most this often (a short run prints none)


@contextlib.contextmanager
def item_progress(title: str, total: int) -> Iterator:
    """A callback `(description, finished)` for work over many items: a bar on a terminal; elsewhere
    (stderr to a file or a CI log) a plain line now and then, so a long run is seen to move."""
    started = last = time.monotonic()
    done = 0
    with _progress(transient=True) as bar:
        task = bar.add_task(title, total=total)

        def update(description: str, finished: bool) -> None:
            nonlocal last, done
            done += finished
            bar.update(task, description=f"{title}: {description}", completed=done)
            now = time.monotonic()
            if not err.is_terminal and not finished and now - last >= LOG_EVERY_S:
                last = now
                line = f"{title}: {done}/{total} done, {int(now - started)} s; now {description}"
                err.print(line, highlight=False, markup=False)

        yield update
