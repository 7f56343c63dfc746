"""Real-world JSON Schemas that other tools ship inside their PyPI wheels: a third corpus beside the
JSON Schema Store (`schema_store.py`) and Kubernetes (`kubernetes_schemas.py`), written by people who
never had sgcli in mind.

    pip download --no-deps -d WHEELS check-jsonschema==0.39.0 cfn-lint==1.58.0 nbformat==5.11.1 altair==6.3.0
    python benchmarks/wheel_schemas.py WHEELS OUT_DIR [--cfn 60] [--cfn-other 25] [--seed 5]

A second set, read first on 2026-12-05 (so it was not tuned on):

    pip download --no-deps -d WHEELS2 ansible-lint==26.10.1 cyclonedx-python-lib==11.12.0 openapi-spec-validator==0.9.0
    python benchmarks/wheel_schemas.py WHEELS2 OUT_DIR2

What it takes from each wheel (every other file is left alone):
  check-jsonschema  the vendored CI and config schemas (`builtin_schemas/vendor/*.json`: GitHub
                    workflows, GitLab CI, Azure Pipelines, Renovate, compose, ...), 26 files
  cfn-lint          CloudFormation: `--cfn` of its resource schemas (~1,900 under a resources/
                    folder) and `--cfn-other` of the rest (extensions, providers, functions), a
                    seeded sample of each
  nbformat          the Jupyter notebook format schemas (v3, v4.0 to v4.5)
  altair            the Vega-Lite and Vega themes schemas (Vega-Lite's is 1.9 MB: over the default
                    constraint limit, so an exit 2 that names the limit)
  ansible-lint      its schemas for playbooks, tasks, galaxy.yml, molecule, ... (18; they `$ref`
                    each other by file name)
  cyclonedx-python-lib  the CycloneDX SBOM schemas 1.2 to 1.7, SPDX's license list, JSF (11; the
                    BOM schemas `$ref` the other two by file name)
  openapi-spec-validator  the OpenAPI 2.0 to 3.2 schemas (5; 3.1 and 3.2 use `$dynamicRef`)
Each goes to OUT_DIR/<wheel>/<its path in the wheel>, unchanged, so the files a schema `$ref`s by name
sit beside it as they do in the wheel (sgcli bundles them: sgcli/constraints/schema_bundle.py). Then
(the scripts read a folder's `*.json` at any depth):
    python benchmarks/schema_crashes.py --folder OUT_DIR
    python benchmarks/auto_soundness.py --suite-only --own-only --folder OUT_DIR
"""

from __future__ import annotations

import argparse
import random
import zipfile
from pathlib import Path

# wheel project -> which of its files are taken (cfn-lint's are sampled in `write`)
_TAKE = {
    "check_jsonschema": lambda n: "/builtin_schemas/vendor/" in n,
    "nbformat": lambda n: n.startswith("nbformat/") and n.endswith(".json") and "nbformat.v" in n,
    "altair": lambda n: n.startswith("altair/vegalite/") and n.endswith(".json"),
    "ansible_lint": lambda n: n.startswith("ansiblelint/schemas/") and not n.endswith("__store__.json"),
    "cyclonedx_python_lib": lambda n: n.startswith("cyclonedx/schema/_res/"),
    "openapi_spec_validator": lambda n: n.startswith("openapi_spec_validator/resources/schemas/"),
}


def _members(wheel: zipfile.ZipFile) -> list[str]:
    return sorted(n for n in wheel.namelist() if n.endswith(".json"))


def write(wheels: Path, out: Path, cfn: int, cfn_other: int, seed: int) -> int:
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    written = 0
    for path in sorted(wheels.glob("*.whl")):
        project = path.name.split("-")[0]
        with zipfile.ZipFile(path) as wheel:
            names = _members(wheel)
            if project == "cfn_lint":
                schemas = [n for n in names if n.startswith("cfnlint/data/schemas/")]
                resources = [n for n in schemas if "/resources/" in n]  # schemas/resources/, other/resources/
                others = [n for n in schemas if "/resources/" not in n]
                chosen = rng.sample(resources, min(cfn, len(resources))) + rng.sample(
                    others, min(cfn_other, len(others))
                )
            elif project in _TAKE:
                chosen = [n for n in names if _TAKE[project](n)]
            else:
                continue
            for name in chosen:  # where the wheel has it: a `$ref` to a file beside it finds that file
                target = out / project / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(wheel.read(name))
                written += 1
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheels", type=Path, help="folder holding the downloaded wheels")
    parser.add_argument("out", type=Path, help="folder to write the schemas to")
    parser.add_argument("--cfn", type=int, default=60, help="CloudFormation resource schemas to sample")
    parser.add_argument("--cfn-other", type=int, default=25, help="other cfn-lint schemas to sample")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    count = write(args.wheels, args.out, args.cfn, args.cfn_other, args.seed)
    print(f"{count} schemas written to {args.out}")
    return 0 if count else 1


if __name__ == "__main__":
    raise SystemExit(main())
