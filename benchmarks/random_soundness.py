"""Real-world schemas under an adversary: a 2-layer random Llama (SmolLM2's tokenizer) generates from
each schema of a folder through `generate`'s own path (compile with `--backend auto`, the guarantee
check, sgcli's schema checker and backtracking in the decode loop), several seeds each.

`auto_soundness.py` feeds instances someone derived; here the random model's logits try whatever the
mask allows, inside schemas nobody here wrote. What must hold for every run:
  - a run that finishes (`stop`) is `valid: true`, and jsonschema agrees on the parsed output;
  - `valid: true` never goes with an output jsonschema refuses;
  - anything else ends as `length` (the budget ran out inside the value) or `error` (a dead end the
    bounded backtracking gave up on, said so), never as an exception.
A schema sgcli refuses (exit 2 before a model would load: an input error, or a keyword nothing
enforces) is counted as refused, not run.

    python benchmarks/random_soundness.py --folder DIR [--seeds 3] [--max-tokens 256] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # random_llama, generate_with

from helpers import generate_with, random_llama  # noqa: E402

from sgcli.backends import compile_for  # noqa: E402
from sgcli.backends.guarantee import guarantee  # noqa: E402
from sgcli.constraints.sources import from_file  # noqa: E402
from sgcli.constraints.spec import Kind  # noqa: E402
from sgcli.errors import UserError  # noqa: E402
from sgcli.tokenizers import load_tokenizer  # noqa: E402
from sgcli.validation.verdict import Unchecked, schema_errors  # noqa: E402


def run(folder: Path, seeds: int, max_tokens: int) -> dict:
    tokenizer = load_tokenizer(None)
    lm = random_llama(len(tokenizer.vocab))
    vocab = tokenizer.vocab.padded(lm.logits_width)
    counts: Counter = Counter()
    bad: list[str] = []
    started = time.perf_counter()
    from corpus_paths import json_files

    for path in json_files(folder):
        try:
            spec = from_file(str(path), Kind.JSON_SCHEMA)
            compiled = compile_for("auto", spec, vocab)[0]
            guarantee(compiled)
        except UserError:
            counts["refused"] += 1
            continue
        counts["schemas run"] += 1
        schema = spec.schema()
        for seed in range(seeds):
            try:
                record = generate_with(lm, tokenizer, spec, "auto", seed=seed, max_tokens=max_tokens)
            except Exception as exc:  # noqa: BLE001 - what this benchmark looks for
                bad.append(f"{path.name} seed {seed}: {type(exc).__name__}: {exc}")
                counts["exception"] += 1
                continue
            finish, valid = record["finish_reason"], record["valid"]
            counts[f"finish {finish}"] += 1
            if valid is True or finish == "stop":
                try:
                    errors = schema_errors(schema, json.loads(record["output"]))
                except (ValueError, Unchecked) as exc:
                    errors = [f"{type(exc).__name__}: {exc}"]
                if valid is not True or errors:
                    bad.append(f"{path.name} seed {seed}: finish {finish}, valid {valid}, jsonschema: {errors[:2]}")
                    counts["unsound"] += 1
                else:
                    counts["valid"] += 1
    return {
        **dict(sorted(counts.items())),
        "seconds": round(time.perf_counter() - started, 1),
        "bad": bad,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, required=True, help="a folder of *.json schemas")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    result = run(args.folder, args.seeds, args.max_tokens)
    if args.json:
        print(json.dumps(result, indent=1))
    else:
        for key, value in result.items():
            if key != "bad":
                print(f"{key:>16}: {value}")
        for line in result["bad"]:
            print("BAD", line)
    return 1 if result["bad"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
