"""Settings that would otherwise be repeated on every call, read once like ruff reads its own.

Where a setting comes from, strongest first: the command-line flag, an `SGCLI_*`
environment variable, the nearest configuration file, the built-in default. The file is
the nearest `sgcli.toml` (or `.sgcli.toml`) upward from the working directory, or a
`pyproject.toml` with a `[tool.sgcli]` table, whichever comes first on the way up.

A `sgcli.toml` holds the settings themselves, at its top level (as ruff.toml does):

```toml
model = "Qwen/Qwen2.5-0.5B-Instruct"
threads = 1

[lint]
ignore = ["W002"]
```

and a `pyproject.toml` holds the same under `[tool.sgcli]` (and `[tool.sgcli.lint]`).
A `[tool.sgcli]` table pasted into a `sgcli.toml`, an unknown setting or a value of the
wrong type is exit 2 at its line, with the fix (a did-you-mean for a misspelt name).

An `SGCLI_*` variable set but empty counts as unset (as click reads an option's variable, and XDG
its own): the file's value or the default applies, and `sgcli config` says so.

Flags and environment variables reach commands through click (an option's `envvar`
and the context's `default_map`), so each command reads its parameters as usual.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sgcli.bounds import MAXIMA, check_setting
from sgcli.errors import Location, UserError, did_you_mean

CONFIG_NAMES = ("sgcli.toml", ".sgcli.toml")


@dataclass(frozen=True)
class Key:
    """One setting: its TOML name, the type it must have, its env var, and the commands' parameter."""

    name: str  # dotted for tables: "lint.select"
    type: type
    env: str | None
    param: str | None  # the command parameter it defaults (None: applied by sgcli itself)
    help: str
    sequence: bool = False  # a list of strings (env: comma-separated)
    from_file: Callable[[Any, Path], Any] | None = None  # a file's value read against the file's folder


KEYS: dict[str, Key] = {
    k.name: k
    for k in [
        Key("model", str, "SGCLI_MODEL", "model", "model for generate/compare-backends (HF id, folder, .gguf)"),
        Key(
            "backend",
            str,
            "SGCLI_BACKEND",
            "backend",
            "grammar backend of generate and masks; compile, lint, test and bench run only it instead of their"
            " default (compare-backends compares what its --backend names)",
        ),
        Key("device", str, "SGCLI_DEVICE", "device", "auto, cpu, cuda, cuda:N or mps"),
        Key("dtype", str, "SGCLI_DTYPE", "dtype", "auto, float32, bfloat16 or float16"),
        Key("threads", int, "SGCLI_THREADS", "threads", "torch CPU threads"),
        Key("model-impl", str, "SGCLI_MODEL_IMPL", "model_impl", "whose forward pass: auto, native or transformers"),
        Key("kernel", str, "SGCLI_KERNEL", "kernel", "CPU matrix-product kernel: auto, torch, onednn-f32, ..."),
        Key(
            "repetition-guard",
            bool,
            "SGCLI_REPETITION_GUARD",
            "repetition_guard",
            "end an output stuck repeating one span (true by default)",
        ),
        Key("cache-dir", str, "SGCLI_CACHE_DIR", None, "where converted models and compiled grammars are kept"),
        Key(
            "json-whitespace",
            str,
            "SGCLI_JSON_WHITESPACE",
            "json_whitespace",
            "compact or flexible (default: compact where a command generates, flexible in masks and test)",
        ),
        Key("lint.select", str, "SGCLI_LINT_SELECT", "select", "lint rule codes or prefixes to run", True),
        Key("lint.ignore", str, "SGCLI_LINT_IGNORE", "ignore", "lint rule codes or prefixes to skip", True),
        Key(
            "compile-timeout", float, "SGCLI_COMPILE_TIMEOUT", "compile_timeout", "seconds a compile may take (0: none)"
        ),
        Key("compile-memory", int, "SGCLI_COMPILE_MEMORY", "compile_memory", "MB a compile may add (0: no limit)"),
        Key("max-constraint-bytes", int, "SGCLI_MAX_CONSTRAINT_BYTES", "max_constraint_bytes", "largest grammar"),
        Key("max-prompt-bytes", int, "SGCLI_MAX_PROMPT_BYTES", "max_prompt_bytes", "longest --input line or prompt"),
        Key(
            "ref-base",
            str,
            None,
            "ref_base",
            "URL=DIR: a schema's $refs under URL read from DIR (relative to this file)",
            True,
            from_file=lambda items, folder: [_folder_relative(item, folder) for item in items],
        ),
        Key("format", str, None, "format", "NAME=REGEX: a schema format sgcli does not know, defined", True),
        Key("lint.per-file-ignores", dict, None, None, "glob -> rule codes to skip in matching files"),
        Key("lint.output-format", str, "SGCLI_LINT_OUTPUT_FORMAT", "output_format", "how lint prints its findings"),
    ]
}
COMMANDS_OF_TABLE = {"lint": ("lint",)}  # a [lint] key defaults only the lint command's parameter


