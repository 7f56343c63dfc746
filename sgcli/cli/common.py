"""What every command shares: consoles, error handling, exit codes, JSON output."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import traceback
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from sgcli.cache.paths import set_notifier
from sgcli.constraints.reading import forget_stdin, read_text
from sgcli.errors import EXIT_INTERNAL, EXIT_USAGE, SgcliError, UserError, interrupted_code
from sgcli.extras import from_import_error
from sgcli.lone_surrogates import lone_surrogate

if TYPE_CHECKING:
    from rich.console import Console

# stdout carries results (text, JSON, JSONL); stderr carries everything for humans. Both rich
# Consoles, `out` and `err`, are made on first use: importing rich is a tenth of `sgcli lint`'s start-up.
_CONSOLES = {"out": {}, "err": {"stderr": True}}


def _console(name: str) -> Console:
    console = globals().get(name)
    if console is None:
        from rich.console import Console

        console = globals()[name] = Console(highlight=False, soft_wrap=True, **_CONSOLES[name])
    return console


def __getattr__(name: str):
    if name in _CONSOLES:
        return _console(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _notice(message: str) -> None:
    _console("err").print(f"[yellow]notice[/]: {escape(message)}")


def fail(error: UserError) -> None:
    """Print a user error (without exiting: a command may go on to its next file)."""
    _console("err").print(f"[bold red]error[/]: {escape(error.render().removeprefix('error: '))}")


def plain_err(line: str) -> None:
    """`line` on stderr as is: what `err.print(line, markup=False, highlight=False)` prints for plain
    text (no `:emoji:` codes, tabs or control characters), without importing rich."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def loading_note(what: str) -> None:
    """A slow first-run step of loading a tokenizer (converting a GGUF's, 10-20 s), said before it runs,
    on a terminal and in a CI log alike: a command silent that long looks hung."""
    plain_err(f"note: {what}")


def escape(text: str) -> str:
    """`text` shown literally by rich (file names and messages may contain [brackets])."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def utf8_text(value):
    """Typer callback of the options that carry text (a prompt, a system message, a sample): bytes that
    are not UTF-8 on the command line reach Python as lone surrogates, which no tokenizer or server
    takes; exit 2 at the first one instead."""
    for text in value if isinstance(value, list) else [value]:
        if isinstance(text, str):
            at = lone_surrogate(text)
            if at is not None:
                byte = f"0x{ord(text[at]) - 0xDC00:02X}" if ord(text[at]) >= 0xDC80 else "a surrogate"
                raise typer.BadParameter(
                    f"not UTF-8 text ({byte} at character {at + 1}); set a UTF-8 locale or convert it (iconv)"
                )
    return value


def sample_text(value: str | None) -> str | None:
    """--text of the dry-run commands: '-' reads it from stdin (once per command, as every '-' is;
    bounded by --max-constraint-bytes), one trailing newline dropped as `$(...)` drops it, so
    `model ... | sgcli masks --schema S.json --text -` steps through what the model wrote."""
    if value != "-":
        return value
    from sgcli.limits import current_limits

    text = read_text("-", what="--text", limit=current_limits().max_bytes)[0]
    return text.removesuffix("\n").removesuffix("\r")


def stop_strings(value):
    """Typer callback of --stop: UTF-8 text (`utf8_text`), and never empty: an empty stop string is found
    before the first token, so every output came back `""` (2026-12-06)."""
    if value and any(text == "" for text in value):
        raise typer.BadParameter("must not be empty: an empty stop string ends every output before it starts")
    return utf8_text(value)


def handles_errors(fn: Callable) -> Callable:
    """User errors -> one message and exit 2; anything else -> 'this is a bug' and exit 3."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        previous = set_notifier(_notice)  # cache notices go to stderr while the command runs
        forget_stdin()
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except UserError as exc:
            fail(exc)
            raise typer.Exit(EXIT_USAGE) from None
        except SgcliError as exc:
            _console("err").print(f"[bold red]error[/]: {escape(str(exc))}")
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt as exc:
            _console("err").print("interrupted")
            raise typer.Exit(interrupted_code(exc)) from None
        except Exception as exc:  # a bug: say so, keep the traceback for reports
            full = _write_failed(exc)
            if full is not None:  # never sgcli's bug, and nothing more can be written where it went
                fail(full)
                raise typer.Exit(EXIT_USAGE) from None
            missing = _missing_extra(exc)
            if missing is not None:  # an optional extra that is not installed is the user's to fix
                fail(missing)
                raise typer.Exit(EXIT_USAGE) from None
            err = _console("err")
            err.print(
                "[bold red]internal error[/] (a bug in sgcli, please report it): "
                f"{type(exc).__name__}: {escape(str(exc))}"
            )
            if os.environ.get("SGCLI_DEBUG"):
                traceback.print_exc()
            else:
                err.print("  set SGCLI_DEBUG=1 to see the traceback")
            raise typer.Exit(EXIT_INTERNAL) from None
        finally:
            set_notifier(previous)

    return wrapper


