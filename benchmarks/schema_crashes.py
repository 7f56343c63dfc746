"""No crash on any schema: every subcommand that takes a schema, over a catalogue of schemas.

Runs, for each schema file, in this process (typer's CliRunner, as the tests do):
  compile    sgcli compile FILE --json                 (every enforcing backend)
  lint       sgcli lint FILE                           (every enforcing backend, keyword probes)
  masks      sgcli masks FILE --text '{}'              (auto)
  test       sgcli test CASES.json                     (the suite's own instances as accept/reject cases)
  convert    sgcli convert FILE --to gbnf --no-check
  generate   sgcli generate --schema FILE --engine vllm --base-url http://127.0.0.1:9 --retries 0 x
             (generate's reading and checking of the constraint, up to the request: nothing listens
             there, so a schema that gets that far ends in exit 2 "cannot reach", never in a model load)
and `sgcli bench DIR` once over the folder. Counted per subcommand: exit codes, tracebacks
(an exception out of the command, or "internal error" / "Traceback" in its output) and runs over
60 s (SIGALRM stops one that is still running at --hang-s). A crash is exit 3 or a traceback.

The catalogue (default): every schema of JSON-Schema-Test-Suite draft2020-12 (from $SGCLI_CORPORA)
written to its own file, the schemas under tests/ and examples/, and the real-world shapes of
issue 28 written here (boolean subschemas, $id-relative refs, $dynamicRef, recursion, an unknown
draft, a remote $ref, a $ref cycle, a 200-level schema, a 2,000-property schema). `--folder DIR`
takes any folder of *.json schemas instead.

Usage:  SGCLI_CORPORA=/path/to/corpora python benchmarks/schema_crashes.py [--limit N] [--json]
Exit status 1 when any run crashed.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

COMMANDS = ("compile", "lint", "masks", "test", "convert", "generate")
SLOW_S = 60.0


def _deep(depth: int) -> dict:
    schema: dict = {"type": "integer"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


HOSTILE = {
    "booleans": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "properties": {"a": True, "b": False, "c": {"$ref": "#/definitions/t"}},
        "definitions": {"t": True},
    },
    "pointer-into-true": {"$ref": "#/definitions/x/properties", "definitions": {"x": True}},
    "draft4-dependencies": {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "dependencies": {"a": ["b"], "c": {"required": ["d"]}},
    },
    "id-relative": {
        "$id": "https://example.com/root.json",
        "$defs": {"i": {"$id": "item.json", "$defs": {"z": {"type": "string"}}}},
        "properties": {"a": {"$ref": "item.json#/$defs/z"}},
    },
    "dynamic-ref": {
        "$dynamicAnchor": "node",
        "type": "object",
        "properties": {"kids": {"type": "array", "items": {"$dynamicRef": "#node"}}},
    },
    "recursive-ref": {
        "$schema": "https://json-schema.org/draft/2019-09/schema",
        "$recursiveAnchor": True,
        "type": "object",
        "properties": {"kids": {"items": {"$recursiveRef": "#"}}},
    },
    "recursive": {"type": "object", "properties": {"next": {"$ref": "#"}}},
    "unknown-draft": {"$schema": "https://example.com/an-unknown-draft", "type": "integer"},
    "remote-ref": {"properties": {"a": {"$ref": "https://example.com/thing.json"}}},
    "ref-cycle": {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
    "if-then-ref": {
        "properties": {
            "framework": {"type": "object", "properties": {"name": {"enum": ["SAPUI5", "OpenUI5"]}}},
            "config": {
                "properties": {"type": {"enum": ["application", "library"]}},
                "if": {"properties": {"type": {"const": "application"}}},
                "then": {"properties": {"builder": {"$ref": "#/properties/framework"}}},
            },
        }
    },
    "deep-200": _deep(200),
    "wide-2000": {
        "type": "object",
        "properties": {f"field_{i:04d}": {"type": "string", "maxLength": 20} for i in range(2000)},
    },
}


def catalogue(folder: Path, limit: int | None) -> list[tuple[Path, list]]:
    """(schema file, [(instance, valid)]) for every schema of the default catalogue, written to `folder`."""
    from benchmarks import corpus_paths

    out: list[tuple[Path, list]] = []
    reason = corpus_paths.missing("json-schema-test-suite")
    if reason:
        print(f"note: {reason}; the suite's schemas are left out", file=sys.stderr)
    else:
        suite = corpus_paths.corpus("json-schema-test-suite") / "tests" / "draft2020-12"
        for source in sorted(suite.glob("*.json")):
            for i, case in enumerate(json.loads(source.read_text(encoding="utf-8"))):
                path = folder / f"suite-{source.stem}-{i}.json"
                path.write_text(json.dumps(case["schema"], indent=1))
                out.append((path, [(t["data"], t["valid"]) for t in case["tests"]]))
    for source in sorted([*ROOT.glob("tests/**/*.json"), *ROOT.glob("examples/*.json")]):
        try:
            value = json.loads(source.read_text(encoding="utf-8"))
        except ValueError:
            value = None
        if isinstance(value, (dict, bool)) or value is None:  # a schema, or one that is meant to be broken
            path = folder / f"fixture-{source.parent.name}-{source.name}"
            path.write_bytes(source.read_bytes())
            out.append((path, []))
    for name, schema in HOSTILE.items():
        path = folder / f"hostile-{name}.json"
        path.write_text(json.dumps(schema, indent=1))
        out.append((path, []))
    return out[:limit] if limit else out


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang()


def run_one(runner, app, args: list[str], hang_s: float) -> dict:
    """One command: exit code, whether it crashed, seconds."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, hang_s)
    t = time.perf_counter()
    try:
        result = runner.invoke(app, args, catch_exceptions=True)
    except _Hang:
        return {"exit": None, "crash": False, "hung": True, "s": time.perf_counter() - t, "detail": "still running"}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    elapsed = time.perf_counter() - t
    output = result.output
    escaped = result.exception is not None and not isinstance(result.exception, SystemExit)
    if isinstance(result.exception, _Hang):
        return {"exit": None, "crash": False, "hung": True, "s": elapsed, "detail": "still running"}
    crash = result.exit_code == 3 or escaped or "internal error" in output or "Traceback" in output
    detail = ""
    if crash:
        detail = repr(result.exception) if escaped else output.strip().splitlines()[0][:200] if output.strip() else ""
    return {"exit": result.exit_code, "crash": crash, "hung": False, "s": elapsed, "detail": detail, "output": output}


