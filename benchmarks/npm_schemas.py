"""Real-world JSON Schemas that npm packages ship: a fourth corpus beside the JSON Schema Store
(`schema_store.py`), Kubernetes (`kubernetes_schemas.py`) and PyPI wheels (`wheel_schemas.py`),
read first on 2026-12-05 (so sgcli was not tuned on it).

    mkdir TGZ && cd TGZ && npm pack @schematics/angular@21.2.30 @angular-devkit/build-angular@21.2.24 \\
        @nestjs/schematics@11.1.0 @microsoft/api-extractor@7.60.2 @microsoft/rush-lib@5.179.0 \\
        @rushstack/heft@1.3.0 @aws-cdk/cloud-assembly-schema@55.7.0 @backstage/catalog-model@1.10.3 \\
        markdownlint@0.40.0 @biomejs/biome@2.6.9 @tauri-apps/cli@2.12.6 wrangler@4.86.0 \\
        @octokit/webhooks-schemas@7.6.1 @changesets/config@3.1.4 @jsonresume/schema@1.3.1 @asyncapi/specs@6.11.1
    python benchmarks/npm_schemas.py TGZ OUT_DIR

What it takes from each package: every `*.json` that is a JSON Schema (its `$schema` names
json-schema.org, or its file name says "schema" and it holds schema keywords), not `package.json`,
`tsconfig.json` or anything under `examples/`, each identical file once (packages ship the same
schema under `lib-esm/` and `lib-commonjs/`). From `@asyncapi/specs` only its bundled
`schemas/*.json` (AsyncAPI 1.0-3.1, each holding its definitions), not the ~700 split definition
files they are built from. Each goes to OUT_DIR/<package>/<its path in the package>, unchanged, so
a schema's relative `$ref`s find their files. Then (the scripts read a folder's `*.json` at any depth):

    python benchmarks/schema_crashes.py --folder OUT_DIR
    python benchmarks/auto_soundness.py --suite-only --own-only --folder OUT_DIR [--format NAME=REGEX ...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tarfile
from pathlib import Path, PurePosixPath

SKIPPED_NAMES = {"package.json", "tsconfig.json", "jsconfig.json"}
SCHEMA_KEYS = ("properties", "definitions", "$defs", "type", "$ref", "oneOf", "anyOf", "allOf")


def is_schema(name: str, data: bytes) -> bool:
    try:
        doc = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError):
        return False
    if not isinstance(doc, dict):
        return False
    declared = "json-schema" in str(doc.get("$schema", ""))
    return declared or ("schema" in name.lower() and any(k in doc for k in SCHEMA_KEYS))


def wanted(package: str, path: PurePosixPath) -> bool:
    if path.suffix != ".json" or path.name in SKIPPED_NAMES or "examples" in path.parts:
        return False
    if "node_modules" in path.parts:
        return False
    return not package.startswith("asyncapi-specs") or path.parts[:2] == ("package", "schemas")


def extract(tgz: Path, out: Path, seen: set[str]) -> int:
    package = tgz.name.removesuffix(".tgz")
    kept = 0
    with tarfile.open(tgz) as archive:
        for member in archive.getmembers():
            path = PurePosixPath(member.name)
            if not member.isfile() or ".." in path.parts or path.is_absolute() or not wanted(package, path):
                continue
            data = archive.extractfile(member).read()
            digest = hashlib.sha256(data).hexdigest()
            if digest in seen or not is_schema(path.name, data):
                continue
            seen.add(digest)
            target = out / package / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            kept += 1
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tgz_dir", type=Path, help="the folder `npm pack` wrote the packages to")
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    seen: set[str] = set()
    total = 0
    for tgz in sorted(args.tgz_dir.glob("*.tgz")):
        kept = extract(tgz, args.out, seen)
        total += kept
        print(f"{tgz.name}: {kept} schemas")
    print(f"{total} schemas in {args.out}")


if __name__ == "__main__":
    main()
