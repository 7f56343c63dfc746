"""Your prompts through `sgcli generate --input`, in-process and against a vLLM/SGLang server, side by side.

Both sides run the same CLI command on the same JSONL batch and constraint; only `--engine` differs.
Rounds alternate (local, remote, local, remote...) so machine noise hits both, and the load average
is printed before and after every run. Per side:

- wall: seconds of the whole command (interpreter start, imports, model load or HTTP client, the batch);
  aggregate tok/s = completion tokens (summed from the records) / wall;
- batch: seconds from the batch's start (after the model loaded) to its last record, read off the
  summary line `generate` ends with on stderr (0.1 s resolution); batch tok/s = tokens / batch seconds;
- first token per request, p50/p90/max over the records: `timings.first_token_ms` (from the request's own
  decode start; batch requests to a server are not streamed, so that side has none) and
  `timings.start_to_first_token_ms` (from the command's start: the wait a user sees);
- request latency per request, p50/p90/max: `timings.request_ms` (server side only);
- the ratio remote / local of each.

    python benchmarks/serving.py --input prompts.jsonl --schema S.json [--max-tokens 64]
    scripts/serve-vllm.sh serve 8765 &          # once; wait for "Application startup complete"
    python benchmarks/serving.py --input prompts.jsonl --schema S.json --base-url http://127.0.0.1:8765 \\
        --concurrency 4 --rounds 3 [--json] [--plot serving.png] [-- ANY OTHER generate FLAGS]

Without --input: the old built-in batch (--requests prompts about capital cities, a bounded regex).
Exit 2 on bad input before anything runs; a failing `sgcli generate` prints its stderr tail and its exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `python benchmarks/serving.py` from anywhere uses this checkout's sgcli
    sys.path.insert(0, str(ROOT))
if str(ROOT / "benchmarks") not in sys.path:  # and its common.py, when loaded from elsewhere (tests)
    sys.path.insert(0, str(ROOT / "benchmarks"))

from common import reset_prefix_cache  # noqa: E402 - benchmarks/common.py, beside this script

from sgcli.timing import percentile  # noqa: E402 - after the path above; light (no torch)

PROMPTS = ["Capital of France?", "Capital of Italy?", "Capital of Spain?", "Capital of Japan?"]
DEFAULT_REGEX = "[A-Z][a-z]{2,12}( [A-Z][a-z]{2,12})?"
# Constraint flags passed to `generate` as they are; the ones that name a file are checked up front.
CONSTRAINTS = {"schema": None, "regex": None, "grammar": None, "ebnf": "file", "lark": "file", "pydantic": None}
# Tally.summary() in sgcli/app/report.py: "N records: ... · T tokens in S s (R tok/s)"
SUMMARY = re.compile(r"^(\d+) records: .*?(\d+) tokens in ([0-9.]+) s \(", re.M)
PLOT_SUFFIXES = (".png", ".svg", ".pdf")


class BadInput(Exception):
    """A bad flag or input file: one message, exit 2, before anything slow runs."""


@dataclass
class Run:
    """One `generate` command: its records, wall seconds, the batch's own seconds (None if its summary
    line was not found) and the load average before and after."""

    records: list[dict]
    wall_s: float
    batch_s: float | None = None
    load_before: float | None = None
    load_after: float | None = None
    extra: dict = field(default_factory=dict)


# ---- pure parts (tests/test_serving_bench.py) ----


def spread(values) -> dict:
    """n, p50, p90 and max of the values that are not None (nearest rank, sgcli.timing.percentile)."""
    vs = [float(v) for v in values if v is not None]
    return {
        "n": len(vs),
        "p50": percentile(vs, 0.5, 1),
        "p90": percentile(vs, 0.9, 1),
        "max": round(max(vs), 1) if vs else None,
    }


def parse_summary(stderr: str) -> tuple[int, int, float] | None:
    """(records, tokens, seconds) from the summary line `generate --input` ends with; None if absent."""
    found = list(SUMMARY.finditer(stderr))
    m = found[-1] if found else None  # the last one: anything printed before it is not the summary
    return None if m is None else (int(m.group(1)), int(m.group(2)), float(m.group(3)))


def read_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _rate(tokens: int, seconds: float | None) -> float | None:
    return round(tokens / seconds, 2) if seconds else None


def side_stats(runs: list[Run]) -> dict:
    """Every number the report gives for one side, over all its rounds."""
    records = [r for run in runs for r in run.records]
    tokens = sum((r.get("usage") or {}).get("completion_tokens") or 0 for r in records)
    wall = sum(run.wall_s for run in runs)
    batch = None if any(run.batch_s is None for run in runs) else sum(run.batch_s for run in runs)
    timing = [r.get("timings") or {} for r in records]
    per_round = [
        {
            "requests": len(run.records),
            "tokens": sum((r.get("usage") or {}).get("completion_tokens") or 0 for r in run.records),
            "wall_s": round(run.wall_s, 3),
            "batch_s": run.batch_s,
            "load_before": run.load_before,
            "load_after": run.load_after,
        }
        for run in runs
    ]
    return {
        "rounds": len(runs),
        "requests": len(records),
        "valid": sum(r.get("valid") is True for r in records),
        "invalid": sum(r.get("valid") is False and r.get("finish_reason") != "error" for r in records),
        "unchecked": sum(r.get("valid") is None and r.get("finish_reason") != "error" for r in records),
        "errors": sum(r.get("finish_reason") == "error" for r in records),
        "completion_tokens": tokens,
        "tokens_per_request": round(tokens / len(records), 2) if records else None,
        "wall_s": round(wall, 3),
        "tok_s": _rate(tokens, wall),
        "batch_s": None if batch is None else round(batch, 3),
        "batch_tok_s": _rate(tokens, batch),
        "batch_time_from": "generate's summary line: the batch's start (after the model load or the client's "
        "set-up) to its last record, 0.1 s resolution",
        "first_token_ms": spread(t.get("first_token_ms") for t in timing),
        "start_to_first_token_ms": spread(t.get("start_to_first_token_ms") for t in timing),
        "request_ms": spread(t.get("request_ms") for t in timing),
        "per_round": per_round,
    }


def ratios(local: dict, remote: dict) -> dict:
    """remote / local for each figure both sides have (None where either lacks it or local is 0)."""

    def over(a, b):
        return round(b / a, 3) if a and b is not None else None

    out = {key: over(local[key], remote[key]) for key in ("tok_s", "batch_tok_s", "wall_s")}
    for key in ("first_token_ms", "start_to_first_token_ms"):
        out[key + "_p50"] = over(local[key]["p50"], remote[key]["p50"])
    return out


def build_report(config: dict, sides: dict[str, list[Run]], loads: list[dict]) -> dict:
    """The one JSON object --json prints: the run's settings, each side's figures, remote / local."""
    stats = {name: side_stats(runs) for name, runs in sides.items()}
    names = list(stats)
    report = {"config": config, "cpus": os.cpu_count(), "loads": loads, "sides": stats, "ratio": None}
    if len(names) == 2:
        report["ratio"] = {"of": f"{names[1]} / {names[0]}", **ratios(stats[names[0]], stats[names[1]])}
    return report


def _fmt(v, unit: str = "") -> str:
    return "-" if v is None else f"{v:.1f}{unit}"


def _spread_text(s: dict, missing: str = "none") -> str:
    if not s["n"]:
        return missing
    return f"{_fmt(s['p50'])} / {_fmt(s['p90'])} / {_fmt(s['max'])} ms (n={s['n']})"


def format_report(report: dict) -> str:
    c = report["config"]
    lines = [
        f"\n{c['requests']} requests x {c['rounds']} rounds, {c['constraint']}, max {c['max_tokens']} tokens; "
        f"{report['cpus']} CPUs"
    ]
    for name, s in report["sides"].items():
        ttft, ready = s["first_token_ms"], s["start_to_first_token_ms"]
        why = "none (sgcli does not stream batch requests to a server)" if name != "local" else "none"
        lines += [
            f"{name} ({c['sides'][name]}):",
            f"  {s['requests']} records: {s['valid']} valid, {s['invalid']} invalid, {s['unchecked']} unchecked, "
            f"{s['errors']} errors; {s['completion_tokens']} completion tokens "
            f"({_fmt(s['tokens_per_request'])} a request)",
            f"  wall {s['wall_s']:.2f} s -> {_fmt(s['tok_s'])} tok/s aggregate; batch {_fmt(s['batch_s'], ' s')} "
            f"-> {_fmt(s['batch_tok_s'])} tok/s (batch time from generate's summary line)",
            f"  first token p50 / p90 / max, from the request's decode start: {_spread_text(ttft, why)}",
            f"  first token p50 / p90 / max, from the command's start: {_spread_text(ready, why)}",
        ]
        if s["request_ms"]["n"]:
            lines.append(f"  request p50 / p90 / max: {_spread_text(s['request_ms'])}")
    r = report["ratio"]
    if r:
        lines.append(
            f"ratio {r['of']}: aggregate tok/s {_ratio(r['tok_s'])}, batch tok/s {_ratio(r['batch_tok_s'])}, "
            f"wall {_ratio(r['wall_s'])}, first token p50 {_ratio(r['first_token_ms_p50'])}"
        )
    loads = [x["load_before"] for x in report["loads"]] + [x["load_after"] for x in report["loads"]]
    if loads:
        lines.append(f"load average (1 min) during the runs: {min(loads):.2f} to {max(loads):.2f}")
    return "\n".join(lines)


def _ratio(v) -> str:
    return "-" if v is None else f"{v:.2f}"


# ---- checks before anything slow ----


def check_input(path: str) -> int:
    """How many requests the --input file holds; BadInput with the file (and line) if it cannot be read."""
    from sgcli.batch.requests import BadLine, read_requests

    p = Path(path)
    if not p.is_file():
        raise BadInput(f"--input {path}: no such file")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise BadInput(f"--input {path}: cannot read it ({exc.strerror})") from None
    n = 0
    for item in read_requests(data, path):
        if isinstance(item, BadLine):
            raise BadInput(f"--input {item.location}: {item.message}")
        n += 1
    if not n:
        raise BadInput(f"--input {path}: no requests (every line is blank)")
    return n


def constraint_args(args) -> list[str]:
    given = [(name, getattr(args, name)) for name in CONSTRAINTS if getattr(args, name) is not None]
    given += [("choice", c) for c in args.choice or []]
    if not given:
        if args.input:
            raise BadInput(f"no constraint: give one of {', '.join('--' + c for c in [*CONSTRAINTS, 'choice'])}")
        return ["--regex", DEFAULT_REGEX]
    out = []
    for name, value in given:
        looks_inline = name == "schema" and value.lstrip().startswith(("{", "["))
        is_file = CONSTRAINTS[name] == "file" or (name in ("schema", "grammar") and not looks_inline)
        if name == "grammar" and value.startswith("@"):
            is_file = False
        if is_file and value != "-" and not Path(value).is_file():
            raise BadInput(f"--{name} {value}: no such file")
        out += [f"--{name}", value]
    return out


def check_plot(path: str | None) -> None:
    if path is None:
        return
    if not path.lower().endswith(PLOT_SUFFIXES):
        raise BadInput(f"--plot {path}: give a file ending {', '.join(PLOT_SUFFIXES)}")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise BadInput("--plot needs matplotlib, which is not installed (pip install matplotlib)") from None


def parse_args(argv: list[str] | None = None):
    argv = sys.argv[1:] if argv is None else argv
    passthrough: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, passthrough = argv[:i], argv[i + 1 :]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", "-i", help="JSONL of {id, prompt} or {id, messages}, as for generate --input")
    ap.add_argument("--requests", type=int, default=16, help="without --input: how many built-in prompts")
    for name in CONSTRAINTS:
        ap.add_argument(f"--{name}", help=f"passed to generate as --{name}")
    ap.add_argument("--choice", action="append", help="passed to generate as --choice (repeatable)")
    ap.add_argument("--base-url", help="a server: adds the remote side (without it only the local side runs)")
    ap.add_argument("--engine", choices=["vllm", "sglang", "openai"], default=None, help="the server's kind (vllm)")
    ap.add_argument("--concurrency", type=int, default=4, help="requests in flight on the remote side")
    ap.add_argument("--batch-size", type=int, default=None, help="--batch-size for the local side")
    ap.add_argument("--threads", type=int, default=None, help="--threads for the local side")
    ap.add_argument("--max-tokens", "-n", type=int, default=48)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", action="store_true", help="print one JSON object (progress goes to stderr)")
    ap.add_argument("--plot", help="draw first-token times and tok/s per side to this .png/.svg/.pdf (matplotlib)")
    args = ap.parse_args(argv)
    args.passthrough = passthrough
    return args


def validate(args) -> tuple[int, list[str]]:
    """(requests per round, constraint flags); BadInput for anything wrong."""
    if args.engine and not args.base_url:
        raise BadInput(f"--engine {args.engine} needs --base-url")
    for flag in ("rounds", "max_tokens", "concurrency", "requests", "batch_size", "threads"):
        v = getattr(args, flag)
        if v is not None and v < 1:
            raise BadInput(f"--{flag.replace('_', '-')} must be at least 1 (got {v})")
    check_plot(args.plot)
    constraint = constraint_args(args)
    n = check_input(args.input) if args.input else args.requests
    return n, constraint


# ---- running ----


def run_generate(cmd: list[str], out: Path) -> Run:
    load_before = round(os.getloadavg()[0], 2)
    t = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t
    load_after = round(os.getloadavg()[0], 2)
    if done.returncode not in (0, 1):  # 1: some records invalid, which the report counts
        sys.stderr.write(f"{' '.join(cmd)}\nfailed with exit {done.returncode}:\n{done.stderr[-3000:]}\n")
        sys.exit(done.returncode if done.returncode > 0 else 1)
    summary = parse_summary(done.stderr)
    return Run(read_records(out), wall, None if summary is None else summary[2], load_before, load_after)


def _cumulative(values: list[float]) -> tuple[list[float], list[float]]:
    """x and y of an empirical distribution's steps, from (first, 0) to (last, 1)."""
    xs = sorted(values)
    return [xs[0], *xs], [0.0, *((i + 1) / len(xs) for i in range(len(xs)))]


