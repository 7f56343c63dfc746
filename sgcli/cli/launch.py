"""The `sgcli` console script. Ctrl-C or SIGTERM while the command line is still importing (about half
a second: typer, rich, the backends' modules) ended it with a KeyboardInterrupt traceback, or with
SIGTERM's exit 143 and no word; here both end it as they do later: "interrupted", exit 130."""

from __future__ import annotations

import signal
import sys


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def main() -> None:
    from sgcli.cli import streams

    streams.install()  # a closed stdout or stderr, or a reader that leaves, handled once for every command
    try:
        signal.signal(signal.SIGTERM, _interrupt)  # for every command: a forked compile child exits on its own
        from sgcli.cli.app import main as run
        from sgcli.errors import EXIT_USAGE, UserError

        try:
            run()
        except SystemExit as exc:
            _end_past_given_up_compiles(exc.code)
            raise
        except UserError as exc:  # raised before any command runs: --help or --version with stdout closed
            sys.stderr.write(exc.render() + "\n")
            _end_past_given_up_compiles(EXIT_USAGE)
            sys.exit(EXIT_USAGE)
        _end_past_given_up_compiles(0)
    except KeyboardInterrupt:
        from sgcli.errors import EXIT_INTERRUPTED

        sys.stderr.write("interrupted\n")
        _end_past_given_up_compiles(EXIT_INTERRUPTED)
        sys.exit(EXIT_INTERRUPTED)


def _end_past_given_up_compiles(code) -> None:
    """A compile given up at --compile-timeout may still run on its thread: the exit handlers run (a cache
    store is settled), then the process ends without the interpreter's teardown, which aborted it."""
    bounded = sys.modules.get("sgcli.backends.bounded")
    if bounded is None or not bounded.compiles_left_running():
        return
    import atexit
    import os

    atexit._run_exitfuncs()
    if isinstance(code, str):  # sys.exit("message"): Python would print it
        sys.stderr.write(code + "\n")
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`): nothing more can be said there
            pass
    os._exit(code if isinstance(code, int) else (0 if code is None else 1))
