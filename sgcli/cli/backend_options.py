"""`--backend`, declared once: its choices are an Enum built from the backend registry, so
`--help`, shell completion and the exit-2 message for a typo all list them.

Two shapes: one backend (generate, masks: a name or 'auto') and several (compile, lint,
test, bench, compare-backends: `--backend a --backend b`, 'all' or 'auto'). The registry names
its backends without importing a grammar library, so `sgcli --help` stays fast. Commands
receive plain strings (the callback unwraps the Enum).
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Optional

import typer

from sgcli.backends import canonical_name, known_names
from sgcli.errors import did_you_mean


def _choices(*extra: str) -> type[Enum]:
    names = [*known_names(), *extra]
    return Enum("Backend", {n: n for n in names}, type=str)


OneBackend = _choices("auto")  # generate, masks
# SGCLI_BACKEND=all suits lint and its kind; here it is the one value said twice, so say why it is refused
OneBackend.refused_here = {"all": "'all' runs every backend in lint, compile, test and bench; this command takes one"}
# compile, test, bench, compare-backends, lint. 'auto' is the command's default (lint: the backends that
# start without torch; the others: all), so a configured `backend = "auto"` (generate's) suits them too.
SeveralBackends = _choices("all", "auto")


def _plain(value: Any) -> Any:
    """Enum members -> their registered names (vLLM's `guidance` -> llguidance), so commands (and
    JSON) see ordinary strings and never an alias."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return canonical_name(value.value if isinstance(value, Enum) else value)


_ONE_HELP = (
    "Grammar backend (`sgcli backends` marks the default); 'auto' tries them in the order "
    "`sgcli backends` shows and says what a fallback weakens; 'none' = unconstrained. vLLM's and "
    "SGLang's names work too: guidance = llguidance, outlines = outlines-core = outlines_core."
)


class Configured(str):
    """A backend name that came from sgcli.toml or SGCLI_BACKEND, not the command line: set for local
    runs, it does not apply where a server picks its own backend (`generate --engine`)."""

    source: str = ""


def _one(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> Any:
    """`_plain`, marking a value the command line did not give (`Configured`, saying where it came from)."""
    name = _plain(value)
    source = getattr(ctx.get_parameter_source(param.name), "name", None)  # typer may bring its own click
    if name is None or source in ("COMMANDLINE", "DEFAULT", None):
        return name
    marked = Configured(name)
    marked.source = "SGCLI_BACKEND" if source == "ENVIRONMENT" else "the config file's backend"
    return marked


BackendOpt = Annotated[
    Optional[OneBackend],
    typer.Option("--backend", "-b", envvar="SGCLI_BACKEND", callback=_one, help=_ONE_HELP, show_default=False),
]


def backends_option(help: str, *, envvar: bool = True) -> Any:
    """`--backend` for commands that run several backends: repeatable (SGCLI_BACKEND: space-separated)."""
    return typer.Option(
        "--backend",
        "-b",
        envvar="SGCLI_BACKEND" if envvar else None,
        callback=_plain,
        help=help + " Repeatable; vLLM's and SGLang's names work too (guidance, outlines).",
        show_default=False,
    )


def comma_names(value: str | None) -> list[str]:
    """Callback of compare-backends' older `--backends a,b`: each name checked like `--backend`'s
    (a usage error, exit 2, naming the choices)."""
    names = [n.strip() for n in (value or "").split(",") if n.strip()]
    allowed = [e.value for e in SeveralBackends]
    for name in names:
        if name not in allowed:
            raise typer.BadParameter(
                f"{name!r} is not one of " + ", ".join(map(repr, allowed)) + "." + did_you_mean(name, allowed),
                param_hint="'--backends'",
            )
    return [canonical_name(n) for n in names]


def chosen(values: list[str] | None, default: str = "all") -> list[str]:
    """The names given to a several-backends option, or [default] when none."""
    return list(values or []) or [default]