@dataclass(frozen=True)
class Setting:
    key: str
    value: Any
    source: str  # "default", "env SGCLI_X", or the file (with its table)


@dataclass
class Config:
    path: Path | None = None
    table: str | None = None  # "[tool.sgcli]" in pyproject.toml, "" at the top of sgcli.toml
    file_values: dict[str, Any] = field(default_factory=dict)  # dotted key -> value
    exported: dict[str, str] = field(default_factory=dict)  # SGCLI_* set by sgcli from the file (cache-dir)
    text: str = ""  # the file's text, to point at a setting's line

    def inside(self) -> str:
        return f" in {self.table}" if self.table else ""

    def key_of(self, param: str, command: str) -> str:
        """The setting that gave `command` its `param`."""
        return next(name for name in self.file_values if KEYS[name].param == param and _reaches(name, command))

    def location_of(self, key: str, item: str | None = None) -> Location | None:
        return _Where(self.path, self.table or "", self.text).at(key, item) if self.path else None

    def origin(self) -> str:
        return f"{self.path} {self.table}".rstrip() if self.path else "none"

    def settings(self, environ: dict[str, str] | None = None) -> list[Setting]:
        """Every key's resolved value (flags aside) and where it came from."""
        environ = os.environ if environ is None else environ
        out = []
        for key in KEYS.values():
            if key.env and environ.get(key.env) and environ[key.env] != self.exported.get(key.env):
                out.append(Setting(key.name, _from_env(key, environ[key.env]), f"env {key.env}"))
            elif key.name in self.file_values:
                out.append(Setting(key.name, self.file_values[key.name], self.origin()))
            else:
                out.append(Setting(key.name, None, "default"))
        return out

    def get(self, name: str, environ: dict[str, str] | None = None) -> Any:
        return next(s.value for s in self.settings(environ) if s.key == name)

    def default_map(self, commands: dict[str, set[str]]) -> dict[str, dict[str, Any]]:
        """click's default_map: for each command, file values of the parameters it has.

        Environment variables are not folded in here: options name their `envvar`, and
        click ranks flag > envvar > default_map > default by itself."""
        out: dict[str, dict[str, Any]] = {}
        for name, value in self.file_values.items():
            key = KEYS[name]
            if key.param is None:
                continue
            for command, params in commands.items():
                if _reaches(name, command) and key.param in params:
                    if key.from_file is not None and self.path is not None:
                        value = key.from_file(value, self.path.parent)
                    out.setdefault(command, {})[key.param] = list(value) if key.sequence else value
        return out


def _folder_relative(item: str, folder: Path) -> str:
    """`URL=DIR` with a relative DIR made relative to `folder` (the config file's)."""
    url, sep, path = item.partition("=")
    if not sep or not path.strip() or Path(os.path.expanduser(path.strip())).is_absolute():
        return item
    return f"{url}={folder / path.strip()}"


def _reaches(name: str, command: str) -> bool:
    """Whether setting `name` defaults `command`'s parameter: top-level ones every command's, a [lint] one lint's."""
    table = name.split(".")[0] if "." in name else None
    return table is None or command in COMMANDS_OF_TABLE.get(table, ())


def _in_range(name: str, value: Any, what: str, location: Location | None = None) -> None:
    """A number setting within the range its flag accepts (`bounds.check_setting`), else exit 2 naming
    `what` (the file's line, or the environment variable) instead of a flag the user never gave."""
    if name not in MAXIMA:
        return
    try:
        check_setting(name, value, least=1 if name == "threads" else 0)
    except UserError as exc:
        raise UserError(f"{what} is out of range", location=location, hint=exc.hint) from None


def _from_env(key: Key, raw: str) -> Any:
    value = _env_value(key, raw)
    _in_range(key.name, value, f"{key.env}={raw!r}")
    return value


def _env_value(key: Key, raw: str) -> Any:
    if key.sequence:
        return [v.strip() for v in raw.split(",") if v.strip()]
    if key.type is bool:  # the words click reads for a boolean flag's envvar
        if raw.strip().lower() in ("1", "true", "t", "yes", "y", "on"):
            return True
        if raw.strip().lower() in ("0", "false", "f", "no", "n", "off", ""):
            return False
        raise UserError(f"{key.env}={raw!r}: expected true or false")
    if key.type in (int, float):
        try:
            return key.type(raw)
        except ValueError:
            raise UserError(f"{key.env}={raw!r}: expected a {'whole ' if key.type is int else ''}number") from None
    return raw


