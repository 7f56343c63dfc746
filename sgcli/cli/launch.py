"""The `sgcli` console script. Ctrl-C or SIGTERM while the command line is still importing (about half
a second: typer, rich, the backends' modules) ended it with a KeyboardInterrupt traceback, or with
SIGTERM's exit 143 and no word; here both end it as they do later: "interrupted", exit 130."""

from __future__ import annotations

import signal
import sys


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def main() -> None:
    try:
        signal.signal(signal.SIGTERM, _interrupt)  # for every command: a forked compile child exits on its own
        from sgcli.cli.app import main as run

        run()
    except KeyboardInterrupt:
        from sgcli.errors import EXIT_INTERRUPTED

        sys.stderr.write("interrupted\n")
        sys.exit(EXIT_INTERRUPTED)