def commands_for(path: Path, instances: list, folder: Path) -> dict[str, list[str]]:
    cases = folder / f"{path.stem}.test.json"
    # a folder's schema has no instances of its own: `{}` stands in (whether it is accepted does not matter here)
    rows = [{"input": json.dumps(data), "accept": valid} for data, valid in instances] or [
        {"input": "{}", "accept": True}
    ]
    cases.write_text(json.dumps({"grammar": str(path.resolve()), "cases": rows}))
    return {
        "compile": ["compile", str(path), "--json"],
        "lint": ["lint", str(path)],
        "masks": ["masks", str(path), "--text", "{}"],
        "test": ["test", str(cases)],
        "convert": ["convert", str(path), "--to", "gbnf", "--no-check"],
        "generate": [
            "generate",
            "--schema",
            str(path),
            "--engine",
            "vllm",
            "--base-url",
            "http://127.0.0.1:9",
            "--retries",
            "0",
            "--served-model",
            "m",
            "x",
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--folder", type=Path, help="a folder of *.json schemas instead of the default catalogue")
    parser.add_argument("--limit", type=int, help="the first N schemas only")
    parser.add_argument(
        "--commands", default=",".join(COMMANDS), help="comma-separated subset of " + ",".join(COMMANDS)
    )
    parser.add_argument("--compile-timeout", default="10", help="passed to every command (default 10 s)")
    parser.add_argument("--hang-s", type=float, default=300.0, help="stop a run still going after this long")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    parser.add_argument("--ref-base", action="append", default=[], metavar="URL=DIR", help="passed to every command")
    parser.add_argument("--format", action="append", default=[], metavar="NAME=REGEX", help="passed to every command")
    args = parser.parse_args()
    shared = [flag for value in args.ref_base for flag in ("--ref-base", value)]
    shared += [flag for value in args.format for flag in ("--format", value)]

    os.environ.setdefault("SGCLI_CACHE_DIR", tempfile.mkdtemp(prefix="sgcli-crash-cache-"))
    os.environ["SGCLI_COMPILE_TIMEOUT"] = args.compile_timeout
    from typer.testing import CliRunner

    from sgcli.cli.app import app

    work = Path(tempfile.mkdtemp(prefix="sgcli-crash-"))
    if args.folder:
        from corpus_paths import json_files

        schemas = [(p, []) for p in json_files(args.folder)][: args.limit]
    else:
        schemas = catalogue(work, args.limit)
    wanted = [c for c in args.commands.split(",") if c]
    runner = CliRunner()
    warm = work / "warm-up.json"  # loads every backend and its per-vocabulary state once, untimed
    warm.write_text('{"type": "integer"}')
    for argv in (["compile", str(warm), "--json"], ["lint", str(warm)]):
        run_one(runner, app, argv, args.hang_s * 4)
    counts = {c: collections.Counter() for c in [*wanted, "bench"]}
    crashes, slow = [], []
    started = time.perf_counter()
    for n, (path, instances) in enumerate(schemas, 1):
        for name, argv in commands_for(path, instances, work).items():
            if name not in wanted:
                continue
            outcome = run_one(runner, app, [*argv, *shared], args.hang_s)
            counts[name][f"exit {outcome['exit']}" if not outcome["hung"] else "hung"] += 1
            counts[name]["crash"] += outcome["crash"]
            if outcome["s"] > SLOW_S or outcome["hung"]:
                counts[name]["over 60 s"] += 1
                slow.append((name, path.name, round(outcome["s"], 1)))
            if outcome["crash"]:
                crashes.append((name, path.name, outcome["detail"]))
                print(f"CRASH {name} {path.name}: {outcome['detail']}", file=sys.stderr, flush=True)
        if n % 25 == 0:  # a run stopped early still says how far it got, and what it found
            done = {name: dict(sorted(c.items())) for name, c in counts.items() if c}
            print(f"... {n}/{len(schemas)} schemas, {time.perf_counter() - started:.0f} s: {done}", file=sys.stderr)
    bench_dir = work / "bench"
    bench_dir.mkdir()
    for path, _ in schemas:
        if path.stat().st_size < 64 << 10:  # bench compiles each file cold and cached on every backend
            (bench_dir / path.name).write_bytes(path.read_bytes())
    outcome = run_one(runner, app, ["bench", str(bench_dir), "--json", *shared], args.hang_s * 10)
    counts["bench"][f"exit {outcome['exit']}" if not outcome["hung"] else "hung"] += 1
    counts["bench"]["crash"] += outcome["crash"]
    if outcome["crash"]:
        crashes.append(("bench", bench_dir.name, outcome["detail"]))
    summary = {
        "schemas": len(schemas),
        "seconds": round(time.perf_counter() - started),
        "counts": {name: dict(sorted(c.items())) for name, c in counts.items()},
        "crashes": crashes,
        "over_60_s": slow,
    }
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(f"{len(schemas)} schemas, {summary['seconds']} s")
        for name, c in summary["counts"].items():
            print(f"  {name:9} " + "  ".join(f"{k}: {v}" for k, v in c.items()))
        for crash in crashes:
            print("  CRASH", *crash)
        for run in slow:
            print("  SLOW", *run)
    return 1 if crashes else 0


if __name__ == "__main__":
    raise SystemExit(main())
