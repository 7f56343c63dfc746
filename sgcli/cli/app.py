"""The `sgcli` command: one thin module per subcommand, registered here."""

from __future__ import annotations

import typer

from sgcli.cli.common import handles_errors

app = typer.Typer(
    name="sgcli",
    help="Structured generation and grammar development for language models.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    add_completion=False,
)


def _version(value: bool) -> None:
    if value:
        from sgcli import __version__

        typer.echo(f"sgcli {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Structured generation and grammar development for language models.

    Exit codes: 0 ok, 1 findings (invalid output, lint findings, failing cases),
    2 bad input or usage, 3 internal error.
    """


def _register() -> None:
    from sgcli.cli import generate

    app.command("generate", epilog=generate.EXAMPLES)(handles_errors(generate.generate))


_register()


def main() -> None:
    app()
