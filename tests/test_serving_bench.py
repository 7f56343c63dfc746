"""benchmarks/serving.py's pure parts on records shaped by sgcli's own record model, and its argument checks.

No model runs: the records are built from `GenerationRecord` (so a renamed field fails here), and the
argument checks must exit 2 before anything slow starts.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sgcli.app.report import Tally
from sgcli.records.generation import GenerationRecord, Timings, Usage

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "serving.py"


def _load():
    spec = importlib.util.spec_from_file_location("serving_bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["serving_bench"] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


bench = _load()


def record(tokens, valid=True, finish="stop", first=None, ready=None, request=None) -> dict:
    return GenerationRecord(
        id="r",
        output="x",
        valid=valid,
        finish_reason=finish,
        usage=Usage(prompt_tokens=9, completion_tokens=tokens),
        timings=Timings(first_token_ms=first, start_to_first_token_ms=ready, request_ms=request),
    ).model_dump(mode="json")


def local_runs():
    one = [
        record(10, first=100.0, ready=2100.0),
        record(20, first=300.0, ready=2300.0),
        record(5, valid=False, finish="length", first=200.0, ready=2200.0),
    ]
    two = [
        record(15, first=400.0, ready=2400.0),
        record(None, valid=None, first=None),  # unchecked, nothing generated
        record(0, valid=False, finish="error"),
    ]
    return [
        bench.Run(one, wall_s=5.0, batch_s=2.0, load_before=1.0, load_after=1.5),
        bench.Run(two, wall_s=5.0, batch_s=3.0, load_before=1.5, load_after=2.0),
    ]


def remote_runs():
    recs = [record(25, request=r) for r in (50.0, 70.0, 60.0, 90.0)]
    return [bench.Run(recs[:2], wall_s=1.0, batch_s=0.5), bench.Run(recs[2:], wall_s=1.5, batch_s=0.5)]


def test_spread_is_nearest_rank_and_skips_missing():
    s = bench.spread([40.0, None, 10.0, 30.0, 20.0])
    assert s == {"n": 4, "p50": 20.0, "p90": 40.0, "max": 40.0}
    assert bench.spread([None]) == {"n": 0, "p50": None, "p90": None, "max": None}


def test_side_stats_counts_tokens_verdicts_and_rates():
    s = bench.side_stats(local_runs())
    assert (s["rounds"], s["requests"]) == (2, 6)
    assert (s["valid"], s["invalid"], s["unchecked"], s["errors"]) == (3, 1, 1, 1)
    assert s["completion_tokens"] == 50  # 10 + 20 + 5 + 15; None and the error's 0 add nothing
    assert s["wall_s"] == 10.0 and s["tok_s"] == 5.0
    assert s["batch_s"] == 5.0 and s["batch_tok_s"] == 10.0
    assert s["first_token_ms"] == {"n": 4, "p50": 200.0, "p90": 400.0, "max": 400.0}
    assert s["start_to_first_token_ms"]["p50"] == 2200.0
    assert s["request_ms"]["n"] == 0
    assert [r["tokens"] for r in s["per_round"]] == [35, 15]
    assert [(r["load_before"], r["load_after"]) for r in s["per_round"]] == [(1.0, 1.5), (1.5, 2.0)]


def test_batch_rate_is_absent_when_a_round_had_no_summary():
    runs = local_runs()
    runs[1].batch_s = None
    s = bench.side_stats(runs)
    assert s["batch_s"] is None and s["batch_tok_s"] is None
    assert s["tok_s"] == 5.0


def test_ratio_is_remote_over_local_and_none_where_a_side_lacks_the_figure():
    local, remote = bench.side_stats(local_runs()), bench.side_stats(remote_runs())
    assert remote["tok_s"] == 40.0  # 100 tokens / 2.5 s
    assert remote["request_ms"] == {"n": 4, "p50": 60.0, "p90": 90.0, "max": 90.0}
    r = bench.ratios(local, remote)
    assert r["tok_s"] == 8.0
    assert r["batch_tok_s"] == 10.0  # 100 / 1.0 over 50 / 5.0
    assert r["wall_s"] == 0.25
    assert r["first_token_ms_p50"] is None  # the server side's batch requests are not streamed


def test_report_is_one_json_object_with_both_sides_and_the_text_quotes_it():
    config = {"requests": 3, "rounds": 2, "max_tokens": 16, "constraint": "--regex a", "sides": {}}
    config["sides"] = {"local": "in-process", "vllm": "http://x, --concurrency 2"}
    loads = [{"round": 1, "side": "local", "load_before": 0.5, "load_after": 3.25}]
    report = bench.build_report(config, {"local": local_runs(), "vllm": remote_runs()}, loads)
    again = json.loads(json.dumps(report))
    assert again["ratio"]["of"] == "vllm / local" and again["ratio"]["tok_s"] == 8.0
    assert again["sides"]["local"]["tok_s"] == 5.0 and again["sides"]["vllm"]["tok_s"] == 40.0
    assert again["loads"] == loads
    text = bench.format_report(report)
    assert "5.0 tok/s aggregate" in text and "40.0 tok/s aggregate" in text
    assert "200.0 / 400.0 / 400.0 ms (n=4)" in text
    assert "not stream batch requests" in text
    assert "aggregate tok/s 8.00" in text
    assert "0.50 to 3.25" in text
    alone = bench.build_report(config, {"local": local_runs()}, loads)
    assert alone["ratio"] is None and "ratio" not in bench.format_report(alone)


def test_summary_line_is_read_as_generate_prints_it():
    tally = Tally()
    for r in [record(7), record(9, valid=False), record(0, valid=False, finish="error")]:
        tally.add(r)
    tally.start = time.perf_counter() - 2.34  # the batch took 2.34 s
    stderr = "loading model...\n" + tally.summary() + "\n  ✗ <input>:3: boom\n"
    n, tokens, seconds = bench.parse_summary(stderr)
    assert (n, tokens) == (3, 16)
    assert 2.3 <= seconds <= 2.5
    assert bench.parse_summary("no summary here\n") is None


def test_failing_generate_shows_its_stderr_and_exit_code(tmp_path, capsys):
    cmd = [sys.executable, "-c", "import sys; sys.stderr.write('the real reason'); sys.exit(3)"]
    with pytest.raises(SystemExit) as exc:
        bench.run_generate(cmd, tmp_path / "out.jsonl")
    assert exc.value.code == 3
    assert "the real reason" in capsys.readouterr().err


def _script(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_bad_arguments_exit_2_before_anything_runs(tmp_path):
    missing = tmp_path / "no-such-prompts.jsonl"
    done = _script("--input", str(missing), "--regex", "[a-z]+")
    assert done.returncode == 2
    assert str(missing) in done.stderr and "no such file" in done.stderr
    assert done.stdout == ""  # no round started

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "fine"}\n{"prompt": \n')
    done = _script("--input", str(bad), "--regex", "[a-z]+")
    assert done.returncode == 2 and f"{bad}:2" in done.stderr and "invalid JSON" in done.stderr

    good = tmp_path / "good.jsonl"
    good.write_text('{"prompt": "fine"}\n')
    done = _script("--input", str(good))
    assert done.returncode == 2 and "no constraint" in done.stderr
    done = _script("--input", str(good), "--schema", str(tmp_path / "absent.json"))
    assert done.returncode == 2 and "absent.json" in done.stderr


def test_old_invocation_still_means_the_built_in_batch_and_regex():
    args = bench.parse_args(["--base-url", "http://127.0.0.1:8765", "--requests", "8", "--concurrency", "4"])
    n, constraint = bench.validate(args)
    assert n == 8 and constraint == ["--regex", bench.DEFAULT_REGEX]
    args = bench.parse_args(["--regex", "[0-9]+", "--", "--temperature", "0.7"])
    assert bench.validate(args)[1] == ["--regex", "[0-9]+"] and args.passthrough == ["--temperature", "0.7"]
    with pytest.raises(bench.BadInput, match="--engine sglang needs --base-url"):
        bench.validate(bench.parse_args(["--engine", "sglang"]))
