"""What every command shares: consoles, error handling, exit codes, JSON output."""

from __future__ import annotations

import functools
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console

from sgcli.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, SgcliError, UserError

# stdout carries results (text, JSON, JSONL); stderr carries everything for humans.
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(error: UserError) -> None:
    """Print a user error (without exiting: a command may go on to its next file)."""
    err.print(f"[bold red]error[/]: {escape(error.render().removeprefix('error: '))}")


def escape(text: str) -> str:
    """`text` shown literally by rich (file names and messages may contain [brackets])."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def handles_errors(fn: Callable) -> Callable:
    """User errors -> one message and exit 2; anything else -> 'this is a bug' and exit 3."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except UserError as exc:
            fail(exc)
            raise typer.Exit(EXIT_USAGE) from None
        except SgcliError as exc:
            err.print(f"[bold red]error[/]: {escape(str(exc))}")
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            err.print("interrupted")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except BrokenPipeError:
            raise typer.Exit(0) from None
        except Exception as exc:  # a bug: say so, keep the traceback for reports
            err.print(
                "[bold red]internal error[/] (a bug in sgcli, please report it): "
                f"{type(exc).__name__}: {escape(str(exc))}"
            )
            if os.environ.get("SGCLI_DEBUG"):
                traceback.print_exc()
            else:
                err.print("  set SGCLI_DEBUG=1 to see the traceback")
            raise typer.Exit(EXIT_INTERNAL) from None

    return wrapper


def json_line(obj: Any, stream=None) -> None:
    """One JSON record on its own line (JSONL), flushed so pipelines see it at once."""
    stream = stream or sys.stdout
    stream.write(json.dumps(obj, ensure_ascii=False) + "\n")
    stream.flush()
