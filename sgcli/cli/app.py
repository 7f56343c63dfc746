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
    add_completion=True,
)


def _version(value: bool) -> None:
    if value:
        from sgcli import __version__

        typer.echo(f"sgcli {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Structured generation and grammar development for language models.

    Settings come from flags, then SGCLI_* environment variables, then the nearest
    sgcli.toml or pyproject.toml [tool.sgcli] (see `sgcli config`).

    Exit codes: 0 ok, 1 findings (invalid output, lint findings, failing cases),
    2 bad input or usage, 3 internal error.
    """
    handles_errors(_apply_config)(ctx)


def _apply_config(ctx: typer.Context) -> None:
    """Make the configuration file's values the defaults of every subcommand's options."""
    import os

    from sgcli import config

    cfg = config.current()
    cache_dir = cfg.file_values.get("cache-dir")
    if cache_dir and not os.environ.get("SGCLI_CACHE_DIR") and cfg.path is not None:
        os.environ["SGCLI_CACHE_DIR"] = str((cfg.path.parent / os.path.expanduser(cache_dir)).resolve())
    commands = getattr(ctx.command, "commands", {})
    ctx.default_map = cfg.default_map({name: {p.name for p in cmd.params} for name, cmd in commands.items()})
    for name, values in ctx.default_map.items():  # `backend = "x"` for a repeatable --backend: ["x"]
        for param in commands[name].params:
            if getattr(param, "multiple", False) and isinstance(values.get(param.name), str):
                values[param.name] = [values[param.name]]


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
    from sgcli.cli import cache_cmd, config_cmd, schema_cmd

    app.command("schema", epilog=schema_cmd.EXAMPLES)(handles_errors(schema_cmd.schema))

    from sgcli.cli import bench_cmd

    app.command("bench", epilog=bench_cmd.EXAMPLES)(handles_errors(limited(bench_cmd.bench)))
    app.command("config", epilog=config_cmd.EXAMPLES)(handles_errors(config_cmd.show_config))
    app.add_typer(cache_cmd.app, name="cache")


_register()


def main() -> None:
    app()