def find_config(start: Path | None = None) -> tuple[Path, str] | None:
    """The nearest config file upward from `start` and the table holding sgcli's settings."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        for name in CONFIG_NAMES:
            if (folder / name).is_file():
                return folder / name, ""
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file() and _has_sgcli_table(_peek(pyproject)):
            return pyproject, "[tool.sgcli]"
    return None


def _has_sgcli_table(text: str) -> bool:
    """Whether a pyproject.toml sets `tool.sgcli`, in any TOML spelling (`[tool]` then `sgcli = 5` was
    passed over, silently: `_sgcli_table` then refuses what is not a table). One that is not TOML counts
    where it names `[tool.sgcli`, so reading it reports the syntax error."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10, as `_read_toml`
        import tomli as tomllib

    if "sgcli" not in text:
        return False
    try:
        tool = tomllib.loads(text).get("tool")
    except (tomllib.TOMLDecodeError, RecursionError):
        return "[tool.sgcli" in text
    if isinstance(tool, dict):
        return "sgcli" in tool
    return "[tool.sgcli" in text  # `tool` is no table: reading it says so (`tool = 5` beside a mention)


def _peek(pyproject: Path) -> str:
    """A pyproject.toml's text, to see whether it mentions sgcli's table; one that cannot be read is
    exit 2 naming it (it may hold sgcli's settings: running without them would be a silent change)."""
    try:
        return _bounded_text(pyproject, errors="replace")
    except OSError as exc:
        raise UserError(f"cannot read the configuration: {exc.strerror}", location=Location(str(pyproject))) from None


def load_config(start: Path | None = None) -> Config:
    found = find_config(start)
    if found is None:
        return Config()
    path, table = found
    text, data = _read_toml(path)
    if table:
        data = _sgcli_table(data, path, text)
    elif isinstance(data.get("tool"), dict):
        raise UserError(
            f"{path.name} holds the settings themselves, not a [tool.sgcli] table (that table is pyproject.toml's)",
            location=Location(str(path), _line_of(text, r"\[\s*tool\b")),
            hint="delete the [tool.sgcli] line, and write [tool.sgcli.lint] as [lint]",
        )
    return Config(path, table, _flatten(data, _Where(path, table, text)), text=text)


def _sgcli_table(data: dict, path: Path, text: str) -> dict:
    """pyproject.toml's `[tool.sgcli]` table ({} where the file only mentions it); `tool` or
    `tool.sgcli` set to something that is not a table is exit 2 at its line."""
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise UserError(
            f"'tool' must be a table, not {tool!r}", location=Location(str(path), _line_of(text, r"tool\s*="))
        )
    table = tool.get("sgcli", {})
    if not isinstance(table, dict):
        where = Location(str(path), _line_of(text, r"sgcli\s*=") or _line_of(text, r"\[\s*tool\s*\]"))
        raise UserError(f"'tool.sgcli' must be a table of sgcli's settings, not {table!r}", location=where)
    return table


def _read_toml(path: Path) -> tuple[str, dict]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    try:
        text = _bounded_text(path)
        return text, tomllib.loads(text)
    except RecursionError:  # tomllib recurses per nested array or inline table: `a = [[[...]]]`
        raise UserError(
            "a value nested too deeply for Python's TOML reader (it recurses per level)",
            location=Location(str(path)),
            hint="flatten the nested arrays or inline tables",
        ) from None
    except OSError as exc:
        raise UserError(f"cannot read the configuration: {exc.strerror}", location=Location(str(path))) from None
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 text at byte {exc.start}", location=Location(str(path))) from None
    except tomllib.TOMLDecodeError as exc:
        at = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        line, col = (int(at.group(1)), int(at.group(2))) if at else (None, None)
        message = re.sub(r" \(at (line \d+, column \d+|end of document)\)", "", str(exc))
        raise UserError(f"invalid TOML: {message}", location=Location(str(path), line, col)) from None


MAX_CONFIG_BYTES = 1 << 20  # read on every command: a 160 MB pyproject.toml took 73 s and 862 MB


