"""Where a `$ref` to a URL is read from: `--ref-base URL=DIR` (check-jsonschema's `--base-uri`,
jsonschema's registry), set once for the process by the command line or the config file.

sgcli fetches nothing, so a schema that names `https://json.schemastore.org/grunt-task` can only
be bundled (`schema_bundle`) when the user says which folder holds a copy of what that URL serves:
`--ref-base https://json.schemastore.org/=schemastore/` reads `schemastore/grunt-task.json`. The
longest prefix that matches wins; a path that climbs out of its folder (`../`) maps to nothing.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from sgcli.errors import UserError


@dataclass(frozen=True)
class RefBase:
    prefix: str  # an absolute URI ending in "/" or ":" ("https://json.schemastore.org/")
    folder: Path

    def __str__(self) -> str:
        return f"{self.prefix}={self.folder}"


_current: tuple[RefBase, ...] = ()


def parse_ref_base(value: str) -> RefBase:
    """`URL=DIR` as the flag and the config file give it (the config's DIR made relative to the file
    by `config`); exit 2 naming the value where the URL is not absolute or DIR is a file, checked
    before anything loads."""
    url, sep, folder = value.partition("=")
    url, folder = url.strip(), folder.strip()
    where = f"--ref-base {value!r}"
    if not sep or not url or not folder:
        raise UserError(
            f"{where}: expected URL=DIR",
            hint="e.g. --ref-base https://json.schemastore.org/=schemas/ reads $refs under that URL from schemas/",
        )
    parts = urlsplit(url)
    if not parts.scheme or len(parts.scheme) == 1:  # "C:" is a Windows drive, not a scheme
        raise UserError(f"{where}: {url!r} is not an absolute URI", hint="start it with its scheme: https://...")
    if parts.query or parts.fragment:
        raise UserError(f"{where}: {url!r} has a query or fragment; give the URL prefix the files sit under")
    if not url.endswith(("/", ":")):  # "https://host/a" would also match "https://host/ab/..."
        url += "/"
    path = Path(folder).expanduser()
    if path.exists() and not path.is_dir():
        raise UserError(
            f"{where}: {path} is not a folder", hint="DIR is the folder that holds the copies of the URL's files"
        )
    return RefBase(url, path)  # a folder that does not exist yet is named where a `$ref` needs it


def set_ref_bases(bases: tuple[RefBase, ...]) -> None:
    global _current
    _current = tuple(sorted(bases, key=lambda b: -len(b.prefix)))  # the longest prefix first


def current_ref_bases() -> tuple[RefBase, ...]:
    return _current


def mapped(uri: str) -> tuple[RefBase, Path | None] | None:
    """The base whose prefix `uri` (without its fragment) starts with, and the file it names there
    (None where the rest of the URI climbs out of the folder or holds a query); None: no base matches."""
    base = next((b for b in _current if uri.startswith(b.prefix)), None)
    if base is None:
        return None
    rest = uri[len(base.prefix) :]
    if urlsplit(rest).query:
        return base, None
    relative = posixpath.normpath(unquote(rest)) if rest else ""
    if relative in ("", ".", "..") or relative.startswith(("../", "/")):
        return base, None
    return base, base.folder / relative
