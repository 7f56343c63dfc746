"""Is what sgcli generates with guaranteed? Invalid instances accepted through sgcli's own matcher.

For every schema (JSON-Schema-Test-Suite draft2020-12, sgcli's own cases in tests/conformance/,
keyword_positions.json among them, and with --real the real-world schemas installed packages
ship, with instances derived from them), the backend (`auto` by default) compiles it as
`generate` does (`compile_for`: grammar + sgcli's schema checker), and every test instance is fed
token by token to

  the bare grammar (the backend's own matcher): what the backend alone lets through;
  sgcli's matcher (grammar + checker): what generation can produce.

Counted: schemas compiled, refused by the backend (a positioned error), refused because some
keyword is enforced by nothing (exit 2 before generation), over the compile time limit; invalid
instances accepted and valid ones rejected, bare and checked. Every invalid instance the bare
grammar accepts must be on a keyword sgcli names (lint J001/J002/S002 or the record's `weakened`).
Goal: 0 invalid instances accepted through sgcli's matcher, >= 99% of schemas compiled or
explicitly refused within the compile time limit, nothing unnamed.

Compiles against lint's 256-byte vocabulary (what `sgcli lint` uses without --tokenizer).

    .venv/bin/python benchmarks/auto_soundness.py [--suite-only | --own-only] [--real] [--backend NAME]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OWN = ROOT / "tests" / "conformance"
COMPILE_TIMEOUT_S = 10.0
# Deriving a schema's instances (lint's builder and probes) runs in a forked child under these limits:
# on the 744 KB azure-pipelines schema it once ran for over 10 minutes. A schema past them is still
# compiled and counted; it is tested with no derived instances and counted in `instances_not_derived`.
DERIVE_TIMEOUT_S = 60.0
DERIVE_MEMORY_MB = 4096


# The suite's folders and the `$schema` each schema is read under: the suite's schemas leave their draft
# to the harness, and sgcli reads a schema without `$schema` as 2020-12.
DRAFTS = {
    "draft2020-12": "https://json-schema.org/draft/2020-12/schema",
    "draft2019-09": "https://json-schema.org/draft/2019-09/schema",
    "draft7": "http://json-schema.org/draft-07/schema#",
    "draft6": "http://json-schema.org/draft-06/schema#",
    "draft4": "http://json-schema.org/draft-04/schema#",
}


def suite_dir(draft: str = "draft2020-12") -> Path:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from corpus_paths import require

    return require("json-schema-test-suite") / "tests" / draft


def cases(own: bool, suite: bool, real: bool = False, folder: Path | None = None, draft: str = "draft2020-12"):
    """(source, description, schema, tests) for every schema."""
    case_folders = ([OWN] if own else []) + ([suite_dir(draft)] if suite else [])
    for cases_in in case_folders:  # not `folder`: that is the --folder argument, read below
        if not cases_in.is_dir():
            raise SystemExit(f"not found: {cases_in} (set SGCLI_CORPORA for the suite)")
        declared = DRAFTS[draft] if cases_in != OWN else None
        for path in sorted(cases_in.glob("*.json")):
            for case in json.loads(path.read_text(encoding="utf-8")):
                schema = case["schema"]
                if declared and isinstance(schema, dict) and "$schema" not in schema:
                    schema = {"$schema": declared, **schema}
                yield path.stem, case["description"], schema, case["tests"]
    if real:
        yield from real_world_cases(real_world_files())
    if folder is not None:  # any folder of schemas, e.g. the JSON Schema Store catalogue (schema_store.py)
        from corpus_paths import json_files

        yield from real_world_cases([(path, None) for path in json_files(folder)])


# Real-world schemas on this machine, where present (nothing is fetched): (glob, data file beside it or None)
SYSTEM_SCHEMAS = (
    ("/usr/share/cmake-*/Help/manual/presets/schema.json", "example.json"),  # CMakePresets.json
    ("/usr/share/iso-codes/json/schema-*.json", "iso_{}.json"),  # ISO 3166, 639, 4217, 15924 code lists
)
MAX_DATA_BYTES = 64 << 10  # a data file bigger than this is cut to its first entries
MUTATIONS = 40  # derived invalid instances per real instance, at most


def real_world_files() -> list[tuple[Path, Path | None]]:
    """(schema, a real instance of it or None): what installed packages ship (setuptools' pyproject tables,
    jsonschema's benchmark schema, the meta-schemas and their vocabularies) and system data (SYSTEM_SCHEMAS)."""
    import glob
    import importlib.util

    found: list[tuple[Path, Path | None]] = []
    for package, pattern in (
        ("setuptools", "config/*.schema.json"),
        ("jsonschema", "benchmarks/issue232/*.json"),
        ("jsonschema_specifications", "schemas/*/metaschema.json"),
        ("jsonschema_specifications", "schemas/*/vocabularies/*"),
    ):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            for folder in spec.submodule_search_locations:
                found += [(p, None) for p in sorted(Path(folder).glob(pattern)) if p.is_file()]
    for pattern, data in SYSTEM_SCHEMAS:
        for name in sorted(glob.glob(pattern)):
            path = Path(name)
            beside = path.parent / data.format(path.stem.removeprefix("schema-"))
            found.append((path, beside if beside.is_file() else None))
    return found


def real_world_cases(files: list[tuple[Path, Path | None]]):
    """Each real schema with instances: its real data where there is some (cut to its first entries) and
    mutations of it, else one valid instance built by lint's builder and, per keyword, one that breaks
    that keyword alone (lint's probes). Every verdict is jsonschema's."""
    from sgcli.lint.schema_instances import validator
    from sgcli.lint.schema_probes import keyword_probes

    for path, data in files:
        try:
            schema = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            continue
        schema = _bundled(path, schema)
        if not isinstance(schema, (dict, bool)):
            continue
        check = validator(schema)
        tests = []
        if data is not None:
            instance = _first_entries(json.loads(data.read_text(encoding="utf-8")))
            if check.is_valid(instance):
                tests.append({"description": f"real data ({data.name})", "data": instance, "valid": True})
                tests += [
                    {"description": f"mutated: {why}", "data": bad, "valid": False}
                    for why, bad in _mutations(instance)
                    if not check.is_valid(bad)
                ][:MUTATIONS]
        if not tests:
            tests = _derived(schema, keyword_probes)
        yield f"real:{path.parent.name}", path.name, schema, tests


def _bundled(path: Path, schema):
    """The schema with the files its `$ref`s name inlined, as `--schema FILE` reads it
    (sgcli/constraints/schema_bundle.py); as written where there are none, or where sgcli refuses
    the file (the compile then refuses it as `generate` would)."""
    from sgcli.constraints.sources import from_file
    from sgcli.errors import UserError

    try:
        spec = from_file(str(path))
    except UserError:
        return schema
    return json.loads(spec.text) if spec.source_map is not None else schema


def _derived(schema, keyword_probes) -> list[dict]:
    """A valid instance and one per keyword that breaks it alone, derived in a bounded child. None of
    them when no valid instance can be built (recursion, conflicts); a `derive_limit` marker when the
    derivation ran past its limits (the schema is then compiled and counted, not tested)."""
    from sgcli.limits import LimitHit, run_bounded

    def derive():
        try:
            base, probes = keyword_probes(schema)
        except Exception:  # noqa: BLE001 - nothing derivable: compile only
            return []
        tests = [{"description": "derived valid", "data": base, "valid": True}]
        return tests + [{"description": f"breaks {p.keyword}", "data": p.instance, "valid": False} for p in probes]

    try:
        return run_bounded(derive, timeout_s=DERIVE_TIMEOUT_S, memory_mb=DERIVE_MEMORY_MB)
    except LimitHit as hit:
        return [{"derive_limit": hit.kind}]


def _first_entries(value, keep: int = 3):
    """`value` with every list cut to its first `keep` entries (a code list of thousands walks slowly)."""
    if isinstance(value, list):
        return [_first_entries(v, keep) for v in value[:keep]]
    if isinstance(value, dict):
        return {k: _first_entries(v, keep) for k, v in value.items()}
    return value


def _mutations(value, path: tuple = ()):
    """(what changed, the instance with it changed) for small changes at every position of `value`."""
    import copy

    def at(root, path, change):
        root = copy.deepcopy(root)
        node = root
        for part in path[:-1]:
            node = node[part]
        change(node, path[-1])
        return root

    found = []
    stack = [((), value)]
    while stack:
        where, node = stack.pop()
        shown = "/" + "/".join(map(str, where))
        if isinstance(node, dict):
            found.append(
                (f"extra property at {shown}", at({"r": value}, ("r", *where), lambda n, k: n[k].update(zz_extra=1)))
            )
            for key, child in node.items():
                found.append((f"{shown}/{key} removed", at({"r": value}, ("r", *where, key), lambda n, k: n.pop(k))))
                stack.append(((*where, key), child))
        elif isinstance(node, list) and node:
            found.append((f"{shown} emptied", at({"r": value}, ("r", *where), lambda n, k: n[k].clear())))
            found.append(
                (f"{shown} repeats an item", at({"r": value}, ("r", *where), lambda n, k: n[k].append(n[k][0])))
            )
            stack += [((*where, i), child) for i, child in enumerate(node[:2])]
        for other in (12345, "zz!", None, True, [], {}):
            if where and type(other) is not type(node):
                found.append(
                    (
                        f"{shown} = {json.dumps(other)}",
                        at({"r": value}, ("r", *where), lambda n, k, o=other: n.__setitem__(k, o)),
                    )
                )
    return [(why, changed["r"]) for why, changed in found]


def named_keywords(compiled, spec) -> set[str]:
    """Keywords sgcli names for this backend: lint's J001/J002/S002 and the record's `weakened`."""
    import re

    from sgcli.backends.bounded import CompileLimitError
    from sgcli.backends.keyword_coverage import weakened_keywords
    from sgcli.lint import Linter, LintOptions

    named = {w["keyword"] for w in weakened_keywords(compiled)}
    try:
        found = Linter(LintOptions(backend=compiled.backend, json_options=spec.json_options)).lint_spec(spec)
    except CompileLimitError:  # lint's own compile ran past the limit this time (a loaded machine)
        return named
    for d in found.diagnostics:
        if d.code in ("J001", "J004", "J005"):
            named.update(re.findall(r"`([^`]+)`", d.message)[:1])
        named.update(p.rsplit("/", 1)[-1] for p in re.findall(r"\(at (/[^)]*)\)", d.message))
    return named


def explained(schema, instance, named: set[str]) -> bool:
    """Whether the named keywords account for the violation: with every one of them removed from
    every subschema, the instance validates (so what the backend let through is what sgcli named)."""
    import copy

    from sgcli.backends.schema_warnings import iter_subschemas
    from sgcli.lint.schema_instances import validator

    relaxed = copy.deepcopy(schema)
    for _, node in list(iter_subschemas(relaxed)):
        for key in named & set(node):
            del node[key]
    try:
        return validator(relaxed).is_valid(instance)
    except Exception:  # a $ref jsonschema cannot resolve: nothing explains it
        return False


_COUNTS = (
    "schemas",
    "compiled",
    "refused_by_backend",
    "refused_unenforced",
    "over_time_limit",
    "instances",
    "accepted_invalid",
    "accepted_invalid_bare",
    "rejected_valid",
    "rejected_valid_bare",
    "checked_schemas",
    "instances_not_derived",
)


def check(
    own: bool = True,
    suite: bool = True,
    real: bool = False,
    backend: str = "auto",
    progress=None,
    folder: Path | None = None,
    draft: str = "draft2020-12",
) -> dict:
    from sgcli.backends import compile_for
    from sgcli.backends.bounded import CompileLimitError
    from sgcli.backends.keyword_coverage import compiled_gaps, unchecked
    from sgcli.backends.schema_checker import CheckedCompiled
    from sgcli.constraints.spec import ConstraintSpec, Kind
    from sgcli.errors import UserError
    from sgcli.limits import Limits, set_limits
    from sgcli.lint.runner import byte_vocab
    from sgcli.lint.schema_checks import accepts

    set_limits(Limits(timeout_s=COMPILE_TIMEOUT_S))
    vocab = byte_vocab()
    report: dict = dict.fromkeys(_COUNTS, 0)
    report.update(
        backend=backend, by_backend={}, leaks=[], unnamed=[], not_compiled=[], rejected_valid_cases=[], not_derived=[]
    )
    for source, description, schema, tests in cases(own, suite, real, folder, draft):
        report["schemas"] += 1
        spec = ConstraintSpec(Kind.JSON_SCHEMA, json.dumps(schema), f"{source}: {description}")
        started = time.perf_counter()
        try:
            compiled, _ = compile_for(backend, spec, vocab)
        except CompileLimitError as exc:
            report["over_time_limit"] += 1
            report["not_compiled"].append(f"{spec.name}: {exc.message.splitlines()[0][:120]}")
            continue
        except UserError as exc:
            report["refused_by_backend"] += 1
            report["not_compiled"].append(f"{spec.name}: {exc.message.splitlines()[0][:120]}")
            continue
        if time.perf_counter() - started > COMPILE_TIMEOUT_S:
            report["over_time_limit"] += 1
        gaps = compiled_gaps(compiled)
        if unchecked(gaps):  # generate refuses it (exit 2) unless --allow-unenforced
            report["refused_unenforced"] += 1
            report["not_compiled"].append(f"{spec.name}: nothing enforces {[g.describe() for g in unchecked(gaps)]}")
            continue
        report["compiled"] += 1
        report["checked_schemas"] += isinstance(compiled, CheckedCompiled)
        report["by_backend"][compiled.backend] = report["by_backend"].get(compiled.backend, 0) + 1
        bare = compiled.inner if isinstance(compiled, CheckedCompiled) else compiled
        bare_leaks = []
        if tests and "derive_limit" in tests[0]:
            report["instances_not_derived"] += 1
            report["not_derived"].append(f"{spec.name}: derivation stopped ({tests[0]['derive_limit']} limit)")
            tests = []
        for t in tests:
            report["instances"] += 1
            forms = [json.dumps(t["data"], separators=s) for s in ((", ", ": "), (",", ":"))]
            took_bare = any(accepts(bare, f) for f in forms)
            took = took_bare if bare is compiled else any(accepts(compiled, f) for f in forms)
            if not t["valid"]:
                report["accepted_invalid_bare"] += took_bare
                report["accepted_invalid"] += took
                if took:
                    report["leaks"].append({"schema": spec.name, "backend": compiled.backend, "test": t["description"]})
                if took_bare:
                    bare_leaks.append(t)
            else:
                report["rejected_valid_bare"] += not took_bare
                report["rejected_valid"] += not took
                if not took:  # by the grammar itself, or by the checker after it
                    by = "checker" if took_bare else "grammar"
                    case = {"schema": spec.name, "backend": compiled.backend, "by": by, "test": t["description"]}
                    report["rejected_valid_cases"].append(case)
        if bare_leaks:
            named = named_keywords(bare, spec)
            for t in bare_leaks:
                if not explained(schema, t["data"], named):
                    report["unnamed"].append(
                        {"schema": spec.name, "backend": bare.backend, "test": t["description"], "named": sorted(named)}
                    )
                    break
        if progress:
            progress(f"{spec.name[:100]}: {compiled.backend}")
    answered = report["compiled"] + report["refused_by_backend"] + report["refused_unenforced"]
    report["compiled_pct"] = round(100 * report["compiled"] / max(report["schemas"], 1), 1)
    report["answered_in_time_pct"] = round(100 * (answered - report["over_time_limit"]) / max(report["schemas"], 1), 1)
    report["unnamed_schemas"] = len(report["unnamed"])
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite-only", action="store_true")
    parser.add_argument("--own-only", action="store_true")
    parser.add_argument("--real", action="store_true", help="also the real-world schemas installed packages ship")
    parser.add_argument("--folder", type=Path, help="also every *.json schema in this folder (instances derived)")
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--draft", choices=sorted(DRAFTS), default="draft2020-12", help="the suite's folder to read")
    parser.add_argument("--progress", action="store_true")
    parser.add_argument(
        "--ref-base",
        action="append",
        default=[],
        metavar="URL=DIR",
        help="as sgcli's --ref-base: URL refs read from DIR",
    )
    parser.add_argument(
        "--format", action="append", default=[], metavar="NAME=REGEX", help="as sgcli's --format: a format defined"
    )
    args = parser.parse_args()
    from sgcli.constraints.formats import parse_user_format, set_user_formats
    from sgcli.constraints.ref_bases import parse_ref_base, set_ref_bases

    set_ref_bases(tuple(parse_ref_base(value) for value in args.ref_base))
    set_user_formats(tuple(parse_user_format(value) for value in args.format))
    progress = (lambda line: print(line, file=sys.stderr, flush=True)) if args.progress else None
    report = check(
        own=not args.suite_only,
        suite=not args.own_only,
        real=args.real,
        backend=args.backend,
        progress=progress,
        folder=args.folder,
        draft=args.draft,
    )
    print(json.dumps(report, indent=1))
    ok = report["accepted_invalid"] == 0 and report["unnamed_schemas"] == 0 and report["answered_in_time_pct"] >= 99
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