def _bounded_text(path: Path, errors: str = "strict") -> str:
    """The file's text, read only from a regular file (a FIFO would wait for a writer) and only up to
    MAX_CONFIG_BYTES: past it, exit 2."""
    from sgcli.regular_files import FileTooLarge, NotARegularFile, read_regular

    try:
        return read_regular(path, limit=MAX_CONFIG_BYTES).decode("utf-8", errors)
    except NotARegularFile:
        raise UserError(
            "not a regular file: sgcli reads its settings from a file", location=Location(str(path))
        ) from None
    except FileTooLarge:
        raise UserError(
            f"the configuration file is over {MAX_CONFIG_BYTES:,} bytes, which no settings file needs",
            location=Location(str(path)),
            hint="keep sgcli's settings in a small sgcli.toml beside it (it is read first)",
        ) from None


@dataclass(frozen=True)
class _Where:
    """The file being read, for messages: its path, its table, its text (to find a key's line)."""

    path: Path
    table: str
    text: str

    def inside(self) -> str:
        return f" in {self.table}" if self.table else ""

    def at(self, raw_key: str, item: str | None = None) -> Location:
        """Where `raw_key` (or, given, its table's entry `item`, such as a per-file-ignores glob) is set:
        its `key =` line, else its `[table]` header. A dotted key counts in either place (`a.b.c = 1`,
        `lint.select =`, `[a.b]`): such a key had no line."""
        line = (_key_line(self.text, item) if item else None) or _key_line(self.text, raw_key.rpartition(".")[2])
        return Location(str(self.path), line)


_PREFIX = r"(?:[\w\"'-]+\s*\.\s*)*"  # the dotted key parts before a name: `lint.`, `tool.sgcli.`


def _key_line(text: str, name: str) -> int | None:
    """The line that sets key `name` (bare or quoted, maybe the last or a middle part of a dotted key),
    else the `[table]` header naming it."""
    key = rf"[\"']?{re.escape(name)}[\"']?\s*"
    return _line_of(text, rf"{_PREFIX}{key}[=.]") or _line_of(text, rf"\[\s*{_PREFIX}{key}[\].]")


def _line_of(text: str, pattern: str) -> int | None:
    """The 1-based line where `pattern` starts a line (after blanks), or None."""
    m = re.search(rf"^[ \t]*{pattern}", text, re.M)
    return text.count("\n", 0, m.start()) + 1 if m else None


def _flatten(data: dict, where: _Where) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for raw_key, value in data.items():
        if isinstance(value, dict) and raw_key in COMMANDS_OF_TABLE:
            for sub, sub_value in value.items():
                out[_check(f"{raw_key}.{sub}", sub_value, where)] = sub_value
        else:
            out[_check(raw_key, value, where)] = value
    return out


def _check(raw_key: str, value: Any, where: _Where) -> str:
    name = raw_key.replace("_", "-")
    key = KEYS.get(name)
    if key is None and name in COMMANDS_OF_TABLE:  # `lint = 5`: a table's name given a value
        raise UserError(f"'{raw_key}' must be a table ([{raw_key}]), not {value!r}", location=where.at(raw_key))
    if key is None:
        table = name.rpartition(".")[0]  # `[lint] selct`: compared with the keys of that table
        names = [k for k in KEYS if k.startswith(table + ".")] if table else [*KEYS, *COMMANDS_OF_TABLE]
        raise UserError(
            f"unknown setting '{raw_key}'{where.inside()}." + did_you_mean(name, names),
            location=where.at(raw_key),
            hint="known settings: " + ", ".join(KEYS) + " (`sgcli config` lists them)",
        )
    ok = (
        isinstance(value, list) and all(isinstance(v, str) for v in value)
        if key.sequence
        else isinstance(value, bool)
        if key.type is bool
        else isinstance(value, (int, float) if key.type is float else key.type) and not isinstance(value, bool)
    )
    if key.name == "lint.per-file-ignores":
        ok = isinstance(value, dict) and all(
            isinstance(v, list) and all(isinstance(c, str) for c in v) for v in value.values()
        )
    if ok and key.type is str and not key.sequence and not value.strip():  # `cache-dir = ""` meant the default
        raise UserError(
            f"'{raw_key}' is empty", location=where.at(raw_key), hint="give a value, or delete the line for the default"
        )
    if ok:  # a number the flag's own check would refuse: refused here, at its line
        _in_range(name, value, f"'{raw_key}' = {value!r}", where.at(raw_key))
    if not ok:
        expected = "a list of strings" if key.sequence else key.type.__name__
        if key.name == "lint.per-file-ignores":
            expected = 'a table of glob = ["CODE", ...]'
        raise UserError(f"'{raw_key}' must be {expected}, not {value!r}", location=where.at(raw_key))
    return name


_current: Config | None = None


def current() -> Config:
    """The configuration of this process (loaded once, from the working directory)."""
    global _current
    if _current is None:
        _current = load_config()
    return _current


def reset() -> None:
    """Forget the loaded configuration (tests change directories)."""
    global _current
    _current = None
