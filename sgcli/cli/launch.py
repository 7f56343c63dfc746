"""The `sgcli` console script. Ctrl-C or SIGTERM while the command line is still importing (about half
a second: typer, rich, the backends' modules) ended it with a KeyboardInterrupt traceback, or with
SIGTERM's exit 143 and no word; here both end it as they do later: "interrupted", exit 130 (Ctrl-C) or
143 (SIGTERM), as shells report each.

A Python signal handler runs only when the main thread runs bytecode: inside a native call that never
returns (llguidance's first mask on `start: /a+/ "a"`, with --compile-timeout 0) neither Ctrl-C nor
`timeout`'s SIGTERM ended the process, only SIGKILL. The signal's C handler also writes its number to a
pipe (`signal.set_wakeup_fd`); a thread reading it ends the process the same way ("interrupted", exit
130 or 143) where the main thread has not moved for GRACE_S. Where it moves, its own handler runs as before (a
KeyboardInterrupt: a batch's records written so far are whole). The thread needs the GIL, which the grammar
libraries, numpy and torch give up in their long calls; a call that holds it cannot be interrupted."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

GRACE_S = 1.0  # a main thread that runs Python reaches its handler within microseconds


def _interrupt(signum, frame) -> None:
    from sgcli.errors import Interrupted

    raise Interrupted(signum)


def main() -> None:
    from sgcli.cli import streams

    streams.install()  # a closed stdout or stderr, or a reader that leaves, handled once for every command
    try:
        signal.signal(signal.SIGTERM, _interrupt)  # for every command: a forked compile child exits on its own
        _watch_signals()
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
    except KeyboardInterrupt as exc:
        from sgcli.errors import interrupted_code

        sys.stderr.write("interrupted\n")
        _end_past_given_up_compiles(interrupted_code(exc))
        sys.exit(interrupted_code(exc))


def _end_past_given_up_compiles(code) -> None:
    """A compile given up at --compile-timeout may still run on its thread: the exit handlers run (a cache
    store is settled), then the process ends without the interpreter's teardown, which aborted it."""
    bounded = sys.modules.get("sgcli.backends.bounded")
    if bounded is None or not bounded.compiles_left_running():
        return
    import atexit

    atexit._run_exitfuncs()
    if isinstance(code, str):  # sys.exit("message"): Python would print it
        sys.stderr.write(code + "\n")
    _flush()
    os._exit(code if isinstance(code, int) else (0 if code is None else 1))


def _watch_signals() -> None:
    """Start the thread that ends the process at Ctrl-C or SIGTERM while the main thread is stuck in
    native code (the module docstring)."""
    if os.name != "posix":  # Windows: the wakeup fd must be a socket, and there is no fork
        return
    read, write = os.pipe()
    os.set_blocking(write, False)  # the C handler must never block on it
    signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    os.register_at_fork(after_in_child=_unwatch)  # a forked child's signals are its own, not ours
    threading.Thread(target=_watch, args=(read,), name="sgcli-signal-watch", daemon=True).start()


def _unwatch() -> None:
    try:
        signal.set_wakeup_fd(-1)
    except ValueError:  # not the main thread of the main interpreter: nothing was set here
        pass


def _watch(fd: int) -> None:
    main = threading.main_thread().ident
    while True:
        got = os.read(fd, 64)  # one byte per signal, its number
        if not got:
            return
        if (signal.SIGINT in got or signal.SIGTERM in got) and _stuck(main):
            _end_now(signal.SIGTERM if signal.SIGTERM in got else signal.SIGINT)


def _stuck(main: int | None) -> bool:
    """Whether the main thread stays on one bytecode for GRACE_S: inside one native call, where its
    Python handler cannot run."""
    at = _position(main)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline:
        time.sleep(0.05)
        if _position(main) != at:
            return False
    return True


def _position(main: int | None) -> tuple | None:
    frame = sys._current_frames().get(main)
    return None if frame is None else (frame, frame.f_lasti)


def _end_now(signum: int) -> None:
    """What the main thread's KeyboardInterrupt would do, from this thread: "interrupted", exit 128 + signum, output
    written so far flushed (where the main thread does not hold the stream) and the terminal's fd 2 back
    from a library's capture. Exit handlers are not run: they may wait on what the main thread holds."""
    from sgcli.errors import interrupted_code

    captured = sys.modules.get("sgcli.backends.native_stderr")
    if captured is not None:
        captured.give_back_fd2()
    flush = threading.Thread(target=_flush, daemon=True)
    flush.start()
    flush.join(GRACE_S)
    try:
        os.write(2, b"interrupted\n")
    except OSError:
        pass
    os._exit(interrupted_code(signum=signum))


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`): nothing more can be said there
            pass
