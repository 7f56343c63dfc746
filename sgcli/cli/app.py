"""The `sgcli` command: one thin module per subcommand, registered here."""

from __future__ import annotations

import typer

from sgcli.backends.bounded import set_overrun_handler
from sgcli.cli.coercion import Command, Group, check_value
from sgcli.cli.common import fail, handles_errors
from sgcli.cli.limit_options import with_compile_limits as limited
from sgcli.errors import UserError


def _version(value: bool) -> None:
    if value:
        from sgcli import __version__

        typer.echo(f"sgcli {__version__}")
        raise typer.Exit()


def root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", "-V", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Structured generation and grammar development for language models.

    Settings come from flags, then SGCLI_* environment variables, then the nearest
    sgcli.toml or pyproject.toml \\[tool.sgcli] (see `sgcli config`).

    Exit codes: 0 ok, 1 findings (invalid output, lint findings, failing cases),
    2 bad input or usage, 3 internal error.
    """
    handles_errors(_apply_config)(ctx)


def _apply_config(ctx: typer.Context) -> None:
    """Make the configuration file's values the defaults of every subcommand's options, each one
    checked as its option checks a flag (a misspelt choice is exit 2 at its line, with a did-you-mean)."""
    import os

    from sgcli import config

    cfg = config.current()
    cache_dir = cfg.file_values.get("cache-dir")
    if cache_dir and not os.environ.get("SGCLI_CACHE_DIR") and cfg.path is not None:
        resolved = str((cfg.path.parent / os.path.expanduser(cache_dir)).resolve())
        os.environ["SGCLI_CACHE_DIR"] = cfg.exported["SGCLI_CACHE_DIR"] = resolved
    ctx.default_map = checked_file_values(cfg, getattr(ctx.command, "commands", {}), ctx)


def checked_file_values(cfg, commands: dict, ctx: typer.Context) -> dict[str, dict]:
    """click's default_map of `commands` from the file's values, each checked by the option it defaults
    (exit 2 at its line). `sgcli config` checks them against every command, though it has none of those
    options: it showed a value every other command refuses, exit 0."""
    default_map = cfg.default_map({name: {p.name for p in cmd.params} for name, cmd in commands.items()})
    _check_env(cfg, commands, ctx)
    _check_per_file_ignores(cfg)
    for name, values in default_map.items():
        for param in commands[name].params:
            if param.name not in values:
                continue
            if getattr(param, "multiple", False) and isinstance(values[param.name], str):
                values[param.name] = [values[param.name]]  # `backend = "x"` for a repeatable --backend: ["x"]
            try:
                check_value(param, values[param.name], ctx)
            except typer.BadParameter as exc:
                key = cfg.key_of(param.name, name)
                raise UserError(
                    f"{key} = {cfg.file_values[key]!r}{cfg.inside()}: {exc.message}", location=cfg.location_of(key)
                ) from None
    return default_map


def _check_per_file_ignores(cfg) -> None:
    """lint.per-file-ignores' codes, checked as --ignore's are, at the glob's line: it defaults no option,
    so only lint read it, and its error named neither the file nor the line."""
    from sgcli.lint.select import unknown_selector

    for glob, codes in (cfg.file_values.get("lint.per-file-ignores") or {}).items():
        why = next(filter(None, map(unknown_selector, codes)), None)
        if why is not None:
            raise UserError(
                f"lint.per-file-ignores {glob!r} = {codes!r}{cfg.inside()}: {why}",
                location=cfg.location_of("lint.per-file-ignores", glob),
                hint="see `sgcli rule --all` for the codes",
            )


def _check_env(cfg, commands: dict, ctx: typer.Context) -> None:
    """Each SGCLI_* setting's value checked by the option it defaults, as the file's are: exit 2 naming the
    variable (`sgcli config` showed SGCLI_DTYPE=fp32 in force, exit 0; a command named its flag)."""
    import os

    from sgcli.config import KEYS

    for setting in cfg.settings():  # the type and range of each, exit 2 naming its variable
        key = KEYS[setting.key]
        if not setting.source.startswith("env "):
            continue
        refusals = []  # one variable serves several commands: a value one of them takes is not an error
        for param in (p for cmd in commands.values() for p in cmd.params):  # (SGCLI_BACKEND=all: lint's, not masks')
            envvar = getattr(param, "envvar", None)
            if param.name != key.param or key.env not in ([envvar] if isinstance(envvar, str) else envvar or ()):
                continue
            value = setting.value
            if getattr(param, "multiple", False) and isinstance(value, str):
                value = value.split()  # as click splits a repeatable option's variable
            try:
                check_value(param, value, ctx)
            except typer.BadParameter as exc:
                refusals.append(exc.message)
            else:
                refusals = None
                break
        if refusals:
            raise UserError(f"{key.env}={os.environ[key.env]!r}: {refusals[0]}") from None


# name -> (module in sgcli.cli, its command function or typer app, wrapped in the compile limits?)
# in `sgcli --help` order. A module is imported only when its command is built.
_COMMANDS: dict[str, tuple[str, str, bool]] = {
    "generate": ("generate", "generate", True),
    "backends": ("backends_cmd", "backends", False),
    "compare-backends": ("compare", "compare_backends", True),
    "tokenizer": ("tokenizer_cmd", "app", False),
    "template": ("template_cmd", "app", False),
    "compile": ("compile_cmd", "compile_files", True),
    "masks": ("masks_cmd", "masks", True),
    "test": ("test_cmd", "test", True),
    "convert": ("convert_cmd", "convert", True),
    "lint": ("lint_cmd", "lint", True),
    "rule": ("rule_cmd", "rule", False),
    "schema": ("schema_cmd", "schema", False),
    "bench": ("bench_cmd", "bench", True),
    "config": ("config_cmd", "show_config", False),
    "cache": ("cache_cmd", "app", False),
}


def build(names: list[str] | None = None) -> typer.Typer:
    """The `sgcli` app with the named subcommands (every one when None), importing only their modules."""
    import sys

    new = typer.Typer(
        name="sgcli",
        cls=Group,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
        add_completion=True,
    )
    new.callback()(root)
    for name in names or list(_COMMANDS):
        module_name, attr, limits = _COMMANDS[name]
        __import__(f"sgcli.cli.{module_name}")  # the import statement's path: -X importtime shows it
        module = sys.modules[f"sgcli.cli.{module_name}"]
        target = getattr(module, attr)
        if isinstance(target, typer.Typer):
            new.add_typer(target, name=name)
            continue
        fn = handles_errors(limited(target) if limits else target)
        new.command(name, cls=Command, epilog=module.EXAMPLES)(fn)
    return new


def _invoked(argv: list[str]) -> list[str] | None:
    """The subcommand a command line runs, when it names a known one: only it need be built (start-up
    time); None (build all) for `--help`, completion, no command or an unknown name (typer's error)."""
    first = next((a for a in argv if not a.startswith("-")), None)
    return [first] if first in _COMMANDS else None


_full: typer.Typer | None = None


def __getattr__(name: str):
    """`app`: every subcommand, built on first use (tests and tools that import the app)."""
    global _full
    if name != "app":
        raise AttributeError(name)
    if _full is None:
        _full = build()
    return _full


def main() -> None:
    import sys

    set_overrun_handler(_end_at_the_limit)  # this process may end itself; in-process callers keep going
    build(_invoked(sys.argv[1:]))()


def _end_at_the_limit(error) -> None:
    """A compile on the main thread passed --compile-timeout: say so and end the run with exit 2 (the
    compile cannot be stopped from outside its thread, and waiting for it is what the limit forbids)."""
    import os
    import sys

    from sgcli.backends.native_stderr import give_back_fd2

    sys.stdout.flush()
    give_back_fd2()  # the compile may be capturing its library's fd 2: the message goes to the terminal
    fail(error)
    sys.stderr.flush()
    os._exit(2)
