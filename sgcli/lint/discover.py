"""Which files `sgcli lint DIR` reads: grammar files under a folder, minus what git ignores.

Inside a git work tree the list comes from git itself (tracked and untracked files,
without those .gitignore excludes); elsewhere hidden folders and the usual virtualenv
and build folders are skipped. In a folder, JSON files count as schemas only when named
`*.schema.json` (other JSON is data); a file named on the command line is always linted.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

GRAMMAR_SUFFIXES = (".gbnf", ".ebnf", ".lark", ".regex", ".re", ".schema.json", ".llg.json")
SKIPPED_DIRS = {"node_modules", "__pycache__", "venv", "build", "dist", "site-packages"}


def is_grammar_file(name: str) -> bool:
    return name.lower().endswith(GRAMMAR_SUFFIXES)


def expand(paths: list[str]) -> list[str]:
    """Files as given, folders replaced by the grammar files inside them (sorted, no repeats)."""
    out: list[str] = []
    for path in paths:
        if path != "-" and os.path.isdir(path):
            out += sorted(p for p in _files_under(path) if is_grammar_file(p))
        else:
            out.append(path)
    return list(dict.fromkeys(out))


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
