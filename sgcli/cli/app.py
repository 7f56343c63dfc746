"""The `sgcli` command: one thin module per subcommand, registered here."""

from __future__ import annotations

import typer

from sgcli.cli.common import handles_errors
from sgcli.cli.limit_options import with_compile_limits as limited

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

    app.command("generate", epilog=generate.EXAMPLES)(handles_errors(limited(generate.generate)))
    from sgcli.cli import backends_cmd

    app.command("backends", epilog=backends_cmd.EXAMPLES)(handles_errors(backends_cmd.backends))
    from sgcli.cli import compare

    app.command("compare-backends", epilog=compare.EXAMPLES)(handles_errors(limited(compare.compare_backends)))
    from sgcli.cli import template_cmd, tokenizer_cmd

    app.add_typer(tokenizer_cmd.app, name="tokenizer")
    app.add_typer(template_cmd.app, name="template")
    from sgcli.cli import compile_cmd, convert_cmd, masks_cmd, test_cmd

    app.command("compile", epilog=compile_cmd.EXAMPLES)(handles_errors(limited(compile_cmd.compile_files)))
    app.command("masks", epilog=masks_cmd.EXAMPLES)(handles_errors(limited(masks_cmd.masks)))
    app.command("test", epilog=test_cmd.EXAMPLES)(handles_errors(limited(test_cmd.test)))
    app.command("convert", epilog=convert_cmd.EXAMPLES)(handles_errors(limited(convert_cmd.convert)))
    from sgcli.cli import lint_cmd, rule_cmd

    app.command("lint", epilog=lint_cmd.EXAMPLES)(handles_errors(limited(lint_cmd.lint)))
    app.command("rule", epilog=rule_cmd.EXAMPLES)(handles_errors(rule_cmd.rule))


_register()


def main() -> None:
    app()