def plot(report: dict, sides: dict[str, list[Run]], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, runs in sides.items():
        timings = [r.get("timings") or {} for run in runs for r in run.records]
        for key, label in (("first_token_ms", "from decode start"), ("start_to_first_token_ms", "from command start")):
            vs = [t[key] for t in timings if t.get(key) is not None]
            if vs:
                left.step(*_cumulative(vs), where="post", label=f"{name}: {label}")
        if not any(t.get("first_token_ms") is not None for t in timings):
            vs = [t["request_ms"] for t in timings if t.get("request_ms") is not None]
            if vs:
                left.step(*_cumulative(vs), where="post", ls="--", label=f"{name}: whole request (not streamed)")
    left.set(xlabel="ms", ylabel="share of requests", title="first token per request (cumulative)")
    left.legend(fontsize=8)
    names = list(report["sides"])
    x = range(len(names))
    agg = [report["sides"][n]["tok_s"] or 0 for n in names]
    own = [report["sides"][n]["batch_tok_s"] or 0 for n in names]
    right.bar([i - 0.2 for i in x], agg, 0.4, label="tokens / command wall time")
    right.bar([i + 0.2 for i in x], own, 0.4, label="tokens / batch time")
    right.set_xticks(list(x), names)
    right.set(ylabel="tok/s", title="throughput per side")
    right.legend(fontsize=8)
    loads = [x["load_before"] for x in report["loads"]] + [x["load_after"] for x in report["loads"]]
    c = report["config"]
    fig.suptitle(
        f"{c['requests']} requests x {c['rounds']} rounds, max {c['max_tokens']} tokens; "
        f"{report['cpus']} CPUs, load {min(loads):.1f}-{max(loads):.1f}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        n, constraint = validate(args)
    except BadInput as exc:
        print(f"serving.py: error: {exc}", file=sys.stderr)
        sys.exit(2)
    log = sys.stderr if args.json else sys.stdout

    tmp = Path(tempfile.mkdtemp(prefix="sgcli-serving-bench-"))
    if args.input:
        batch = Path(args.input).resolve()
    else:
        batch = tmp / "in.jsonl"
        batch.write_text("".join(json.dumps({"id": i, "prompt": PROMPTS[i % len(PROMPTS)]}) + "\n" for i in range(n)))
    base = [sys.executable, "-m", "sgcli", "generate", *constraint, "-n", str(args.max_tokens)]
    base += ["--input", str(batch), *args.passthrough]
    local = [*base, "--engine", "local"]
    local += ["--threads", str(args.threads)] if args.threads else []
    local += ["--batch-size", str(args.batch_size)] if args.batch_size else []
    commands = {"local": local}
    if args.base_url:
        engine = args.engine or "vllm"
        remote = [*base, "--engine", engine, "--base-url", args.base_url, "--concurrency", str(args.concurrency)]
        commands[engine] = remote
    sides: dict[str, list[Run]] = {name: [] for name in commands}
    loads = []
    for r in range(args.rounds):
        for name, cmd in commands.items():
            out = tmp / f"{name}-{r}.jsonl"
            if name != "local" and (why := reset_prefix_cache(args.base_url)):  # a cold start, as the local side's
                print(f"note: {why}", file=log)
            run = run_generate([*cmd, "--output", str(out), "--force"], out)
            sides[name].append(run)
            loads.append({"round": r + 1, "side": name, "load_before": run.load_before, "load_after": run.load_after})
            s = side_stats([run])
            print(
                f"round {r + 1} {name:6s}: {s['completion_tokens']} tokens in {run.wall_s:.2f} s = {_fmt(s['tok_s'])} "
                f"tok/s (batch {_fmt(run.batch_s, ' s')}), {s['valid']}/{s['requests']} valid; "
                f"load {run.load_before:.2f} -> {run.load_after:.2f}",
                file=log,
                flush=True,
            )
    config = {
        "input": str(args.input) if args.input else None,
        "requests": n,
        "rounds": args.rounds,
        "max_tokens": args.max_tokens,
        "constraint": " ".join(constraint),
        "passthrough": args.passthrough,
        "sides": {
            "local": "in-process"
            + (f", --threads {args.threads}" if args.threads else "")
            + (f", --batch-size {args.batch_size}" if args.batch_size else ""),
            **({name: f"{args.base_url}, --concurrency {args.concurrency}" for name in commands if name != "local"}),
        },
    }
    report = build_report(config, sides, loads)
    if args.plot:
        plot(report, sides, args.plot)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_report(report))
    if args.plot:
        print(f"plot: {args.plot}", file=log)


if __name__ == "__main__":
    main()