def _write_failed(exc: Exception) -> UserError | None:
    """A disk that filled under a write no other layer names (stdout redirected to a full disk or to
    /dev/full), or a pipe whose reader left where `sgcli.cli.streams` does not watch (in-process callers'
    streams): exit 2 saying so, never the 0 of a run that went well. What stdout still buffers is
    dropped, so that Python's own flush at exit does not fail a second time (exit 120)."""
    import errno

    if not isinstance(exc, OSError) or exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EPIPE):
        return None
    where = exc.filename or "the standard output"
    if exc.filename is None:  # stdout failed (not an -o file): what it still buffers has nowhere to go
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
    if exc.errno == errno.EPIPE:
        return UserError(f"cannot write {where}: its reader closed it", hint="let the reader take all of it")
    return UserError(f"cannot write {where}: {exc.strerror}", hint="free space on that disk, or write elsewhere")


def _missing_extra(exc: Exception) -> UserError | None:
    if not isinstance(exc, ImportError):
        return None

    return from_import_error(exc)


# One --output-format vocabulary, in ruff's names: `concise` for people, `json` one document,
# `json-lines` one JSON object a line; `text` and `jsonl` are the older spellings of the same
# two (kept, so nothing breaks). `lint` adds its own (full, github, sarif) to these.
FORMATS = ("concise", "json", "json-lines")
FORMAT_ALIASES = {"text": "concise", "jsonl": "json-lines"}
_INTERNAL = {"concise": "text", "json": "json", "json-lines": "jsonl"}  # what commands compare against


def format_choices(*extra: str, name: str = "OutputFormat") -> type[Enum]:
    """The --output-format Enum: the shared names, a command's `extra` ones after concise, then the aliases."""
    names = [FORMATS[0], *extra, *FORMATS[1:], *FORMAT_ALIASES]
    return Enum(name, {n: n for n in names}, type=str)


OutputFormat = format_choices()
FORMATS_HELP = (
    "concise (for people; alias text), json (one document) or json-lines (one JSON object a line; alias jsonl)"
)

# Every --tokenizer takes these forms (tokenizers.load_tokenizer reads them all); one text, so no help lists fewer.
TOKENIZER_HELP = (
    "Hugging Face id or folder, tokenizer.json, .gguf file, mistral:tekken[-240718|-240911], "
    "mistral:v1|v2|v3|v7, or 'default' (the embedded SmolLM2)."
)

OutputFormatOpt = Annotated[
    Optional[OutputFormat],
    typer.Option("--output-format", help=FORMATS_HELP + ".", rich_help_panel="Output"),
]
JsonFlagOpt = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Alias: --output-format json-lines where the command prints a stream of records, json otherwise.",
        rich_help_panel="Output",
    ),
]


def canonical_format(value: str) -> str:
    """`text` -> concise, `jsonl` -> json-lines; every other name as it is."""
    return FORMAT_ALIASES.get(value, value)


def output_format_of(output_format: Enum | str | None, json_flag: bool, *, stream: bool = False) -> str:
    """The format asked for, as the command's own key: "text" (concise), "json" or "jsonl" (json-lines).
    --output-format wins; --json is its alias (json-lines for a `stream` of records, json for one
    document, as each command always printed it); concise otherwise."""
    alias = "json-lines" if stream else "json"
    if output_format is not None:
        given = output_format.value if isinstance(output_format, Enum) else output_format
        name = canonical_format(given)
        if json_flag and name != alias:
            raise UserError(f"--json conflicts with --output-format {given}", hint="give one of them")
        return _INTERNAL[name]
    return _INTERNAL[alias] if json_flag else "text"


class JsonRows:
    """Records to stdout as JSON Lines (each flushed at once) or, for `json`, one array at the end."""

    def __init__(self, fmt: str, stream=None):
        self.fmt, self.stream, self.rows = fmt, stream, []

    def write(self, row: dict) -> None:
        if self.fmt == "json":
            self.rows.append(row)
        else:
            json_line(row, self.stream)

    def close(self) -> None:
        if self.fmt == "json":
            stream = self.stream or sys.stdout
            stream.write(json.dumps(self.rows, ensure_ascii=False, indent=2) + "\n")
            stream.flush()


def json_line(obj: Any, stream=None) -> None:
    """One JSON record on its own line (JSONL), flushed so pipelines see it at once."""
    stream = stream or sys.stdout
    stream.write(json.dumps(obj, ensure_ascii=False) + "\n")
    stream.flush()
