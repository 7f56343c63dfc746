"""The flags every command that compiles shares, added in one place: the compile limits, the cache,
and where a schema's `$ref`s to URLs are read from.

`with_compile_limits(command)` appends `--compile-timeout`, `--compile-memory`,
`--max-constraint-bytes`, `--no-cache`, `--ref-base` and `--format` to the command's signature (typer
reads it), and sets them for the process before the command runs, so every compile below it is bounded
the same way, every schema bundles its files the same way and every checker knows the same formats.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated

import typer

from sgcli.backends.compile_cache import cache_enabled, set_cache_enabled
from sgcli.constraints.formats import current_user_formats, parse_user_format, set_user_formats
from sgcli.constraints.ref_bases import current_ref_bases, parse_ref_base, set_ref_bases
from sgcli.errors import UserError
from sgcli.limits import DEFAULT_MAX_BYTES, DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S, Limits, current_limits, set_limits

_PANEL = "Limits and cache"


def checked_value(flag: str, parse: Callable[[str], object]) -> Callable[[str], str]:
    """A click parser for `flag` that checks each value with `parse` as click reads it: a flag's
    mistake and a config file's (at its line) are exit 2 before the command runs."""

    def parser(value: str) -> str:
        try:
            parse(value)
        except UserError as exc:
            hint = f" ({exc.hint})" if exc.hint else ""
            raise typer.BadParameter(exc.message.removeprefix(f"{flag} {value!r}: ") + hint) from None
        return value

    return parser


_OPTIONS = {
    "compile_timeout": (
        Annotated[
            float,
            typer.Option(
                "--compile-timeout",
                envvar="SGCLI_COMPILE_TIMEOUT",
                help="Seconds one grammar compile may take before it is stopped (exit 2); 0 = no limit.",
                rich_help_panel=_PANEL,
            ),
        ],
        DEFAULT_TIMEOUT_S,
    ),
    "compile_memory": (
        Annotated[
            int,
            typer.Option(
                "--compile-memory",
                envvar="SGCLI_COMPILE_MEMORY",
                help="MB of memory one grammar compile may add before it is stopped (exit 2); 0 = no limit.",
                rich_help_panel=_PANEL,
            ),
        ],
        DEFAULT_MEMORY_MB,
    ),
    "max_constraint_bytes": (
        Annotated[
            int,
            typer.Option(
                "--max-constraint-bytes",
                envvar="SGCLI_MAX_CONSTRAINT_BYTES",
                help="Largest schema or grammar accepted, in bytes (exit 2 above it); 0 = no limit.",
                rich_help_panel=_PANEL,
            ),
        ],
        DEFAULT_MAX_BYTES,
    ),
    "no_cache": (
        Annotated[
            bool,
            typer.Option(
                "--no-cache",
                help="Compile afresh; neither read nor write the on-disk cache of compiled grammars.",
                rich_help_panel=_PANEL,
            ),
        ],
        False,
    ),
    "ref_base": (
        Annotated[
            list[str],
            typer.Option(
                "--ref-base",
                metavar="URL=DIR",
                parser=checked_value("--ref-base", parse_ref_base),
                help="Read a schema's $refs to URLs under URL from the folder DIR (sgcli fetches nothing); "
                "repeatable, the longest URL wins. E.g. --ref-base https://json.schemastore.org/=schemas/",
                rich_help_panel="Schema files",
            ),
        ],
        [],
    ),
    "format": (
        Annotated[
            list[str],
            typer.Option(
                "--format",
                metavar="NAME=REGEX",
                parser=checked_value("--format", parse_user_format),
                help="Define a schema `format` sgcli does not know (a schema using an unknown one is refused): "
                "a string of format NAME is one REGEX is found in, as `pattern` reads it; sgcli's checker "
                "enforces it. Repeatable. E.g. --format 'path=^[A-Za-z0-9_./-]+$'",
                rich_help_panel="Schema files",
            ),
        ],
        [],
    ),
}


def with_compile_limits(command: Callable) -> Callable:
    """`command` with the limit and cache flags added; they are applied before it runs."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        timeout, memory = kwargs.pop("compile_timeout"), kwargs.pop("compile_memory")
        max_bytes, no_cache = kwargs.pop("max_constraint_bytes"), kwargs.pop("no_cache")
        bases = tuple(parse_ref_base(value) for value in kwargs.pop("ref_base") or ())
        formats = tuple(parse_user_format(value) for value in kwargs.pop("format") or ())
        before = (current_limits(), cache_enabled(), current_ref_bases(), current_user_formats())
        try:
            set_limits(Limits(timeout_s=timeout, memory_mb=memory, max_bytes=max_bytes))
            set_cache_enabled(not no_cache)
            set_ref_bases(bases)
            set_user_formats(formats)
            return command(*args, **kwargs)
        finally:  # in-process callers (tests, embedding) get their settings back
            set_limits(before[0])
            set_cache_enabled(before[1])
            set_ref_bases(before[2])
            set_user_formats(before[3])

    signature = inspect.signature(command, eval_str=True)  # typer reads real annotations, not strings
    extra = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        for name, (annotation, default) in _OPTIONS.items()
    ]
    wrapper.__signature__ = signature.replace(parameters=[*signature.parameters.values(), *extra])
    wrapper.__annotations__ = {p.name: p.annotation for p in wrapper.__signature__.parameters.values()}
    return wrapper
