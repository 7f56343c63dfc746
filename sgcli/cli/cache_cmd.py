"""`sgcli cache info|clear`: what sgcli keeps on disk, and a way to drop it."""

from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from sgcli import RECORD_SCHEMA_VERSION as VERSION
from sgcli.cache.paths import SECTIONS, TAG_NAME, cache_root, default_root, notify, tagged
from sgcli.cli.coercion import Command, Group
from sgcli.cli.common import JsonFlagOpt, OutputFormatOpt, err, handles_errors, json_line, output_format_of
from sgcli.cli.tables import print_table
from sgcli.errors import UserError, did_you_mean

app = typer.Typer(
    help="Inspect or clear sgcli's cache (converted models, compiled grammars).", no_args_is_help=True, cls=Group
)


def _left_out(errors: list[OSError]) -> None:
    """One notice for what could not be read (a task folder of /proc/1 holds dozens)."""
    if errors:
        first, more = errors[0], f" and {len(errors) - 1} more there" if len(errors) > 1 else ""
        notify(f"cannot read {first.filename} ({first.strerror}){more}: left out")


def _size(path: Path) -> tuple[int, int]:
    """(entries, bytes) under a cache section; entries are its immediate children. What cannot be
    read (another user's folder in a shared cache) is left out with a notice, never fatal."""
    entries = total = 0
    errors: list[OSError] = []
    for top, folders, files in os.walk(path, onerror=errors.append):
        if top == str(path):
            files = [name for name in files if name != TAG_NAME]  # sgcli's tag, not an entry
            entries += len(folders) + len(files)
        for name in files:
            try:
                st = os.stat(os.path.join(top, name), follow_symlinks=False)
            except OSError as exc:
                errors.append(exc)
                continue
            total += st.st_size if stat.S_ISREG(st.st_mode) else 0
    _left_out(errors)
    return entries, total


def _section_paths(root: Path) -> list[Path]:
    """The folders under the cache root; an entry that cannot be looked at is left out with a notice,
    a root that cannot be listed is exit 2 naming it."""
    try:
        children = sorted(root.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise UserError(
            f"cannot read the cache folder {root} ({exc.strerror})",
            hint="give yourself access to it, or set SGCLI_CACHE_DIR to another folder",
        ) from None
    folders = []
    for child in children:
        if child.name not in SECTIONS:  # not sgcli's: never listed, never cleared (a `cache-dir = "."`)
            continue
        try:
            if child.is_dir():
                folders.append(child)
        except OSError as exc:
            _left_out([exc])
    return folders


def _sections(root: Path) -> list[dict]:
    rows = []
    for section in _section_paths(root):
        entries, size = _size(section)
        rows.append(
            {
                "schema_version": VERSION,
                "section": section.name,
                "path": str(section),
                "entries": entries,
                "size_bytes": size,
            }
        )
    return rows


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


@app.command("info", cls=Command)
@handles_errors
def info(output_format: OutputFormatOpt = None, json_flag: JsonFlagOpt = False) -> None:
    """Where the cache is ($SGCLI_CACHE_DIR, else $XDG_CACHE_HOME/sgcli, else ~/.cache/sgcli) and its size."""
    root = cache_root()
    rows = _sections(root)
    fmt = output_format_of(output_format, json_flag)
    if os.environ.get("SGCLI_CACHE_DIR") == "":
        err.print(f"note: SGCLI_CACHE_DIR is empty, which counts as unset: the cache is the default {root}")
    if fmt == "json":
        size = sum(r["size_bytes"] for r in rows)
        json_line({"schema_version": VERSION, "root": str(root), "sections": rows, "size_bytes": size})
        return
    if fmt == "jsonl":
        for row in rows:
            json_line(row)
        return
    from rich.table import Table

    table = Table(title=f"cache: {root}", title_justify="left")
    for column in ("section", "entries", "size"):
        table.add_column(column, justify="right" if column != "section" else "left")
    for row in rows:
        table.add_row(row["section"], str(row["entries"]), _human(row["size_bytes"]))
    if not rows:
        err.print("the cache is empty")
        return
    print_table(table)


def _remove(folder: Path) -> list[tuple[str, OSError]]:
    """Remove `folder` as far as it can be: (path, error) of each part that stays."""
    errors: list[tuple[str, OSError]] = []
    if sys.version_info >= (3, 12):  # onerror is deprecated there
        shutil.rmtree(folder, onexc=lambda _fn, path, exc: errors.append((path, exc)))
    else:
        shutil.rmtree(folder, onerror=lambda _fn, path, info: errors.append((path, info[1])))
    return errors


@app.command("clear", cls=Command)
@handles_errors
def clear(
    section: Annotated[
        Optional[list[str]],
        typer.Argument(help="Sections to clear (see `sgcli cache info`); all of them when omitted."),
    ] = None,
    output_format: OutputFormatOpt = None,
    json_flag: JsonFlagOpt = False,
) -> None:
    """Delete cached entries; they are rebuilt on next use."""
    fmt = output_format_of(output_format, json_flag)
    root = cache_root()
    if os.environ.get("SGCLI_CACHE_DIR") == "":  # `SGCLI_CACHE_DIR=$UNSET_VAR`: not a wish to clear the default
        raise UserError(
            f"SGCLI_CACHE_DIR is set but empty, which counts as unset: clear would empty the default cache {root}",
            hint="unset SGCLI_CACHE_DIR to clear the default cache, or set it to the cache folder you meant",
        )
    present = {p.name: p for p in _section_paths(root)}
    names = sorted(SECTIONS)
    chosen = list(dict.fromkeys(section or sorted(present)))
    unknown = [s for s in chosen if s not in names]
    if unknown:
        raise UserError(
            f"no cache section named {', '.join(unknown)} in {root}." + did_you_mean(unknown[0], names),
            hint="sgcli's sections: " + ", ".join(names) + " (other folders there are not sgcli's: it leaves them)",
        )
    own_root = root.resolve() == default_root().resolve()  # a folder named for sgcli: its sections are sgcli's
    untagged = []
    if not chosen and fmt == "text":
        err.print(f"nothing to clear: the cache is empty ({root})")
    cleared, failed = [], []
    for name in chosen:
        if name not in present:  # a section sgcli has not filled yet, or one cleared before: nothing to do
            if fmt == "text":
                err.print(f"nothing to clear in {name} ({root / name})")
            continue
        if not own_root and not tagged(present[name]):
            untagged.append(present[name])
            continue
        errors = _remove(present[name])
        if errors:
            failed += errors
            continue
        cleared.append({"schema_version": VERSION, "section": name, "path": str(present[name])})
        if fmt == "jsonl":
            json_line(cleared[-1])
        elif fmt == "text":
            err.print(f"cleared {name} ({present[name]})")
    if fmt == "json":
        json_line({"schema_version": VERSION, "root": str(root), "cleared": cleared})
    if untagged:
        raise UserError(
            f"{', '.join(map(str, untagged))}: no {TAG_NAME} that sgcli writes into each cache folder it creates, so "
            f"it may not be sgcli's: left alone (cache-dir / SGCLI_CACHE_DIR is {root})",
            hint="if it is a cache of an older sgcli, remove it yourself; check that cache-dir names a cache folder",
        )
    if failed:
        (path, first), more = failed[0], f" and {len(failed) - 1} more" if len(failed) > 1 else ""
        raise UserError(
            f"cannot remove {path} ({first.strerror}){more}: the rest is cleared",
            hint="remove it yourself, or ask its owner to",
        )
