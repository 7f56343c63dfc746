"""`sgcli cache info|clear`: what sgcli keeps on disk, and a way to drop it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated, Optional

import typer

from sgcli import RECORD_SCHEMA_VERSION as VERSION
from sgcli.cache.paths import SECTIONS, cache_root
from sgcli.cli.coercion import Command, Group
from sgcli.cli.common import JsonFlagOpt, OutputFormatOpt, err, handles_errors, json_line, output_format_of
from sgcli.cli.tables import print_table
from sgcli.errors import UserError, did_you_mean

app = typer.Typer(
    help="Inspect or clear sgcli's cache (converted models, compiled grammars).", no_args_is_help=True, cls=Group
)


def _size(path: Path) -> tuple[int, int]:
    """(entries, bytes) under a cache section; entries are its immediate children."""
    entries = total = 0
    for child in path.iterdir():
        entries += 1
        files = [child] if child.is_file() else (p for p in child.rglob("*") if p.is_file())
        total += sum(f.stat().st_size for f in files if not f.is_symlink())
    return entries, total


def _sections(root: Path) -> list[dict]:
    if not root.is_dir():
        return []
    rows = []
    for section in sorted(p for p in root.iterdir() if p.is_dir()):
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
    present = {r["section"]: Path(r["path"]) for r in _sections(root)}
    names = sorted({*present, *SECTIONS})  # sgcli's own sections, kept or not, and any other folder there
    chosen = list(dict.fromkeys(section or sorted(present)))
    unknown = [s for s in chosen if s not in names]
    if unknown:
        raise UserError(
            f"no cache section named {', '.join(unknown)} in {root}." + did_you_mean(unknown[0], names),
            hint="sections: " + ", ".join(names),
        )
    if not chosen and fmt == "text":
        err.print(f"nothing to clear: the cache is empty ({root})")
    cleared = []
    for name in chosen:
        if name not in present:  # a section sgcli has not filled yet, or one cleared before: nothing to do
            if fmt == "text":
                err.print(f"nothing to clear in {name} ({root / name})")
            continue
        try:
            shutil.rmtree(present[name])
        except OSError as exc:
            raise UserError(f"cannot clear {present[name]}: {exc.strerror}") from None
        cleared.append({"schema_version": VERSION, "section": name, "path": str(present[name])})
        if fmt == "jsonl":
            json_line(cleared[-1])
        elif fmt == "text":
            err.print(f"cleared {name} ({present[name]})")
    if fmt == "json":
        json_line({"schema_version": VERSION, "root": str(root), "cleared": cleared})
