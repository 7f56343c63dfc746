"""Which files `sgcli lint DIR` reads: grammar files under a folder, minus what git ignores.

Inside a git work tree the list comes from git itself (tracked and untracked files,
without those .gitignore excludes); elsewhere hidden folders and the usual virtualenv
and build folders are skipped. In a folder, a `*.json` file is a schema when it is named
`*.schema.json` or reads as one (`$schema`, a schema keyword, or a JSON type at the top);
other JSON is data, left out and reported (`skipped`), so the count of files adds up. A
file named on the command line is always linted.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from sgcli.limits import DEFAULT_MAX_BYTES

GRAMMAR_SUFFIXES = (".gbnf", ".ebnf", ".lark", ".regex", ".re", ".schema.json", ".llg.json")
SKIPPED_DIRS = {"node_modules", "__pycache__", "venv", "build", "dist", "site-packages"}
# Top-level keys that only a JSON Schema has (data files rarely do), and the `type` values it takes.
# keywords only a schema has at its top level (a config file or data rarely does); `if`/`then`/`else`
# and the other applicators count too (a folder's `{"if": ..., "then": ...}` schema was passed over)
SCHEMA_KEYS = frozenset(
    "$schema $id $ref $dynamicRef $anchor $defs definitions properties patternProperties additionalProperties "
    "unevaluatedProperties propertyNames dependentSchemas dependentRequired prefixItems items contains "
    "unevaluatedItems anyOf oneOf allOf not if then else const enum".split()
)
JSON_TYPES = frozenset("object array string number integer boolean null".split())


def is_grammar_file(name: str) -> bool:
    return name.lower().endswith(GRAMMAR_SUFFIXES)


def expand(paths: list[str], skipped: list[tuple[str, str]] | None = None) -> list[str]:
    """Files as given, folders replaced by the grammar files inside them (sorted, no repeats).
    JSON files of a folder that are not schemas, and grammar or JSON names that are no regular file,
    go to `skipped` as (path, why)."""
    out: list[str] = []
    for path in paths:
        if path != "-" and os.path.isdir(path):
            for p in sorted(_files_under(path)):
                if not os.path.isfile(p) and os.path.exists(p):  # a FIFO or device would block or never end
                    if skipped is not None and (is_grammar_file(p) or p.lower().endswith(".json")):
                        skipped.append((p, "not a regular file: a FIFO or device could block the run"))
                elif is_grammar_file(p):
                    out.append(p)
                elif p.lower().endswith(".json"):
                    why = not_a_schema(p)
                    if why is None:
                        out.append(p)
                    elif skipped is not None:
                        skipped.append((p, f"not taken for a JSON Schema: {why}"))
        else:
            out.append(path)
    return list(dict.fromkeys(out))


def not_a_schema(path: str) -> str | None:
    """Why a `.json` file found in a folder is not taken for a JSON Schema, or None when it is one."""
    try:
        if os.path.getsize(path) > DEFAULT_MAX_BYTES:
            return f"larger than {DEFAULT_MAX_BYTES >> 20} MiB"
        doc = json.loads(Path(path).read_bytes())
    except OSError:  # unreadable (permissions): linted, so that the error is reported, not passed over
        return None
    except (ValueError, RecursionError):
        return "not readable as JSON"
    if isinstance(doc, bool):
        return None
    if not isinstance(doc, dict):
        return "its JSON is not an object"
    types = doc.get("type")
    types = types if isinstance(types, list) else [types]
    if SCHEMA_KEYS & doc.keys() or (types and all(isinstance(t, str) and t in JSON_TYPES for t in types)):
        return None
    return "no schema keyword at its top level"


def _files_under(folder: str) -> list[str]:
    listed = _git_files(folder)
    if listed is not None:
        return listed
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS]
        found += [os.path.join(root, f) for f in files]
    return found


def _git_files(folder: str) -> list[str] | None:
    """Files under `folder` that git does not ignore, or None outside a git work tree."""
    try:
        result = subprocess.run(
            ["git", "-C", folder, "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", "."],
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    names = [n for n in result.stdout.decode("utf-8", "surrogateescape").split("\0") if n]
    return [str(Path(folder) / n) for n in names if (Path(folder) / n).is_file()]
