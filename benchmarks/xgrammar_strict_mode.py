"""xgrammar's `strict_mode`, off vs on, side by side on JSON-Schema-Test-Suite draft2020-12.

strict_mode=True makes xgrammar forbid properties and array items a schema does not list
(as if `additionalProperties: false` / `items: false` were written). For generation that only
narrows what the model may emit to a subset of valid instances; for a dry run (`masks`,
`test`: "does the backend accept this text?") it turns valid instances into rejections.
This script measures both effects and the compile time, per schema, compiling with the two
settings interleaved (alternating which goes first), so a busy machine skews both alike.

    .venv/bin/python benchmarks/xgrammar_strict_mode.py [--keywords uniqueItems,not]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import json_schema_suite as jss  # noqa: E402  (its suite follows SGCLI_CORPORA, see corpus_paths.py)


def measure(keywords: list[str] | None = None) -> dict:
    from sgcli.backends import get_backend
    from sgcli.constraints.spec import ConstraintSpec, JsonOptions, Kind
    from sgcli.errors import UserError
    from sgcli.tokenizers import load_tokenizer

    jss.suite_dir()  # exits naming the corpus and SGCLI_CORPORA when it is absent
    vocab = load_tokenizer(None).vocab
    backend = get_backend("xgrammar")
    stats = {
        mode: {"compile_ms": [], "compile_errors": 0, "accepted_invalid": 0, "rejected_valid": 0}
        for mode in ("off", "on")
    }
    n = 0
    for path in jss.suite_files(keywords):
        for case in json.loads(path.read_text(encoding="utf-8")):
            order = ("off", "on") if n % 2 == 0 else ("on", "off")
            n += 1
            for mode in order:
                spec = ConstraintSpec(
                    Kind.JSON_SCHEMA,
                    json.dumps(case["schema"]),
                    path.name,
                    json_options=JsonOptions(strict_properties=mode == "on"),
                )
                s = stats[mode]
                start = time.perf_counter()
                try:
                    compiled = backend.compile(spec, vocab)
                except UserError:
                    s["compile_errors"] += 1
                    continue
                s["compile_ms"].append((time.perf_counter() - start) * 1000)
                for test in case["tests"]:
                    forms = {json.dumps(test["data"], separators=seps) for seps in ((", ", ": "), (",", ":"))}
                    accepted = any(jss._accepts(compiled, vocab, f) for f in forms)
                    s["accepted_invalid"] += accepted and not test["valid"]
                    s["rejected_valid"] += (not accepted) and test["valid"]
    out = {"schemas": n}
    for mode, s in stats.items():
        ms = sorted(s.pop("compile_ms"))
        s["compile_ms_p50"] = round(statistics.median(ms), 2) if ms else None
        s["compile_ms_p90"] = round(ms[int(len(ms) * 0.9)], 2) if ms else None
        s["compile_ms_max"] = round(ms[-1], 2) if ms else None
        out[f"strict_mode_{mode}"] = s
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keywords", help="comma-separated suite files (keywords), default all")
    args = parser.parse_args()
    print(json.dumps(measure(args.keywords.split(",") if args.keywords else None), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
